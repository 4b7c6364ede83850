"""Bring the weights trained in the web page back: ``import_parameters(run, file) -> BrowserImport``.

The page downloads ``getContiguousParameters(true)`` (the trainable parameters as one float32 buffer, in
checkpoint order). The browser cannot save a checkpoint or export a graph, so here the buffer goes into
the run's initial checkpoint (``Module.copy_buffer_to_parameters``) and the module is exported and
validated like any on-device run.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from .. import runs
from ..graph import Validation
from ..runs import layout
from .artifacts import quiet_onnxruntime, training_api
from .config import ARTIFACTS_DIR, TRAINED_CHECKPOINT, TRAINED_MODEL_DIR, OnDeviceError
from .web import ORT_WEB_VERSION, OPTIMIZER_GRAPH, PARAMS_DOWNLOAD, baked_learning_rate

TRAINED_IN = f"browser (onnxruntime-web {ORT_WEB_VERSION})"


@dataclass(frozen=True)
class BrowserImport:
    """Parameters trained in the page, folded into the checkpoint and exported for inference."""

    trained_in: str
    run_dir: Path
    parameters_file: Path  # the copy kept in <run>/browser/
    source_file: str  # the file given
    parameters_sha256: str
    parameters: int  # float32 values (the trainable parameters of the run)
    learning_rate: Optional[float]  # the rate the page's optimizer graph carried
    weights_moved: float  # largest change of a trainable weight against the initial checkpoint
    checkpoint: Path
    export_dir: Path  # holds export.json: give it to workbench fuse / quantize
    validation: Validation  # the inference graph vs PyTorch holding the browser-trained weights
    notes: list[str] = field(default_factory=list)


def run_root(run: str | os.PathLike) -> Path:
    path = Path(run)
    if path.is_file():
        path = path.parent
    root = layout.root_by_name(path) or path
    if not (root / layout.ONDEVICE_FILE).is_file():
        raise OnDeviceError(f"{run} is not an on-device run (no {layout.ONDEVICE_FILE}); give the folder `workbench ondevice` "
                            "wrote, the one whose web page trained the parameters")
    return root


def read_parameters(path: str | os.PathLike, expected: int) -> np.ndarray:
    """The float32 values of a downloaded parameter file, checked for size and finiteness."""
    path = Path(path)
    if not path.is_file():
        raise OnDeviceError(f"parameters file {path} does not exist; download it from the run's page "
                            f"('Download trained parameters' saves {PARAMS_DOWNLOAD})")
    size = path.stat().st_size
    if size % 4:
        raise OnDeviceError(f"parameters file {path} holds {size} bytes, not a whole number of float32 values; "
                            f"give the {PARAMS_DOWNLOAD} the page downloaded, unchanged")
    if size // 4 != expected:
        raise OnDeviceError(f"parameters file {path} holds {size // 4} float32 values, but this run trains {expected}; "
                            "give the file this run's page downloaded (another run or trainable set has another size)")
    values = np.fromfile(path, dtype="<f4")
    if not np.all(np.isfinite(values)):
        raise OnDeviceError(f"parameters file {path} holds {int((~np.isfinite(values)).sum())} NaN or infinite values: "
                            "training diverged in the browser; rerun `workbench ondevice` with a lower --lr")
    return values.astype(np.float32)


def import_parameters(run: str | os.PathLike, params_file: str | os.PathLike, *, data=None) -> BrowserImport:
    """Fold ``params_file`` into ``run``'s initial checkpoint, export and validate in ``<run>/browser/``, save
    ``browser.json``. ``data``: the run's ``DatasetDict`` when it was not the config's."""
    from ..data.load import DataConfig, load_data
    from .data import load_ondevice_model
    from .result import load_ondevice
    from .stage import export_trained

    root = run_root(run)
    result = load_ondevice(root)
    cfg = result.config
    art = root / ARTIFACTS_DIR
    _, _, CheckpointState, Module, _ = training_api()
    with quiet_onnxruntime():
        state = CheckpointState.load_checkpoint(str(art / "checkpoint"))
        module = Module(str(art / "training_model.onnx"), state, str(art / "eval_model.onnx"))
    expected = int(module.get_parameters_size(True))
    values = read_parameters(params_file, expected)
    from onnxruntime import OrtValue

    # the wrapper's own signature says OrtValue, but 1.19.2 passes it straight to the binding, which takes the C++ value
    module.copy_buffer_to_parameters(OrtValue.ortvalue_from_numpy(values)._ortvalue, True)
    back = np.asarray(module.get_contiguous_parameters(True).numpy())
    if not np.array_equal(back, values):  # the copy went where the page's getContiguousParameters read from
        raise OnDeviceError(f"the parameters of {params_file} did not round-trip through the checkpoint; rebuild the run")

    if data is None:
        data = load_data(DataConfig(source=cfg.data, max_train=cfg.max_train, max_eval=max(cfg.validation_examples, 64)))
    if not result.model:
        raise OnDeviceError(f"{root / layout.ONDEVICE_FILE} does not say which model the run started from (written before "
                            "the web page existed); rerun `workbench ondevice` and train its page")
    loaded = load_ondevice_model(result.model, cfg, list(result.class_names))
    params = state.parameters
    initial = {n: p.detach().clone() for n, p in loaded.model.named_parameters()}
    trained = {n: np.asarray(params[n].data) for n, _ in loaded.model.named_parameters() if n in params}
    start = CheckpointState.load_checkpoint(str(art / "checkpoint")).parameters
    moved = max(float(np.abs(trained[n] - np.asarray(start[n].data)).max()) for n in result.artifacts.trainable_tensors)
    notes = []
    if moved == 0:
        notes.append("the parameters equal the untrained ones: the page's download was made before training")

    out = root / layout.BROWSER_DIR
    out.mkdir(parents=True, exist_ok=True)
    export = export_trained(
        module, loaded, cfg, data, list(result.class_names), trained, initial, out, out / TRAINED_MODEL_DIR,
        f"{loaded.name}+browser", "the browser-trained inference graph (vs PyTorch holding the browser-trained weights)",
        TRAINED_IN)
    ckpt = out / TRAINED_CHECKPOINT
    with runs.atomic_path(ckpt) as tmp:
        CheckpointState.save_checkpoint(state, str(tmp))
    kept = runs.atomic_copy(params_file, out / PARAMS_DOWNLOAD) if Path(params_file).resolve() != (out / PARAMS_DOWNLOAD).resolve() \
        else out / PARAMS_DOWNLOAD
    page_graph = root / layout.ONDEVICE_WEB_DIR / OPTIMIZER_GRAPH
    record = BrowserImport(
        trained_in=TRAINED_IN, run_dir=root.resolve(), parameters_file=kept.resolve(), source_file=str(params_file),
        parameters_sha256=hashlib.sha256(Path(kept).read_bytes()).hexdigest(), parameters=int(values.size),
        learning_rate=baked_learning_rate(page_graph) if page_graph.is_file() else None, weights_moved=moved,
        checkpoint=ckpt.resolve(), export_dir=Path(export.onnx_path).parent, validation=export.validation, notes=notes)
    runs.save_result(record, out / layout.BROWSER_FILE)
    return record


def import_table(r: BrowserImport) -> str:
    lines = [f"trained in: {r.trained_in}",
             f"parameters: {r.parameters:,} float32 from {r.source_file} (sha256 {r.parameters_sha256[:16]}...), "
             f"learning rate in the page: {f'{r.learning_rate:.6g}' if r.learning_rate is not None else 'unknown'}; "
             f"largest change against the initial checkpoint {r.weights_moved:.3g}",
             f"checkpoint: {r.checkpoint}",
             f"inference graph: {r.export_dir}",
             f"  {r.validation.message}"]
    lines.extend(f"note: {n}" for n in r.notes)
    return "\n".join(lines)
