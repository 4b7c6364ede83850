"""On-device training: the four training artifacts, and why the gradient builder failed when it does."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Sequence

from .. import runs
from ..graph import file_size_mib
from .config import ARTIFACT_FILES, MAX_IR_VERSION, TRAINING_GRAPH, GradientGraphError, OnDeviceConfig, OnDeviceError, Trainable
from .result import ArtifactFile, Artifacts
from .trainable import POSITION_EMBEDDINGS_NOTE, is_position_embedding, trainable_names


@contextlib.contextmanager
def quiet_onnxruntime():
    """Keep ONNX Runtime's native INFO logging out of notebooks: building the gradient graph writes about 60
    INFO lines from C++ to fd 2, which the Python API cannot silence. fd 2 goes to a temporary file meanwhile
    and the lines that are not INFO are written back; severity is ERROR meanwhile (unused dropout warnings)."""
    import tempfile

    import onnxruntime as ort

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        ort.set_default_logger_severity(3)
        try:
            yield
        finally:
            ort.set_default_logger_severity(2)
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
            kept = [line for line in text.splitlines(keepends=True) if "[I:onnxruntime" not in line]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def session_options(threads: int):
    """One intra-op thread per PyTorch thread, and no spinning: the sides alternate in one process, and with
    spinning on, the tiny model's PyTorch eager steps took 1.2 s instead of milliseconds."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, int(threads))
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


def training_api():
    """``onnxruntime.training`` imports ORTModule (and so tries DeepSpeed); keep its known warning out."""
    from ..core.quiet import ortmodule_warnings

    ortmodule_warnings()
    try:
        from onnxruntime.training import artifacts as ort_artifacts
        from onnxruntime.training import onnxblock
        from onnxruntime.training.api import CheckpointState, Module, Optimizer
    except ImportError as exc:
        raise OnDeviceError(
            "on-device training needs the training build of ONNX Runtime (onnxruntime-training-cpu 1.19.2), which "
            f"provides onnxruntime.training.api: {exc}. Run `make setup` (or pip install onnxruntime-training-cpu==1.19.2)"
        ) from exc
    return ort_artifacts, onnxblock, CheckpointState, Module, Optimizer


def export_for_training(loaded, path: Path, opset: int, sample_texts: Sequence[str], max_length: int) -> list[str]:
    """Write the forward graph the artifacts are built from; its input names. Training mode and no constant
    folding, so nothing training needs is folded away and parameters keep PyTorch's names."""
    import torch

    from ..data.batches import encode, model_inputs
    from ..graph import without_ir_dump, standard_symbolics

    model = loaded.model
    enc = model_inputs(model, encode(loaded.tokenizer, list(sample_texts)[:2] or ["a sample sentence"], max_length))
    names = list(enc)
    dynamic = {k: {0: "batch", 1: "sequence"} for k in names}
    dynamic["logits"] = {0: "batch"}
    was_training = model.training
    try:
        with runs.atomic_path(path) as tmp, torch.no_grad(), without_ir_dump(), standard_symbolics(), warnings.catch_warnings():
            # Our own, deliberate request: the artifacts need a training-mode graph (see the module docstring).
            warnings.filterwarnings("ignore", message="Setting `training` to something other than default is deprecated",
                                    category=FutureWarning)
            # True and harmless: the padding row only gets gradient from padded positions, which the attention
            # mask cuts off (the loss curves agree with trainable='all' too, where the embeddings train).
            warnings.filterwarnings("ignore", message="Warning: ONNX export of embedding with padding_idx", category=UserWarning)
            torch.onnx.export(model, (), str(tmp), kwargs=enc, input_names=names, output_names=["logits"],
                              dynamic_axes=dynamic, opset_version=opset, do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING, dynamo=False)
    except Exception as exc:  # torch raises several types; the export stage explains them the same way
        from ..graph import ExportConfig as _EC, explain_export_failure

        raise OnDeviceError(str(explain_export_failure(exc, _EC(opset=opset), loaded.attn_implementation))) from exc
    finally:
        model.train(was_training)
    return names


def explain_gradient_failure(exc: BaseException, graph, opset: int) -> GradientGraphError:
    """Turn the gradient builder's C++ error into the operator it stopped at and the fix."""
    text = str(exc)
    detail = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    detail = re.sub(r"^/onnxruntime_src/\S+/", "", detail)
    cpp = re.match(r"(\S+\.\w+:\d+) .*?\)(?: const)? (.*)$", detail)  # file:line <C++ signature> <failed check>
    if cpp:
        detail = f"{cpp.group(1)}: {cpp.group(2)}"
    detail = detail[:300]
    nodes = list(graph.graph.node)
    if "OutputDefs().size()" in text:  # a gradient that reads an output the forward node does not have
        for op, outputs, fix, why in (
                ("LayerNormalization", 3, "export for training at opset 14, where LayerNorm is written as primitive operators: "
                 "OnDeviceConfig(opset=14) or `workbench ondevice --opset 14`", f"written with 1 output at opset {opset}; its "
                 "gradient reads the saved mean and inverse standard deviation, outputs 1 and 2"),
                ("Dropout", 2, "load the model with dropout off and eager attention (load_model(..., dropout=False, "
                 "attn_implementation='eager'), which this stage does for built-in models and folders)",
                 "without the mask output its gradient reads")):
            short = [n for n in nodes if n.op_type == op and len(n.output) < outputs]
            if short:
                return GradientGraphError(op, fix, detail, f"{len(short)} node(s), e.g. {short[0].name!r}, {why}")
    m = re.search(r"Duplicate definition of name \(([^)]*)\)", text)
    if m:
        tensor = m.group(1)
        base = tensor[: -len("_grad")] if tensor.endswith("_grad") else tensor
        users = [n for n in nodes if base and base in n.input]
        op = users[0].op_type if users else "?"
        where = f"{op} node {users[0].name!r} reading {base!r}" if users else f"the node producing {tensor!r}"
        if not base:
            where = "a node with an empty optional input (e.g. a LayerNorm without a bias, as in ModernBERT)"
            op = "LayerNormalization"
        return GradientGraphError(
            op,
            "train a smaller set (trainable='head' or 'last') or export at opset 14 in training mode; an architecture "
            "with bias-free LayerNorms cannot be trained by onnxruntime-training 1.19.2: train it with PyTorch "
            "(`workbench train --backend eager`) and export it afterwards", detail, f"{where}: its gradient is defined twice")
    op_hits = re.findall(r"\b([A-Z][A-Za-z]+)\b", text)
    known = {n.op_type for n in nodes}
    op = next((o for o in op_hits if o in known), "an operator of this graph")
    return GradientGraphError(
        op, "export at opset 14 (OnDeviceConfig(opset=14)) with eager attention and dropout off, or train fewer "
            "layers (trainable='head' or 'last')", detail)


