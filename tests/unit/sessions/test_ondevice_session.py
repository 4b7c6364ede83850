"""OnDeviceSession without a widget: the tiny model's training artifacts trained on the device beside
PyTorch eager for a few steps through the session, into its run folder, its web page served on
127.0.0.1 until the session is closed; bad inputs refused naming the input before anything is written."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

from workbench.ondevice import OnDeviceConfig, OnDeviceResult
from workbench.runs.lock import LOCK_FILE
from workbench.sessions.base import InputError
from workbench.sessions.ondevice import OnDeviceSession

STEPS = 4
QUICK = OnDeviceConfig.quick(trainable="last", steps=STEPS, threads=1, measure_memory=False, validation_examples=16)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, quick_data):
    steps = []
    s = OnDeviceSession(data=quick_data, run_dir=tmp_path_factory.mktemp("ondevice-session"),
                        progress=lambda done, total, eta, detail: steps.append((done, total)))
    s.train("tiny", QUICK)
    s.steps = steps
    yield s
    s.close()


@pytest.mark.train
@pytest.mark.slow
def test_train_keeps_the_result_written_into_the_run_folder(trained: OnDeviceSession) -> None:
    r = trained.result
    assert isinstance(r, OnDeviceResult) and trained.history == [r]
    assert r.loss_parity and len(r.ondevice_losses) == STEPS and r.validation.passed
    run = Path(trained.run_dir)
    assert (run / "ondevice.json").is_file() and (run / "artifacts" / "training_model.onnx").is_file()
    assert Path(r.inference_dir).resolve().is_relative_to(run.resolve())
    assert (run / LOCK_FILE).read_text() == "", "the run folder's lock is released after training"
    assert trained.steps[-1] == (STEPS, STEPS), trained.steps


@pytest.mark.train
@pytest.mark.slow
def test_the_runs_web_page_is_served_on_127_0_0_1_until_closed(trained: OnDeviceSession, listening) -> None:
    assert trained.page_dir() == Path(trained.run_dir), trained.result.web_note
    before = listening(os.getpid())
    url = trained.serve_page()
    port = trained.page_server.httpd.server_address[1]
    assert url.startswith(f"http://127.0.0.1:{port}") and listening(os.getpid()) - before == {("127.0.0.1", port)}
    with urllib.request.urlopen(url, timeout=30) as page:
        assert page.status == 200 and b"app.js" in page.read()
    trained.close()
    assert trained.page_server is None and ("127.0.0.1", port) not in listening(os.getpid())


def test_bad_inputs_are_refused_naming_the_input_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="data must be a workbench.data.load.DataConfig or a datasets.DatasetDict, got int"):
        OnDeviceSession(data=3)
    s = OnDeviceSession(run_dir=tmp_path / "run")
    with pytest.raises(InputError, match="model is empty: choose 'tiny', 'minilm' or a checkpoint folder"):
        s.train("  ", QUICK)
    with pytest.raises(FileNotFoundError, match="no web page to serve: train on the device first"):
        s.serve_page()
    assert not (tmp_path / "run").exists() and s.result is None and s.page_server is None
