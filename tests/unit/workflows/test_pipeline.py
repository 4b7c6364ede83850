"""The headless walkthrough (`workbench demo`): every stage runs and writes its results; a failing
stage is recorded, later stages that need it are skipped, and what was written survives."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from workbench import cli
from workbench.workflows.demo import DemoConfig, DemoResult, run_demo
from workbench.runs import load_result
from workbench.train import TrainConfig


def test_quick_demo_runs_every_stage_from_the_cli(tmp_path, capsys):
    run = tmp_path / "demo"
    code = cli.main(["demo", "--quick", "--steps", "6", "--run-dir", str(run)])
    out = capsys.readouterr().out
    assert code == 0, out
    result = load_result(DemoResult, run / "demo.json")
    assert [s.name for s in result.stages] == ["doctor", "data", "fine-tune", "export", "fuse", "quantize", "report"]
    assert all(s.status == "ok" for s in result.stages)
    for rel in ("train/compare.json", "export/export.json", "export/model.onnx", "fusion/fusion.json",
                "quantize/dynamic/quantize.json", "summary.md", "report.html", "summary.json"):
        assert (run / rel).is_file(), rel
    compare = json.loads((run / "train" / "compare.json").read_text())
    by_backend = {r["backend"]: r for r in compare["runs"]}
    assert by_backend["ortmodule"]["executed_in_onnxruntime"] is True, by_backend["ortmodule"]
    assert by_backend["eager"]["executed_in_onnxruntime"] is False
    # every figure named in the summary exists and embeds a plotly plot
    figures = [f for s in result.stages for f in s.figures]
    assert len(figures) >= 10
    for f in figures:
        assert "Plotly.newPlot" in Path(f).read_text()
    assert (run / "figures" / "plotly.min.js").is_file()  # the figures work offline
    summary = (run / "summary.md").read_text()
    assert "| fine-tune | ok |" in summary and "ran in ONNX Runtime: yes" in summary
    assert "== quantize ==" in out
    # the same one-page report as `workbench audit` writes
    from workbench.report import validate_summary

    report = json.loads((run / "summary.json").read_text())
    validate_summary(report)
    from workbench.quant import QuantConfig, machine_defaults

    machine = machine_defaults()  # the demo's INT8 presets follow this CPU, and the variant's notes say why
    assert report["kind"] == "demo" and report["training"]["runs"]
    assert report["quantization"][0]["name"] == QuantConfig.preset("dynamic", machine=machine).label
    assert any(machine.why in n for n in report["quantization"][0]["notes"])
    import html

    assert html.escape(report["verdict"]["text"], quote=True) in (run / "report.html").read_text()
    assert report["data"]["split_sizes"]["test"] == report["quantization"][0]["overall"]["n"]


def test_a_failing_stage_is_recorded_and_earlier_results_survive(tmp_path):
    cfg = DemoConfig.quick(train=TrainConfig.quick(model=str(tmp_path / "no-such-model"), max_steps=2))
    lines: list[str] = []
    result = run_demo(cfg, tmp_path / "run", log=lines.append)
    status = {s.name: s.status for s in result.stages}
    assert status == {"doctor": "ok", "data": "ok", "fine-tune": "failed", "export": "skipped", "fuse": "skipped", "quantize": "skipped",
                      "report": "ok"}
    report = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert report["verdict"]["status"] == "incomplete" and "fine-tune" in report["verdict"]["text"]
    failed = result.stage("fine-tune")
    assert "no-such-model" in failed.message and "neither a built-in model" in failed.message
    assert (tmp_path / "run" / "data.json").is_file() and (tmp_path / "run" / "doctor.txt").is_file()
    assert not result.ok
    assert "fine-tune: FAILED" in "\n".join(lines)
    assert "| fine-tune | failed:" in (tmp_path / "run" / "summary.md").read_text()


def test_the_demo_reports_the_fp32_test_accuracy_and_both_speed_ratios():
    """The demo prints the fine-tuned model's test accuracy (at least 0.80) from the FP32 logits it
    scored, and the fine-tune headline gives the steady-state and the start-up-inclusive ratio."""
    from types import SimpleNamespace

    import numpy as np

    from workbench.workflows.demo import _train_headline, fp32_test_accuracy

    logits = np.array([[2.0, 0.0], [0.0, 1.0], [0.3, 0.1], [0.0, 5.0]])
    test = SimpleNamespace(load_examples=lambda: [{"label": 0}, {"label": 1}, {"label": 1}, {"label": 1}],
                           fp32_logits=lambda: logits)
    baseline = SimpleNamespace(eval_set=lambda name: {"test": test}[name])
    assert fp32_test_accuracy(baseline) == (0.75, 4)

    from workbench.core.latency import Ratio as SpeedRatio
    from workbench.train import Backend, Ratio

    ratio = Ratio(backend=Backend.ORTMODULE, baseline=Backend.EAGER, throughput=1.6, memory=1.0, startup=0.5, max_loss_diff=0.0,
                  loss_within_tolerance=True, steps_compared=4, accuracy_diff=0.0, throughput_with_startup=0.9,
                  steady=SpeedRatio(1.6, 1.5, 1.7, 4), baseline_settings="AdamW (fused), batch 16x64")
    line = _train_headline(SimpleNamespace(runs=[], ratios=[ratio]))["ortmodule vs eager"]
    assert "1.60x (1.50-1.70) steady state" in line and "0.90x with start-up" in line
    assert "both with AdamW (fused), batch 16x64" in line and "NOT like for like" not in line
    odd = _train_headline(SimpleNamespace(runs=[], ratios=[dataclasses.replace(ratio, differs_in=["optimizer"])]))
    assert "NOT like for like: they differ in optimizer" in odd["ortmodule vs eager"]
