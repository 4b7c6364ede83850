"""Comparison of backends: ratios, loss parity with a justified tolerance, fallbacks kept out of
every ratio, JSON round trip, and the CLI front (`workbench compare ... --json`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from workbench.train import (
    BF16_TOLERANCE,
    DROPOUT_TOLERANCE,
    FP32_TOLERANCE,
    Comparison,
    compare,
    comparison_table,
    load_comparison,
    run_comparison,
)
from workbench.train import Backend, CompareConfig, RunStatus, TrainConfig, TrainConfigError, run_training
from workbench.train.compare import paired_step_ratio


@pytest.fixture(scope="module")
def comparison(tiny_comparison) -> Comparison:
    return tiny_comparison[0]  # eager vs ORTModule, tiny model, 10 steps (conftest)


def _shift_losses(run, delta: float, from_step: int = 3):
    steps = [dataclasses.replace(s, loss=s.loss + (delta if s.step >= from_step else 0.0)) for s in run.steps]
    return dataclasses.replace(run, steps=steps)


def test_ratios_and_parity(comparison):
    c = comparison
    assert c.baseline is Backend.EAGER and c.tolerance == FP32_TOLERANCE and "dropout off" in c.parity_basis
    eager, ort = c.summary("eager"), c.summary("ortmodule")
    assert ort.executed_in_onnxruntime and not ort.fell_back and ort.comparable
    r = c.ratio("ortmodule")
    assert r.throughput == pytest.approx(ort.throughput.value / eager.throughput.value)
    assert r.throughput == pytest.approx(eager.median_step_time.value / ort.median_step_time.value)
    assert r.memory == pytest.approx(eager.peak_memory.value / ort.peak_memory.value)
    assert r.steps_compared == 10 and r.max_loss_diff < FP32_TOLERANCE and r.loss_within_tolerance and c.loss_parity
    # every figure carries its unit and direction
    units = {m.name: (m.unit, m.higher_is_better) for m in ort.metrics()}
    assert units["throughput"] == ("samples/s", True) and units["peak memory"] == ("MiB", False)
    assert units["median step time"] == ("s", False)
    with pytest.raises(KeyError, match="baseline"):
        c.ratio("eager")


def test_saved_next_to_the_runs_and_loads_back(comparison):
    c = comparison
    again = load_comparison(c.run_dir)
    assert again.ratios == c.ratios and again.summaries[1].throughput == c.summaries[1].throughput
    assert [r.backend for r in again.runs] == [Backend.EAGER, Backend.ORTMODULE]
    assert json.loads((Path(c.run_dir) / "compare.json").read_text())["baseline"] == "eager"
    table = comparison_table(c)
    assert "ortmodule" in table and "1.00x" in table and "loss parity: yes" in table


def test_a_defect_in_the_loss_curve_breaks_parity(comparison, tmp_path):
    eager, ort = comparison.runs
    # a real defect: the same training with twice the learning rate, presented as the other backend
    doubled = run_training(eager.config.replace(lr=2 * eager.config.lr), "eager", tmp_path)
    c = compare([eager, dataclasses.replace(doubled, backend=Backend.ORTMODULE)])
    assert not c.loss_parity and c.ratio("ortmodule").max_loss_diff > FP32_TOLERANCE
    assert any("other shared settings than eager (lr)" in n and "not like for like" in n for n in c.notes)
    assert not c.ratio("ortmodule").like_for_like and c.ratio("ortmodule").differs_in == ["lr"]
    assert compare([eager, _shift_losses(ort, 0.005)], tolerance=0.01).loss_parity  # a caller's wider tolerance
    assert not compare([eager, _shift_losses(ort, 0.005)]).loss_parity
    with pytest.raises(ValueError, match="tolerance must be a positive"):
        compare([eager, ort], tolerance=0)


def test_tolerance_follows_precision_and_dropout(comparison):
    eager, ort = comparison.runs
    with_cfg = lambda r, **kw: dataclasses.replace(r, config=r.config.replace(**kw))  # noqa: E731
    assert compare([with_cfg(eager, precision="bf16"), with_cfg(ort, precision="bf16")]).tolerance == BF16_TOLERANCE
    drop = compare([with_cfg(eager, dropout=True), with_cfg(ort, dropout=True)])
    assert drop.tolerance == DROPOUT_TOLERANCE and "moving averages" in drop.parity_basis
    # with dropout, single-step noise is averaged out; a lasting shift is not
    noisy = [dataclasses.replace(s, loss=s.loss + (0.15 if s.step == 5 else 0.0)) for s in ort.steps]
    assert compare([with_cfg(eager, dropout=True), dataclasses.replace(with_cfg(ort, dropout=True), steps=noisy)]).loss_parity


def test_the_moving_average_of_dropout_runs_is_the_mean_of_the_last_w_steps():
    from workbench.train.compare import _moving_average

    assert _moving_average([1.0, 2.0, 3.0, 4.0, 5.0], 2) == [1.0, 1.5, 2.5, 3.5, 4.5]
    assert _moving_average([2.0, 4.0], 10) == [2.0, 3.0]  # fewer steps than the window: the mean so far


def test_a_run_that_fell_back_never_enters_a_ratio(comparison):
    eager, ort = comparison.runs
    fell = dataclasses.replace(ort, status=RunStatus.FELL_BACK, executed_in_onnxruntime=False,
                               reason="ORTModule fell back to PyTorch at step 1 ...")
    c = compare([eager, fell])
    assert c.ratios == [] and c.summary("ortmodule").fell_back and not c.summary("ortmodule").comparable
    assert any("fell_back" in n and "left out of every ratio" in n for n in c.notes)
    with pytest.raises(KeyError):
        c.ratio("ortmodule")


def test_bad_requests_are_rejected_before_training(tmp_path, comparison, monkeypatch):
    import torch

    # bf16 that eager could train (a CPU with bf16; this one may have none) and
    # ORTModule cannot: the ORTModule check must refuse the pair before eager, listed first, trains
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    with pytest.raises(TrainConfigError, match="bf16.*ortmodule"):
        run_comparison(TrainConfig.quick(precision="bf16"), CompareConfig(backends=("eager", "ortmodule")), tmp_path)
    assert list(tmp_path.iterdir()) == []  # eager did not run first
    with pytest.raises(TrainConfigError, match="must not repeat"):
        CompareConfig(backends=("eager", "eager"))
    with pytest.raises(TrainConfigError, match="backend must be one of"):
        CompareConfig(backends=("eager", "tensorrt"))
    with pytest.raises(TrainConfigError, match="tolerance must be a positive number"):
        CompareConfig(tolerance=0)
    with pytest.raises(TrainConfigError, match="compare_cfg must be a CompareConfig"):
        run_comparison(TrainConfig.quick(), ["eager"], tmp_path)
    with pytest.raises(ValueError, match="baseline backend 'compile' is not among"):
        compare(comparison.runs, baseline="compile")
    with pytest.raises(ValueError, match="two runs for backend"):
        compare([comparison.runs[0], comparison.runs[0]])


@pytest.mark.slow  # a long run for make test-fast: 14 s on 2 cores
@pytest.mark.timeout(1200)  # two isolated child processes; 583 s measured at load average 25
def test_cli_compare_json_names_every_backend_and_fallback(tmp_path, capsys):
    """The CLI runs each backend in its own process by default (per-backend peak memory)."""
    from workbench.cli import main

    rc = main(["compare", "--backends", "eager,ortmodule", "--steps", "3", "--eval-every", "0",
               "--run-dir", str(tmp_path), "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert rc == 0 and set(out["backends"]) == {"eager", "ortmodule"} and out["loss_parity"] is True
    ort = out["backends"]["ortmodule"]
    assert ort["fell_back"] is False and ort["executed_in_onnxruntime"] is True and ort["status"] == "ok"
    assert {m["unit"] for m in ort["metrics"]} >= {"s", "samples/s", "MiB"}
    # the throughput ratio is ORTModule's samples/s over eager's, as printed per backend
    def samples_per_s(backend: str) -> float:
        return next(m["value"] for m in out["backends"][backend]["metrics"] if m["unit"] == "samples/s")

    c = load_comparison(tmp_path / "train")  # the run layout: <run>/train/compare.json
    pids = {r.environment["pid"] for r in c.runs}
    assert len(pids) == 2 and all(r.environment["isolated"] == "1" for r in c.runs)
    # the two processes took turns step by step: the throughput ratio pairs their steps, with its interval
    r = out["ratios"]["ortmodule"]
    assert r["steady"] is not None and len({x.environment["lockstep"] for x in c.runs}) == 1
    want = paired_step_ratio(c.run("eager"), c.run("ortmodule"))
    assert r["throughput"] == pytest.approx(want.value) and r["steady"]["lo"] <= r["throughput"] <= r["steady"]["hi"]
    assert c.ratio("ortmodule").steady == want and c.ratio("ortmodule").interleaved
    assert r["baseline_settings"] and r["differs_in"] == []
    assert samples_per_s("ortmodule") > 0 and samples_per_s("eager") > 0
    assert out["verdicts"][0]["backend"] == "ortmodule" and "with the same settings" in out["verdicts"][0]["text"]
    assert (tmp_path / "train" / "verdict.json").is_file()


def test_cli_train_reports_a_bad_flag_combination(tmp_path, capsys):
    from workbench.cli import main

    rc = main(["train", "--backend", "ortmodule", "--precision", "bf16", "--run-dir", str(tmp_path)])
    assert rc == 2 and "no bf16 MatMul kernel" in capsys.readouterr().err


@pytest.mark.slow  # a long run for make test-fast: 7 s on 2 cores
def test_cli_compare_works_from_another_directory(tmp_path):
    """The per-backend child process once read its config through a path relative to the
    caller's directory while running in the repository: from anywhere else it failed."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "compare", "--backends", "eager", "--steps", "2",
                           "--eval-every", "0", "--runs", "relative-runs", "--json"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(repo)})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "relative-runs").iterdir()
    assert json.loads(proc.stdout)["backends"]["eager"]["status"] == "ok"
    assert (run_dir / "train" / "compare.json").is_file() and (run_dir / "train" / "eager" / "train.json").is_file()


