"""Shared by the on-device page tests (tests/unit/ondevice/test_ondevice_web.py, tests/ui/test_ondevice_page.py):
a tiny on-device run at a non-default learning rate, and Python's onnxruntime.training.api losses
with a chosen optimizer graph and fed learning rate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

LR = 3e-3  # not onnxruntime-web's 1e-3: the page must carry it
STEPS = 6


def tiny_run(folder: Path, data, **kw):
    from workbench.ondevice import OnDeviceConfig, run_ondevice

    cfg = OnDeviceConfig.quick(trainable="last", steps=STEPS, lr=LR, measure_memory=False, threads=1,
                               validation_examples=16, **kw)
    return run_ondevice("tiny", cfg, folder, data=data)


def page_run(folder: Path, data) -> Path:
    """A tiny run that wrote its web page (the module fixture of both page tests): its folder."""
    result = tiny_run(folder, data)
    assert result.ok and result.web_page is not None, result.web_note
    return folder


def ort_losses(run_dir: Path, optimizer_graph: Path, fed_lr: float) -> list[float]:
    """The run's batches trained from its initial checkpoint by Python's onnxruntime.training.api with
    ``optimizer_graph``, the runtime feeding ``fed_lr`` as the learning rate (the page's runtime feeds 1e-3)."""
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    from workbench.ondevice.web import BATCHES_BIN, CONFIG_FILE

    from workbench.ondevice.artifacts import quiet_onnxruntime

    art = Path(run_dir) / "artifacts"
    with quiet_onnxruntime():  # its INFO/WARNING lines about unused dropout constants
        state = CheckpointState.load_checkpoint(str(art / "checkpoint"))
        module = Module(str(art / "training_model.onnx"), state, str(art / "eval_model.onnx"))
        optimizer = Optimizer(str(optimizer_graph), module)
    optimizer.set_learning_rate(fed_lr)
    module.train()
    names = module.input_names()
    web = Path(run_dir) / "web"
    batches, _ = read_page_batches(web / CONFIG_FILE, web / BATCHES_BIN)
    out = []
    for b in batches:
        loss, _logits = module(*[b[n] for n in names])
        optimizer.step()
        module.lazy_reset_grad()
        out.append(float(loss))
    return out


def read_page_batches(config_path, bin_path):
    """The page's batches read back as the page reads them: ``(train, eval)``, lists of
    ``{name: int64 array}``."""
    config = json.loads(Path(config_path).read_text())
    raw = Path(bin_path).read_bytes()

    def unpack(index):
        return [{name: np.frombuffer(raw, dtype="<i8", count=t["count"], offset=t["offset"]).reshape(t["shape"])
                 for name, t in entry.items()} for entry in index]

    return unpack(config["train"]), unpack(config["eval"])


def logits_of(graph: Path, export) -> np.ndarray:
    """``graph``'s logits on an export's validation examples, tokenized as the export was."""
    import onnxruntime as ort

    tok = export.load_tokenizer()
    ex = export.load_examples()
    enc = tok(list(ex["text"]), padding="max_length", truncation=True, max_length=export.max_length, return_tensors="np")
    feeds = {k: enc[k].astype(np.int64) for k in export.input_names}
    return ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"]).run(["logits"], feeds)[0]