def _fix_ir_versions(folder: Path) -> tuple[list[ArtifactFile], list[str]]:
    """Every artifact with its size after the fix and the IR version it was written with; the graphs rewritten."""
    files = [ArtifactFile(name, (folder / name).stat().st_size / 2**20) if name == "checkpoint" else
             ArtifactFile(name, ir_version=cap_ir_version(folder / name)[1], size_mib=file_size_mib(folder / name))
             for name in ARTIFACT_FILES]
    return files, [f.name for f in files if f.ir_version is not None and f.ir_version > MAX_IR_VERSION]


def cap_ir_version(path: Path):
    """``(graph, the IR version it was written with)``, rewritten at :data:`MAX_IR_VERSION` when newer."""
    import onnx

    proto = onnx.load(str(path))
    ir = int(proto.ir_version)
    if ir > MAX_IR_VERSION:
        proto.ir_version = MAX_IR_VERSION
        with runs.atomic_path(path) as tmp:
            onnx.save(proto, str(tmp))
    return proto, ir


def build_artifacts(loaded, cfg: OnDeviceConfig, folder: str | os.PathLike, sample_texts: Sequence[str] = ()) -> Artifacts:
    """Export ``loaded`` for training and write the four artifacts into ``folder``, replaced as a whole."""
    import onnx

    ort_artifacts, onnxblock, *_ = training_api()
    folder = Path(folder)
    names = trainable_names(loaded.model, cfg.trainable, cfg.last_n_layers, cfg.train_position_embeddings)
    params = dict(loaded.model.named_parameters())
    with runs.atomic_dir(folder) as tmp:
        t0 = time.perf_counter()
        base_path = tmp / TRAINING_GRAPH
        export_for_training(loaded, base_path, cfg.opset, sample_texts, cfg.max_length)
        export_seconds = time.perf_counter() - t0
        graph = onnx.load(str(base_path))
        initializers, chosen = [i.name for i in graph.graph.initializer], set(names)
        missing = sorted(chosen - set(initializers), key=names.index)
        if missing:
            raise OnDeviceError(
                f"{len(missing)} parameter(s) chosen to train are not initializers of the exported graph (e.g. {missing[0]!r}): "
                "the exporter renamed or folded them; export without constant folding, or choose another trainable set")
        requires_grad = [n for n in initializers if n in chosen]
        frozen = [n for n in initializers if n not in chosen]
        optimizer = onnxblock.optim.AdamW(betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay)
        t0 = time.perf_counter()
        try:
            with quiet_onnxruntime():
                # logits as a second output of the training and eval graphs: the web page computes its
                # accuracy from the eval graph (the loss alone cannot say which class won)
                ort_artifacts.generate_artifacts(graph, requires_grad=requires_grad, frozen_params=frozen,
                                                 loss=getattr(ort_artifacts.LossType, cfg.loss), optimizer=optimizer,
                                                 artifact_directory=str(tmp), additional_output_names=["logits"])
        except RuntimeError as exc:
            raise explain_gradient_failure(exc, graph, cfg.opset) from None
        generate_seconds = time.perf_counter() - t0
        files, fixed = _fix_ir_versions(tmp)
        nodes = len(onnx.load(str(tmp / "training_model.onnx"), load_external_data=False).graph.node)
    notes = []
    if cfg.trainable is Trainable.ALL and any(is_position_embedding(n) for n in params):
        notes.append(POSITION_EMBEDDINGS_NOTE if not cfg.train_position_embeddings else
                     "position embeddings train (train_position_embeddings=True): expect the loss curves to part, "
                     + POSITION_EMBEDDINGS_NOTE.split(": ", 1)[1].split("; OnDevice")[0])
    if fixed:
        notes.append(f"{', '.join(fixed)} written with an IR version onnxruntime 1.19.2 refuses "
                     f"({', '.join(str(f.ir_version) for f in files if f.name in fixed)}): rewritten as IR {MAX_IR_VERSION}")
    return Artifacts(
        folder=folder.resolve(), files=files, trainable=cfg.trainable, last_n_layers=cfg.last_n_layers,
        trainable_parameters=int(sum(params[n].numel() for n in requires_grad)),
        total_parameters=int(sum(p.numel() for p in params.values())), trainable_tensors=requires_grad,
        frozen_tensors=len(frozen), loss=cfg.loss, optimizer=cfg.optimizer, opset=cfg.opset, training_graph_nodes=nodes,
        export_seconds=export_seconds, generate_seconds=generate_seconds, ir_version_fixed=fixed, notes=notes)
