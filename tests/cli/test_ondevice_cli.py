"""`workbench ondevice`: a thin front over workbench.ondevice.run_ondevice; bad input is exit 2 and one line."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.graph import load_export
from workbench.ondevice import load_ondevice


@pytest.mark.slow  # a long run for make test-fast: 9 s on 2 cores
def test_ondevice_from_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["ondevice", "--model", "tiny", "--trainable", "last", "--steps", "3", "--lr", "1e-3", "--threads", "1",
                 "--validation-examples", "8", "--max-train", "64", "--run-dir", str(run)])
    out = capsys.readouterr().out
    assert code == 0, out
    result = load_ondevice(run)
    assert result.loss_parity and len(result.ondevice_losses) == 3
    for what in ("training_model.onnx", "optimizer_model.onnx", "checkpoint", "trainable: last", "agree",
                 "median step ms", "peak RSS MiB", "onnxruntime.training.api", "pytorch eager", "step time",
                 f"workbench fuse {result.inference_dir}"):
        assert what in out, what
    assert result.ondevice.peak_rss_mib and result.pytorch.peak_rss_mib  # measured, printed, never asserted as timings
    assert load_export(result.inference_dir).validation.passed


def test_ondevice_json(tmp_path, capsys):
    code = main(["ondevice", "--steps", "2", "--no-memory", "--threads", "1", "--validation-examples", "4",
                 "--max-train", "32", "--run-dir", str(tmp_path / "r"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["loss_parity"] is True
    assert summary["artifacts"]["trainable"] == "head" and summary["artifacts"]["trainable_parameters"] == 66
    assert summary["ondevice"]["peak_rss_mib"] is None and summary["ondevice"]["median_step_ms"] > 0


@pytest.mark.parametrize("argv, expected", [
    (["--trainable", "layers"], "trainable must be one of ['head', 'last', 'all'], got 'layers'"),
    (["--trainable", "last", "--last-n", "5"], "--last-n is 5 but the model has 2 encoder layers"),
    (["--steps", "0"], "steps must be an integer of at least 1, got 0"),
    (["--optimizer", "SGD"], "optimizer must be one of ['AdamW']"),
    (["--loss", "MSELoss"], "loss must be one of ['CrossEntropyLoss']"),
    (["--model", "/no/such/folder"], "neither a built-in model"),
    (["--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["--trainable", "last", "--opset", "17"], "cannot differentiate the LayerNormalization operator"),
])
def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys, argv, expected):
    with pytest.raises(SystemExit) if argv[:2] == ["--steps", "many"] else _no_exit() as caught:
        code = main(["ondevice", *argv, "--no-memory", "--max-train", "32", "--run-dir", str(tmp_path / "r")])
    if caught is not None and getattr(caught, "value", None) is not None:
        code = caught.value.code
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2
    assert len(lines) == 1, captured.err
    assert expected in lines[0] and "error" in lines[0]
    assert "Traceback" not in captured.err and "onnxruntime_src" not in captured.err


class _no_exit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
