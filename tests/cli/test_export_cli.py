"""`workbench export` and `workbench fuse`: thin fronts over run_export and run_fusion."""

from __future__ import annotations

import json

from workbench.cli import main
from workbench.graph import load_export
from workbench.graph import load_fusion


def test_export_then_fuse_from_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["export", "--model", "tiny", "--preset", "quick", "--validation-examples", "8", "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "validation: passed" in out and f"workbench fuse {run}" in out
    exported = load_export(run / "export")  # the run layout: export/export.json
    assert exported.validation.passed and exported.config.validation_examples == 8

    code = main(["fuse", str(run), "--preset", "inspect", "--variants", "transformer", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["all_passed"] is True
    assert [v["name"] for v in summary["variants"]] == ["unoptimized", "transformer"]
    assert summary["variants"][1]["fused_ops"]["Attention"] == 2
    assert summary["fused_path"] == str(run / "fusion" / "model_fused.onnx")
    assert load_fusion(run / "fusion").fused_path == run / "fusion" / "model_fused.onnx"  # the run layout: fusion/

    assert main(["fuse", str(run), "--preset", "quick", "--variants", "ort_extended", "--shapes", "1x8"]) == 0
    text = capsys.readouterr().out
    assert "ort_extended" in text and "1x8 ms" in text and "pytorch" in text


def test_cli_errors_are_one_actionable_line(tmp_path, capsys):
    assert main(["export", "--model", "tiny", "--preset", "quick", "--opset", "13", "--attn", "sdpa",
                 "--run-dir", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "workbench: error:" in err and "scaled_dot_product_attention" in err and "--opset 14" in err
    assert main(["export", "--model", "tiny", "--opset", "9", "--run-dir", str(tmp_path / "b")]) == 2
    assert "opset must be an integer from 11 to 20, got 9" in capsys.readouterr().err
    assert main(["fuse", str(tmp_path / "missing")]) == 2
    assert "run the export first" in capsys.readouterr().err