def test_a_ratio_saved_with_its_interval_as_two_fields_is_refused_naming_where_it_is_now():
    """compare.json written before the steady-state ratio was one Ratio kept its interval as throughput_lo/_hi:
    refused in one line naming the key's place now, not read through a compatibility layer."""
    from workbench.core.latency import Ratio as SpeedRatio
    from workbench.core.serial import OutdatedKey, from_dict, to_dict
    from workbench.train import Ratio

    old = {"backend": "ortmodule", "baseline": "eager", "throughput": 1.6, "memory": 1.0, "startup": 0.5, "max_loss_diff": 0.0,
           "loss_within_tolerance": True, "steps_compared": 12, "accuracy_diff": 0.0, "throughput_with_startup": 0.9,
           "throughput_lo": 1.5, "throughput_hi": 1.7, "interleaved": True, "baseline_settings": "AdamW", "differs_in": []}
    with pytest.raises(OutdatedKey, match="'throughput_lo' .* is steady.lo now"):
        from_dict(Ratio, old)
    r = Ratio(backend="ortmodule", baseline="eager", throughput=1.6, memory=1.0, startup=0.5, max_loss_diff=0.0,
              loss_within_tolerance=True, steps_compared=12, accuracy_diff=0.0, throughput_with_startup=0.9,
              steady=SpeedRatio(1.6, 1.5, 1.7, 12))
    assert r.interleaved and r.speed_text() == "1.60x (1.50-1.70)" and from_dict(Ratio, to_dict(r)) == r
