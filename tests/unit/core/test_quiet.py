"""Messages a learner should not see are stopped at their source, and nothing else is
(workbench.core.quiet, and the dynamic-quantization filter in workbench.quant.quantize)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from workbench.core import quiet

REPO = Path(__file__).resolve().parents[3]


def _python(code: str) -> subprocess.CompletedProcess:
    # CUDA_HOME set to a folder: torch's CUDA build then always looks there and, finding no GPU,
    # prints the line (on this machine an `nvcc` on the PATH does the same without it)
    env = {**os.environ, "CUDA_HOME": "/nonexistent-cuda", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=REPO)


def test_import_onnxruntime_prints_no_cuda_home_line_after_workbench() -> None:
    plain = _python("import onnxruntime")
    assert quiet.CUDA_HOME_LINE in plain.stderr  # the problem, as a learner's kernel had it
    quieted = _python("import workbench, onnxruntime, torch.utils.cpp_extension as m; print(m.CUDA_HOME)")
    assert quieted.returncode == 0, quieted.stderr
    assert quiet.CUDA_HOME_LINE not in quieted.stderr, quieted.stderr
    assert quieted.stdout.strip() == "/nonexistent-cuda"  # the module itself is unchanged


def test_other_stderr_text_is_written_back() -> None:
    import io

    out = io.StringIO()
    quiet.write_back(f"{quiet.CUDA_HOME_LINE}'/usr/local'\nsomething else\n", quiet.CUDA_HOME_LINE, out)
    assert out.getvalue() == "something else\n"


def _record(msg: str) -> logging.LogRecord:
    return logging.LogRecord("transformers.modeling_utils", logging.WARNING, __file__, 1, msg, None, None)


def test_new_head_warning_dropped_only_for_the_classifier_head() -> None:
    f = quiet._NewHeadWarning()
    head = ("Some weights of BertForSequenceClassification were not initialized from the model checkpoint at /m and "
            "are newly initialized: ['classifier.bias', 'classifier.weight']\nYou should probably TRAIN this model")
    encoder = head.replace("['classifier.bias', 'classifier.weight']", "['bert.encoder.layer.0.attention.self.query.weight']")
    assert f.filter(_record(head)) is False
    assert f.filter(_record(encoder)) is True
    assert f.filter(_record("something else entirely")) is True


def test_fine_tuning_minilm_loads_without_the_new_head_warning() -> None:
    from workbench.models.load import load_model

    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger("transformers.modeling_utils")
    handler = Collect(logging.WARNING)
    logger.addHandler(handler)  # sees what passes the logger's filters, as transformers' own stderr handler does
    try:
        with quiet.new_classifier_head_expected():
            load_model("minilm", num_labels=2)
        assert not any("newly initialized" in m for m in seen), seen
        load_model("minilm", num_labels=2)  # outside the block the warning is still there
        assert any("newly initialized" in m for m in seen)
    finally:
        logger.removeHandler(handler)


def test_dynamic_quantization_without_the_preprocessing_advice(exported_tiny, tmp_path: Path, caplog) -> None:
    from onnxruntime.quantization import quantize_dynamic

    from workbench.quant import QuantConfig, quantize_graph

    caplog.set_level(logging.WARNING)
    quantize_graph(exported_tiny.onnx_path, QuantConfig.preset("dynamic"), tmp_path / "ours.onnx")
    assert "pre-processing" not in caplog.text
    quantize_dynamic(str(exported_tiny.onnx_path), str(tmp_path / "plain.onnx"),
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    assert "Please consider to run pre-processing before quantization" in caplog.text  # ONNX Runtime's own call
    assert not logging.getLogger().filters  # the filter did not outlive its call


@pytest.mark.slow  # a long run for make test-fast: 7 s on 2 cores
def test_an_ortmodule_run_raises_no_python_warnings(tmp_path: Path) -> None:
    """In a fresh process with the default warning filters, as a kernel has them (a warning is shown
    once per location, so an earlier test in this process could hide it)."""
    code = (
        "import tempfile\n"
        "from workbench.train import TrainConfig, run_training\n"
        "run = run_training(TrainConfig.quick(max_steps=2, eval_every=0, save_graphs=False), 'ortmodule', run_dir=tempfile.mkdtemp())\n"
        "assert run.executed_in_onnxruntime, run.reason\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    assert quiet.CUDA_HOME_LINE not in done.stderr


def test_entropy_calibration_prints_no_progress_lines(exported_tiny, capsys) -> None:
    """onnxruntime's histogram calibrator prints its progress to stdout; the workbench's calibrate()
    drops exactly those lines, and text printed beside them comes back."""
    import tempfile

    from onnxruntime.quantization import CalibrationMethod, create_calibrator

    from workbench.runtime.ortinfer import make_feed, make_session, synthetic_batch
    from workbench.quant import QuantConfig
    from workbench.quant.quantize import feeds_reader, calibrate
    from workbench.core.quiet import CALIBRATOR_LINES, calibrator_prints

    session = make_session(exported_tiny.onnx_path)
    feeds = [make_feed(session, synthetic_batch(2, 8, 1000, seed=i)) for i in range(2)]
    cfg = QuantConfig.preset("static-entropy", calibration={"samples": 8})
    assert calibrate(exported_tiny.onnx_path, cfg, feeds)
    assert not any(line in capsys.readouterr().out for line in CALIBRATOR_LINES)
    with tempfile.TemporaryDirectory() as tmp:  # onnxruntime's own call prints them
        cal = create_calibrator(exported_tiny.onnx_path, list(cfg.resolved_op_types()),
                                augmented_model_path=f"{tmp}/aug.onnx", calibrate_method=CalibrationMethod.Entropy)
        cal.collect_data(feeds_reader(feeds))
        cal.compute_data()
    assert "Collecting tensor data and making histogram" in capsys.readouterr().out
    with calibrator_prints():
        print("Number of tensors : 3")
        print("kept: a line of our own")
    assert capsys.readouterr().out == "kept: a line of our own\n"
