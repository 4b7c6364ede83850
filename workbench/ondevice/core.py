"""On-device training: export a fine-tuned classifier as ONNX Runtime training artifacts, keep
training it with ``onnxruntime.training.api`` (no PyTorch in the loop), and prove it.

ONNX Runtime's training story has two halves. ORTModule (:mod:`workbench.train`) accelerates a
PyTorch training loop; *on-device training* writes four artifacts (a training graph with the loss
and the gradient graph, an eval graph, an optimizer graph and a checkpoint of the parameters) that
``onnxruntime.training.api`` runs on its own, e.g. to personalise a model on a phone, in a browser
or on an edge box. This module does the second half and holds it to the same standards:

``build_artifacts(loaded, cfg, folder) -> Artifacts``
    export the model for training and call ``onnxruntime.training.artifacts.generate_artifacts``
    with the chosen trainable set (:class:`Trainable`: the classifier head, the last N encoder
    layers plus the head, or everything), loss ``CrossEntropyLoss`` and optimizer ``AdamW``.
``run_ondevice(cfg, out_dir) -> OnDeviceResult``
    the whole stage: artifacts, ``cfg.steps`` steps with ``CheckpointState``/``Module``/
    ``Optimizer`` and the same steps in PyTorch eager (same batches, dropout off, same trainable
    set, same learning rate and AdamW update), both loss curves and their agreement, step time
    and peak memory of both, and the trained model exported back to an inference graph
    (``Module.export_model_for_inferencing``) saved as an ``export.json`` that
    :func:`workbench.graph.fusion.run_fusion`, :func:`workbench.quant.run_quantization` and the slice
    evaluation accept like any other export.

Two pitfalls of onnxruntime-training 1.19.2 (measured here, see FIELD_NOTES):

* The gradient builder fails on an opset-17 export: opset 17 writes LayerNorm as one
  ``LayerNormalization`` node with one output, and ORT's LayerNormalization gradient reads the
  saved mean and inverse standard deviation (outputs 1 and 2): ``gradient_builder_base.h:123 ...
  i < node_->OutputDefs().size() was false``. At **opset 14** LayerNorm is exported as primitive
  ops and the builder succeeds, so 14 is the default; :class:`GradientGraphError` names the
  operator and the fix when it fails.
* The graph must be exported with ``TrainingMode.TRAINING`` and no constant folding (parameters
  stay initializers under their PyTorch names). With ``TrainingMode.EVAL`` the builder failed here
  with ``Duplicate definition of name (...LayerNorm.weight_grad)``. Dropout is switched off in the
  model's config (probability 0), so the training-mode graph computes what eval mode computes.
* ``generate_artifacts`` writes ``optimizer_model.onnx`` with IR version 14 (onnx 1.23's
  default); ONNX Runtime 1.19.2 refuses it ("max supported IR version: 10"). The optimizer graph
  uses nothing newer than IR 10 (one contrib node, opset imports of 2024), so every artifact with
  a newer IR version is rewritten with :data:`MAX_IR_VERSION` and reported in ``Artifacts.notes``.

The PyTorch reference uses the AdamW update ONNX Runtime runs, not ``torch.optim.AdamW``: ORT's
``AdamWOptimizer`` node (``adam_mode=1``, the Hugging Face formula) adds epsilon to ``sqrt(v)``
before the bias correction and decays the weights after the update; torch adds epsilon after the
correction and decays before. Measured here on the tiny model (layer 1 + head, lr 1e-3, eps 1e-8,
20 steps): with ``torch.optim.AdamW`` the curves drift apart by up to 2.1e-4; with the same formula
(:class:`HFAdamW`) by at most 6e-8, one float32 ulp at a loss of 0.69. See :data:`FP32_TOLERANCE`
for the tolerance and how it was measured.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import runs, serial
from ..options import parse_choice
from ..graph import ExportConfig, ExportResult, Validation, compare_logits, file_size_mib, model_info, op_histogram
from ..metrics import Metric

RESULT_FILE = "ondevice.json"
ARTIFACTS_DIR = "artifacts"
INFERENCE_DIR = "inference"  # holds model.onnx + export.json: what fuse / quantize / evaluate read
TRAINED_MODEL_DIR = "trained_model"  # the PyTorch model holding the on-device-trained weights
TRAINED_CHECKPOINT = "trained_checkpoint"
BATCHES_FILE = "batches.npz"
TRAINING_GRAPH = "base_for_training.onnx"
ARTIFACT_FILES = ("training_model.onnx", "eval_model.onnx", "optimizer_model.onnx", "checkpoint")
MAX_IR_VERSION = 10  # the newest IR version onnxruntime 1.19.2 loads
LOSSES = ("CrossEntropyLoss",)
OPTIMIZERS = ("AdamW",)
# Loss agreement between on-device steps and PyTorch eager steps (fp32, dropout off, same update
# rule). Measured here (benchmarks/bench_ondevice.py; tiny model, 20 steps of 8 reviews, lr 1e-4
# and 1e-3, head / last layer / all): the largest per-step difference was 6e-8 (head) to 1.2e-7
# (last layer), float32 rounding of a loss near 0.69. Defects it must catch, same batches: PyTorch
# at 2x the learning rate differs by 8.7e-4 (head only, the smallest) to 3.6e-3 (all) within 20
# steps; MiniLM, last layer, 10 steps of 8 x 64: drift 1.2e-7;
# position embeddings trained on-device (a gradient bug, POSITION_EMBEDDINGS_NOTE) by 5.5e-4.
# 2e-5 is 170 times the largest drift and 27 times below the smallest defect; the tests check
# both sides. (torch.optim.AdamW instead of ORT's formula moves the curve by 5e-7 (head) to 2.8e-5
# (all) at lr 1e-4: a different update rule, which is why the PyTorch side uses ORT's, HFAdamW.)
FP32_TOLERANCE = 2e-5
# The inference graph is an FP32 graph of the trained weights: like any FP32 export it matches
# PyTorch holding those weights within ~1e-6 (ExportConfig.strict uses 1e-5).
EXPORT_TOLERANCE = 1e-5


class OnDeviceError(RuntimeError):
    """The stage cannot run with these inputs; the message says what was wrong and what to do."""


class GradientGraphError(OnDeviceError):
    """ONNX Runtime's gradient graph builder could not handle the model. ``operator`` names the
    operator it stopped at, ``where`` which nodes, ``fix`` what to do; ``detail`` keeps ONNX
    Runtime's own first line (source file and failed check, without the C++ signature)."""

    def __init__(self, operator: str, fix: str, detail: str, where: str = ""):
        self.operator, self.fix, self.detail, self.where = operator, fix, detail, where
        super().__init__(f"ONNX Runtime's gradient builder cannot differentiate the {operator} operator"
                         f"{f' ({where})' if where else ''}; fix: {fix} (onnxruntime said: {detail})")


class Trainable(str, enum.Enum):
    """Which parameters train on the device; everything else stays frozen in the checkpoint."""

    HEAD = "head"  # the classification head only (parameters outside the base model)
    LAST = "last"  # the last N encoder layers, what follows them (pooler, final norm) and the head
    ALL = "all"  # every parameter


def _enum(cls, value, name: str):
    return parse_choice(cls, value, name, OnDeviceError)


@dataclass(frozen=True)
class OnDeviceConfig:
    """What to train on the device and how to check it.

    ``model``: ``"tiny"``, ``"minilm"`` or a fine-tuned Hugging Face sequence-classification
    folder. ``trainable``: ``head``, ``last`` (with ``last_n_layers``) or ``all``. ``loss`` and
    ``optimizer`` name what goes into the artifacts (the ones ONNX Runtime's artifact builder has
    for classification: CrossEntropyLoss, AdamW). ``steps`` on-device steps, each on the same batch
    as a PyTorch eager step. ``tolerance``: largest per-step loss difference allowed (default
    :data:`FP32_TOLERANCE`). ``measure_memory``: run each side once more in a fresh process to
    measure its peak memory (``memory_steps`` steps).
    """

    model: str = "tiny"
    trainable: Trainable = Trainable.HEAD
    last_n_layers: int = 1
    loss: str = "CrossEntropyLoss"
    optimizer: str = "AdamW"
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    steps: int = 10
    batch_size: int = 8
    max_length: int = 64
    seed: int = 0
    data: str = "reviews"
    max_train: Optional[int] = 256
    opset: int = 14
    tolerance: Optional[float] = None
    validation_examples: int = 32
    measure_memory: bool = True
    memory_steps: int = 10
    threads: Optional[int] = None  # intra-op threads of both sides (default: PyTorch's current setting)
    train_position_embeddings: bool = False  # see POSITION_EMBEDDINGS_NOTE: off unless you want to see the defect

    def __post_init__(self) -> None:
        object.__setattr__(self, "trainable", _enum(Trainable, self.trainable, "trainable"))
        if self.loss not in LOSSES:
            raise OnDeviceError(f"loss must be one of {list(LOSSES)} (a sequence classifier's loss), got {self.loss!r}")
        if self.optimizer not in OPTIMIZERS:
            raise OnDeviceError(f"optimizer must be one of {list(OPTIMIZERS)}, got {self.optimizer!r}; "
                                "ONNX Runtime's artifact builder also has SGD, which this stage does not compare")
        for name, low in (("steps", 1), ("batch_size", 1), ("last_n_layers", 1), ("validation_examples", 1), ("memory_steps", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise OnDeviceError(f"{name} must be an integer of at least {low}, got {value!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and 0 < self.lr < 1):
            raise OnDeviceError(f"lr must be a learning rate between 0 and 1, got {self.lr!r}; try 1e-4")
        if not (0 <= self.weight_decay < 1):
            raise OnDeviceError(f"weight_decay must be from 0 to 1, got {self.weight_decay!r}; 0.01 is AdamW's usual value")
        if not (8 <= self.max_length <= 512):
            raise OnDeviceError(f"max_length must be from 8 to 512 tokens, got {self.max_length!r}")
        if not 11 <= self.opset <= 20:
            raise OnDeviceError(f"opset must be from 11 to 20, got {self.opset!r}; 14 is what ONNX Runtime's gradient builder handles")
        if self.tolerance is not None and not (self.tolerance > 0 and math.isfinite(self.tolerance)):
            raise OnDeviceError(f"tolerance must be a positive loss difference, got {self.tolerance!r}; the default is {FP32_TOLERANCE:g}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise OnDeviceError(f"threads must be a positive integer (intra-op threads of both sides), got {self.threads!r}")
        if self.max_train is not None and self.max_train < self.batch_size:
            raise OnDeviceError(f"max_train ({self.max_train}) must hold at least one batch of {self.batch_size}")

    @classmethod
    def quick(cls, **kw) -> "OnDeviceConfig":
        """The tiny model, head only, 10 steps of 8 reviews (seconds)."""
        return cls(**kw)

    @classmethod
    def default(cls, **kw) -> "OnDeviceConfig":
        """MiniLM, last encoder layer + head, 20 steps of 16 reviews at lr 1e-4."""
        return cls(**{"model": "minilm", "trainable": Trainable.LAST, "steps": 20, "batch_size": 16, "lr": 1e-4,
                      "max_train": 1024, **kw})

    @property
    def effective_tolerance(self) -> float:
        return self.tolerance if self.tolerance is not None else FP32_TOLERANCE

    def replace(self, **kw) -> "OnDeviceConfig":
        return replace(self, **kw)


@dataclass(frozen=True)
class ArtifactFile:
    name: str
    size_mib: float
    ir_version: Optional[int] = None  # as written (before any fix); None for the checkpoint


@dataclass(frozen=True)
class Artifacts:
    """The four on-device training artifacts and what they hold."""

    folder: Path
    files: list[ArtifactFile]
    trainable: Trainable
    last_n_layers: int
    trainable_parameters: int  # number of scalars that train
    total_parameters: int
    trainable_tensors: list[str]
    frozen_tensors: int
    loss: str
    optimizer: str
    opset: int
    training_graph_nodes: int
    export_seconds: float
    generate_seconds: float
    ir_version_fixed: list[str]  # artifacts rewritten with MAX_IR_VERSION
    notes: list[str] = field(default_factory=list)

    @property
    def total_size_mib(self) -> float:
        return sum(f.size_mib for f in self.files)

    def size_of(self, name: str) -> float:
        return next(f.size_mib for f in self.files if f.name == name)

    def path(self, name: str) -> Path:
        return Path(self.folder) / name

    def metrics(self) -> list[Metric]:
        return [Metric("trainable parameters", float(self.trainable_parameters), "", higher_is_better=False),
                Metric("artifacts on disk", self.total_size_mib, "MiB", higher_is_better=False)]


@dataclass(frozen=True)
class SideCost:
    """Step time and memory of one side (on-device or PyTorch eager) for the same trainable set."""

    name: str  # "onnxruntime.training.api" or "pytorch eager"
    median_step_ms: float  # steps after the first, interleaved with the other side in one process
    step_ms: list[float]
    peak_rss_mib: Optional[float] = None  # whole process, measured in a fresh process of its own
    rss_growth_mib: Optional[float] = None  # peak during the steps minus RSS just before the first
    setup_s: Optional[float] = None  # in that process: load the model / create the session
    isolated_median_step_ms: Optional[float] = None

    def metrics(self) -> list[Metric]:
        out = [Metric("median step", self.median_step_ms, "ms", higher_is_better=False)]
        if self.peak_rss_mib is not None:
            out.append(Metric("peak RSS", self.peak_rss_mib, "MiB", higher_is_better=False))
        return out


@dataclass(frozen=True)
class OnDeviceResult:
    config: OnDeviceConfig
    model_source: str
    class_names: list[str]
    artifacts: Artifacts
    ondevice_losses: list[float]
    pytorch_losses: list[float]
    max_loss_diff: float
    tolerance: float
    loss_parity: bool
    parity_basis: str
    ondevice: SideCost
    pytorch: SideCost
    weights_max_abs_diff: float  # on-device vs PyTorch trained weights (trainable set)
    weights_moved: float  # largest change of a trainable weight during training (on-device)
    frozen_unchanged: bool
    inference_path: Path
    inference_dir: Path  # holds export.json: give it to workbench fuse / quantize
    validation: Validation  # inference graph vs PyTorch holding the on-device-trained weights
    agreement_with_pytorch_training: Validation  # inference graph vs the PyTorch-trained model
    trained_checkpoint: Path
    trained_model_dir: Path
    stopped: bool
    seconds: float
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.loss_parity and self.validation.passed and self.frozen_unchanged

    @property
    def step_time_ratio(self) -> float:
        """PyTorch eager step time / on-device step time (>1: on-device is faster)."""
        return self.pytorch.median_step_ms / self.ondevice.median_step_ms if self.ondevice.median_step_ms else float("nan")

    @property
    def memory_ratio(self) -> Optional[float]:
        """PyTorch eager peak RSS / on-device peak RSS (>1: on-device needs less)."""
        a, b = self.ondevice.peak_rss_mib, self.pytorch.peak_rss_mib
        return b / a if a and b else None

    def load_export(self) -> ExportResult:
        from ..graph import load_export

        return load_export(self.inference_dir)


# ---- the PyTorch reference optimizer -------------------------------------------------------
def hf_adamw(params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
    """A ``torch.optim.Optimizer`` computing ONNX Runtime's ``AdamWOptimizer`` update
    (``adam_mode=1``, ``correct_bias=1``), in PyTorch eager ops::

        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
        p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
        p -= lr * weight_decay * p

    (``torch.optim.AdamW`` adds ``eps`` after dividing by ``sqrt(1 - b2^t)`` and decays first.)
    """
    import torch

    class HFAdamW(torch.optim.Optimizer):
        def __init__(self, params_, **defaults):
            super().__init__(params_, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["m"] = torch.zeros_like(p)
                        state["v"] = torch.zeros_like(p)
                    state["step"] += 1
                    t = state["step"]
                    state["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                    state["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                    denom = state["v"].sqrt().add_(group["eps"])
                    p.addcdiv_(state["m"], denom, value=-group["lr"] * math.sqrt(1 - b2 ** t) / (1 - b1 ** t))
                    if group["weight_decay"] > 0:
                        p.add_(p, alpha=-group["lr"] * group["weight_decay"])

    return HFAdamW(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)


# ---- which parameters train --------------------------------------------------------------------
_LAYER = re.compile(r"\.(?:layer|layers|blocks)\.(\d+)\.")


POSITION_EMBEDDINGS_NOTE = (
    "absolute position embeddings stay frozen with trainable='all': onnxruntime-training 1.19.2 writes the gradient of "
    "the Add that broadcasts them over the batch as an Identity (no ReduceSum over the batch axis), so their GatherGrad "
    "scatters only the first example's gradient (measured on the tiny model: 47x off PyTorch's at step 1, loss curves "
    "5.5e-4 apart after 20 steps, 27x the tolerance); OnDeviceConfig(train_position_embeddings=True) trains them anyway"
)


def _is_position_embedding(name: str) -> bool:
    return "position_embeddings" in name


def trainable_names(model, trainable: Trainable | str, last_n_layers: int = 1,
                    train_position_embeddings: bool = False) -> list[str]:
    """Names of the parameters that train, in the model's order.

    ``head``: every parameter outside the base model (``model.base_model_prefix``), i.e. the
    classifier. ``last``: the encoder layers numbered ``L - N .. L - 1`` (``...layer.<i>.``), every
    base-model parameter that is neither an embedding nor in an earlier layer (the pooler, a final
    norm) and the head. ``all``: everything but the absolute position embeddings, unless
    ``train_position_embeddings`` (:data:`POSITION_EMBEDDINGS_NOTE` says why).
    """
    trainable = _enum(Trainable, trainable, "trainable")
    names = [n for n, _ in model.named_parameters()]
    prefix = getattr(model, "base_model_prefix", "") or ""
    head = [n for n in names if not (prefix and n.startswith(prefix + "."))]
    if trainable is Trainable.ALL:
        return [n for n in names if train_position_embeddings or not _is_position_embedding(n)]
    if not head:
        raise OnDeviceError(f"cannot tell the classifier head from the base model {prefix!r} in this model's parameters; "
                            "use trainable='all'")
    if trainable is Trainable.HEAD:
        return head
    layers = sorted({int(m.group(1)) for n in names if (m := _LAYER.search(n))})
    if not layers:
        raise OnDeviceError("found no numbered encoder layers (.layer.<i>.) in this model; use trainable='head' or 'all'")
    if last_n_layers > len(layers):
        raise OnDeviceError(f"last_n_layers is {last_n_layers} but the model has {len(layers)} encoder layers; "
                            f"give 1 to {len(layers)}, or trainable='all'")
    first = layers[-last_n_layers]
    out = []
    for n in names:
        m = _LAYER.search(n)
        if n in head or (m and int(m.group(1)) >= first) or (not m and "embeddings" not in n and n not in head):
            out.append(n)
    return out


# ---- artifacts -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _quiet_onnxruntime():
    """Keep ONNX Runtime's native INFO logging off the terminal and out of notebooks.

    Building the gradient graph logs every graph transformer it runs (about 60 ``[I:onnxruntime:
    Default, graph_transformer.cc ...]`` lines per build) through a logger the Python API cannot
    set: ``set_default_logger_severity`` did not silence them here. They are written by C++ to file
    descriptor 2 (a Jupyter kernel forwards that as a red stderr box), so while the block runs fd 2
    goes to a temporary file; afterwards every line that is not an INFO line is written back to
    ``sys.stderr``, so warnings and errors still show. The default severity is raised to ERROR
    meanwhile too (a training session warns once per unused dropout constant), then set back to
    ONNX Runtime's default, WARNING."""
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


def _session_options(threads: int):
    """One intra-op thread per PyTorch thread, and no spinning: the two sides alternate step by step
    in one process, and ONNX Runtime's idle threads would otherwise spin on the cores PyTorch's
    next step needs (measured here: PyTorch eager steps of the tiny model took 1.2 s instead of
    milliseconds with spinning on)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, int(threads))
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


def _training_api():
    """``onnxruntime.training`` imports ORTModule (and so tries DeepSpeed); keep its known warning out."""
    from ..quiet import ortmodule_warnings

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
    """Write the forward graph that the artifacts are built from: training mode (so nothing that
    training needs is folded away), no constant folding (parameters stay initializers named as in
    PyTorch), dynamic batch and sequence axes. Returns the graph's input names."""
    import torch

    from ..batches import encode, model_inputs
    from ..graph import _without_ir_dump, standard_symbolics

    model = loaded.model
    enc = model_inputs(model, encode(loaded.tokenizer, list(sample_texts)[:2] or ["a sample sentence"], max_length))
    names = list(enc)
    dynamic = {k: {0: "batch", 1: "sequence"} for k in names}
    dynamic["logits"] = {0: "batch"}
    was_training = model.training
    try:
        with runs.atomic_path(path) as tmp, torch.no_grad(), _without_ir_dump(), standard_symbolics(), warnings.catch_warnings():
            # Our own, deliberate request: the artifacts need a training-mode graph (see the module docstring).
            warnings.filterwarnings("ignore", message="Setting `training` to something other than default is deprecated",
                                    category=FutureWarning)
            # "ONNX does not support not updating the embedding vector at padding_idx during training":
            # true, and harmless here: the padding row only gets a gradient from padded positions,
            # which the attention mask cuts off from the classifier (the loss curves agree with
            # trainable='all' too, where the embeddings train).
            warnings.filterwarnings("ignore", message="Warning: ONNX export of embedding with padding_idx", category=UserWarning)
            torch.onnx.export(model, (), str(tmp), kwargs=enc, input_names=names, output_names=["logits"],
                              dynamic_axes=dynamic, opset_version=opset, do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING, dynamo=False)
    except Exception as exc:  # torch raises several types; the export stage explains them the same way
        from ..graph import ExportConfig as _EC, _explain_failure

        raise OnDeviceError(str(_explain_failure(exc, _EC(opset=opset), loaded.attn_implementation))) from exc
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
    if "OutputDefs().size()" in text:
        # A gradient that reads an output the forward node does not have.
        ln = [n for n in nodes if n.op_type == "LayerNormalization" and len(n.output) < 3]
        if ln:
            return GradientGraphError(
                "LayerNormalization",
                "export for training at opset 14, where LayerNorm is written as primitive operators: "
                "OnDeviceConfig(opset=14) or `workbench ondevice --opset 14`", detail,
                f"{len(ln)} node(s), e.g. {ln[0].name!r}, written with 1 output at opset {opset}; its gradient reads "
                "the saved mean and inverse standard deviation, outputs 1 and 2")
        drop = [n for n in nodes if n.op_type == "Dropout" and len(n.output) < 2]
        if drop:
            return GradientGraphError(
                "Dropout",
                "load the model with dropout off and eager attention (load_model(..., dropout=False, "
                "attn_implementation='eager'), which this stage does for built-in models and folders)", detail,
                f"{len(drop)} node(s), e.g. {drop[0].name!r}, without the mask output its gradient reads")
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
        op, f"export at opset 14 (OnDeviceConfig(opset=14)) with eager attention and dropout off, or train fewer "
            "layers (trainable='head' or 'last')", detail)


def _fix_ir_versions(folder: Path) -> tuple[list[ArtifactFile], list[str]]:
    import onnx

    files, fixed = [], []
    for name in ARTIFACT_FILES:
        path = folder / name
        if name == "checkpoint":
            files.append(ArtifactFile(name, path.stat().st_size / 2**20))
            continue
        proto = onnx.load(str(path))
        ir = int(proto.ir_version)
        if ir > MAX_IR_VERSION:
            proto.ir_version = MAX_IR_VERSION
            with runs.atomic_path(path) as tmp:
                onnx.save(proto, str(tmp))
            fixed.append(name)
        files.append(ArtifactFile(name, file_size_mib(path), ir))
    return files, fixed


def build_artifacts(loaded, cfg: OnDeviceConfig, folder: str | os.PathLike, sample_texts: Sequence[str] = ()) -> Artifacts:
    """Export ``loaded`` (a :class:`workbench.models.LoadedModel`, dropout off) for training and
    write the four artifacts into ``folder`` (replaced atomically as a whole)."""
    import onnx

    ort_artifacts, onnxblock, *_ = _training_api()
    folder = Path(folder)
    names = trainable_names(loaded.model, cfg.trainable, cfg.last_n_layers, cfg.train_position_embeddings)
    params = dict(loaded.model.named_parameters())
    with runs.atomic_dir(folder) as tmp:
        t0 = time.perf_counter()
        base_path = tmp / TRAINING_GRAPH
        export_for_training(loaded, base_path, cfg.opset, sample_texts, cfg.max_length)
        export_seconds = time.perf_counter() - t0
        graph = onnx.load(str(base_path))
        initializers = [i.name for i in graph.graph.initializer]
        init_set = set(initializers)
        missing = [n for n in names if n not in init_set]
        if missing:
            raise OnDeviceError(
                f"{len(missing)} parameter(s) chosen to train are not initializers of the exported graph (e.g. {missing[0]!r}): "
                "the exporter renamed or folded them; export without constant folding, or choose another trainable set")
        requires_grad = [n for n in initializers if n in set(names)]
        frozen = [n for n in initializers if n not in set(names)]
        optimizer = onnxblock.optim.AdamW(betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay)
        t0 = time.perf_counter()
        try:
            with _quiet_onnxruntime():
                ort_artifacts.generate_artifacts(graph, requires_grad=requires_grad, frozen_params=frozen,
                                                 loss=getattr(ort_artifacts.LossType, cfg.loss), optimizer=optimizer,
                                                 artifact_directory=str(tmp))
        except RuntimeError as exc:
            raise explain_gradient_failure(exc, graph, cfg.opset) from None
        generate_seconds = time.perf_counter() - t0
        files, fixed = _fix_ir_versions(tmp)
        nodes = len(onnx.load(str(tmp / "training_model.onnx"), load_external_data=False).graph.node)
    notes = []
    if cfg.trainable is Trainable.ALL and any(_is_position_embedding(n) for n in params):
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


# ---- data ----------------------------------------------------------------------------------------
def load_ondevice_model(cfg: OnDeviceConfig, class_names: Optional[list[str]] = None):
    """The model as trained here: dropout off, eager attention, in eval mode (dropout is 0 anyway,
    so train and eval mode compute the same; eval mode keeps it so for any layer we missed)."""
    from ..models import BUILTIN_MODELS, load_for_data, load_model, resolve_model_path

    if cfg.model in BUILTIN_MODELS:
        if class_names:
            return load_for_data(cfg.model, class_names, dropout=False, seed=cfg.seed)
        return load_model(cfg.model, dropout=False, seed=cfg.seed)
    folder = resolve_model_path(cfg.model)
    config = json.loads((folder / "config.json").read_text())
    id2label = {int(k): v for k, v in (config.get("id2label") or {}).items()}
    if len(id2label) >= 2:
        return load_model(cfg.model, num_labels=len(id2label), id2label=id2label, dropout=False, seed=cfg.seed)
    return load_model(cfg.model, dropout=False, seed=cfg.seed)


def _batches(loaded, train, cfg: OnDeviceConfig) -> list[dict[str, np.ndarray]]:
    """``cfg.steps`` batches (int64 numpy, model-input order, plus ``labels``): a seeded shuffle of
    the training split, cycled if it is shorter than the run. Both sides get exactly these."""
    from ..batches import batch_indices, encode, model_inputs

    texts, labels = train["text"], train["label"]
    out: list[dict[str, np.ndarray]] = []
    epoch = 0
    while len(out) < cfg.steps:
        for idx in batch_indices(len(train), cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch, drop_last=True):
            enc = model_inputs(loaded.model, encode(loaded.tokenizer, [texts[i] for i in idx], cfg.max_length))
            batch = {k: v.numpy().astype(np.int64) for k, v in enc.items()}
            batch["labels"] = np.asarray([labels[i] for i in idx], dtype=np.int64)
            out.append(batch)
            if len(out) == cfg.steps:
                break
        epoch += 1
    return out


def _save_batches(path: Path, batches: list[dict[str, np.ndarray]]) -> Path:
    import io

    flat = {f"{i}:{k}": v for i, b in enumerate(batches) for k, v in b.items()}
    buf = io.BytesIO()
    np.savez(buf, **flat)
    return runs.atomic_write_bytes(path, buf.getvalue())


def _load_batches(path: Path) -> list[dict[str, np.ndarray]]:
    data = np.load(path)
    out: dict[int, dict[str, np.ndarray]] = {}
    for key in data.files:
        i, name = key.split(":", 1)
        out.setdefault(int(i), {})[name] = data[key]
    return [out[i] for i in sorted(out)]


# ---- the two training loops ------------------------------------------------------------------------
class _OrtTrainer:
    """``CheckpointState`` + ``Module`` + ``Optimizer`` over an artifacts folder."""

    def __init__(self, folder: Path, lr: float, input_names: Sequence[str], threads: int):
        _, _, CheckpointState, Module, Optimizer = _training_api()
        with _quiet_onnxruntime():
            self.state = CheckpointState.load_checkpoint(str(folder / "checkpoint"))
            self.module = Module(str(folder / "training_model.onnx"), self.state, str(folder / "eval_model.onnx"),
                                 session_options=_session_options(threads))
            self.optimizer = Optimizer(str(folder / "optimizer_model.onnx"), self.module)
        self.optimizer.set_learning_rate(lr)
        self.module.train()
        wanted = list(input_names) + ["labels"]
        got = list(self.module.input_names())
        if got != wanted:
            raise OnDeviceError(f"the training graph takes inputs {got}, but the batches hold {wanted}; rebuild the artifacts")
        self.input_names = got

    def step(self, batch: dict[str, np.ndarray]) -> float:
        loss = self.module(*[batch[k] for k in self.input_names])
        self.optimizer.step()
        self.module.lazy_reset_grad()
        return float(loss)


class _TorchTrainer:
    def __init__(self, loaded, names: Sequence[str], cfg: OnDeviceConfig):
        import torch

        self.model = loaded.model
        self.model.eval()  # dropout is 0 in the config; eval mode keeps any other dropout off too
        chosen = set(names)
        for n, p in self.model.named_parameters():
            p.requires_grad_(n in chosen)
        self.params = [p for n, p in self.model.named_parameters() if n in chosen]
        self.optimizer = hf_adamw(self.params, cfg.lr, cfg.betas, cfg.eps, cfg.weight_decay)
        self.torch = torch

    def step(self, batch: dict[str, np.ndarray]) -> float:
        torch = self.torch
        inputs = {k: torch.from_numpy(v) for k, v in batch.items() if k != "labels"}
        logits = self.model(**inputs).logits
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(batch["labels"]))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def pytorch_curve(cfg: OnDeviceConfig, data, lr: Optional[float] = None, torch_adamw: bool = False) -> list[float]:
    """PyTorch eager's losses on the stage's batches alone (no artifacts): the same run with another
    learning rate, or with ``torch.optim.AdamW`` instead of ONNX Runtime's update. What the
    tolerance is measured against (tests and benchmarks/bench_ondevice.py)."""
    import torch

    from ..graph import _data_classes

    lr = cfg.lr if lr is None else lr
    loaded = load_ondevice_model(cfg, _data_classes(data))
    names = trainable_names(loaded.model, cfg.trainable, cfg.last_n_layers, cfg.train_position_embeddings)
    trainer = _TorchTrainer(loaded, names, cfg.replace(lr=lr))
    if torch_adamw:
        trainer.optimizer = torch.optim.AdamW(trainer.params, lr=lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    previous = torch.get_num_threads()
    torch.set_num_threads(cfg.threads or previous)
    try:
        return [trainer.step(b) for b in _batches(loaded, data["train"], cfg)]
    finally:
        torch.set_num_threads(previous)


# ---- peak memory, one side per fresh process -----------------------------------------------------
def _child(argv: Optional[list[str]] = None) -> int:
    """``python -m workbench.ondevice --side ort|eager --work DIR``: run the steps of one side and
    print JSON (peak RSS, growth, setup time, step times). Used by :func:`measure_isolated`."""
    import argparse
    import threading

    parser = argparse.ArgumentParser(prog="python -m workbench.ondevice")
    parser.add_argument("--side", required=True, choices=["ort", "eager"])
    parser.add_argument("--work", required=True)
    args = parser.parse_args(argv)
    import psutil

    work = Path(args.work)
    spec = json.loads((work / "measure.json").read_text())
    cfg = serial.from_dict(OnDeviceConfig, spec["config"])
    batches = _load_batches(work / BATCHES_FILE)
    proc = psutil.Process()
    rss = lambda: proc.memory_info().rss / 2**20  # noqa: E731
    peak = [rss()]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.01):
            peak[0] = max(peak[0], rss())

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.perf_counter()
    if args.side == "ort":
        trainer = _OrtTrainer(Path(spec["artifacts"]), cfg.lr, spec["input_names"], spec["threads"])
    else:
        import torch

        torch.set_num_threads(spec["threads"])
        loaded = load_ondevice_model(cfg, spec["class_names"])
        trainer = _TorchTrainer(loaded, spec["trainable"], cfg)
    setup_s = time.perf_counter() - t0
    before = rss()
    times = []
    for batch in batches:
        s = time.perf_counter()
        trainer.step(batch)
        times.append((time.perf_counter() - s) * 1000)
        peak[0] = max(peak[0], rss())
    stop.set()
    t.join()
    peak[0] = max(peak[0], rss())
    print(json.dumps({"peak_rss_mib": peak[0], "rss_growth_mib": peak[0] - before, "setup_s": setup_s,
                      "median_step_ms": statistics.median(times[1:] or times)}))
    return 0


def measure_isolated(artifacts: Artifacts, cfg: OnDeviceConfig, batches, input_names, class_names, trainable,
                     work: Path, threads: int) -> dict[str, dict]:
    """Peak RSS of each side in a fresh Python process of its own (ru_maxrss and RSS samples in
    one process would carry the first side's memory into the second)."""
    work.mkdir(parents=True, exist_ok=True)
    _save_batches(work / BATCHES_FILE, batches[: cfg.memory_steps] if len(batches) >= cfg.memory_steps else batches)
    runs.atomic_write_json(work / "measure.json", {"config": cfg, "artifacts": str(artifacts.folder),
                                                   "input_names": list(input_names), "class_names": class_names,
                                                   "trainable": list(trainable), "threads": threads})
    here = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)}
    out = {}
    for side in ("ort", "eager"):
        proc = subprocess.run([sys.executable, "-m", "workbench.ondevice", "--side", side, "--work", str(work)],
                              capture_output=True, text=True, env=env, timeout=1800)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
            raise OnDeviceError(f"measuring the {side} side in its own process failed (exit {proc.returncode}): {tail}")
        out[side] = json.loads(proc.stdout.strip().splitlines()[-1])
    shutil.rmtree(work, ignore_errors=True)
    return out


# ---- the stage -----------------------------------------------------------------------------------------
ProgressFn = Callable[[int, int, str], None]


def _environment(threads: int) -> dict[str, Any]:
    import platform

    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1]
                break
    except OSError:
        pass
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "avx512_bf16")
    return {"cpu": platform.processor() or platform.machine(), "flags": [f for f in wanted if f in flags.split()],
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "logical_cores": os.cpu_count(), "threads": threads}


def check_model(cfg: OnDeviceConfig) -> None:
    """A built-in name, or a folder with a supported sequence classifier; else ModelError (one line)."""
    from ..models import BUILTIN_MODELS, check_model_type, resolve_model_path

    if cfg.model not in BUILTIN_MODELS:
        check_model_type(resolve_model_path(cfg.model))


def _check_classes(loaded, data_classes: list[str]) -> None:
    if loaded.num_labels != len(data_classes):
        raise OnDeviceError(
            f"the model has {loaded.num_labels} classes but the data has {len(data_classes)} ({data_classes}); "
            "give a model fine-tuned on these classes, or data with the model's classes")


def run_ondevice(cfg: Optional[OnDeviceConfig] = None, out_dir: str | os.PathLike = "runs/ondevice", data=None,
                 progress: Optional[ProgressFn] = None, stop=None) -> OnDeviceResult:
    """Build the artifacts, train ``cfg.steps`` steps on the device and in PyTorch eager on the same
    batches, compare, export the trained model for inference and validate it; save ``ondevice.json``.

    ``data``: a ``DatasetDict`` (default: the reviews, ``cfg.max_train`` training examples).
    ``progress(done, total, detail)`` is called after each step; ``stop`` (a ``threading.Event``)
    ends the training early (the result says ``stopped``; what was trained is still exported).
    """
    import torch

    from ..data import DataConfig, load_data
    from ..graph import _data_classes
    cfg = cfg or OnDeviceConfig()
    started = time.perf_counter()
    check_model(cfg)  # ModelError: one line, before any data is loaded
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = load_data(DataConfig(source=cfg.data, max_train=cfg.max_train, max_eval=max(cfg.validation_examples, 64)))
    classes = _data_classes(data) or sorted({str(x) for x in data["train"]["label"]})
    loaded = load_ondevice_model(cfg, classes)
    _check_classes(loaded, classes)
    if len(data["train"]) < cfg.batch_size:
        raise OnDeviceError(f"the training split has {len(data['train'])} examples, fewer than one batch of {cfg.batch_size}")
    notes: list[str] = []
    initial = {n: p.detach().clone() for n, p in loaded.model.named_parameters()}

    # 1. artifacts
    art = build_artifacts(loaded, cfg, out / ARTIFACTS_DIR, data["train"]["text"][:2])
    notes.extend(art.notes)
    batches = _batches(loaded, data["train"], cfg)
    input_names = [k for k in batches[0] if k != "labels"]

    # 2. both loops, interleaved step by step in this process (same load on both), same thread count
    threads = cfg.threads or torch.get_num_threads()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _train_and_export(cfg, out, data, classes, loaded, initial, art, batches, input_names, threads, notes,
                                 started, progress, stop)
    finally:
        torch.set_num_threads(previous_threads)


def _train_and_export(cfg, out, data, classes, loaded, initial, art, batches, input_names, threads, notes, started,
                      progress, stop) -> OnDeviceResult:
    import torch

    from ..graph import ONNX_FILE, RESULT_FILE as EXPORT_FILE, EXAMPLES_FILE, REFERENCE_FILE, TOKENIZER_DIR
    from ..graph import save_tokenizer, validate_onnx, write_examples

    ort_trainer = _OrtTrainer(Path(art.folder), cfg.lr, input_names, threads)
    torch_trainer = _TorchTrainer(loaded, art.trainable_tensors, cfg)
    ort_losses, pt_losses, ort_ms, pt_ms = [], [], [], []
    stopped = False
    for i, batch in enumerate(batches):
        if stop is not None and stop.is_set():
            stopped = True
            break
        t0 = time.perf_counter()
        ort_losses.append(ort_trainer.step(batch))
        t1 = time.perf_counter()
        pt_losses.append(torch_trainer.step(batch))
        t2 = time.perf_counter()
        ort_ms.append((t1 - t0) * 1000)
        pt_ms.append((t2 - t1) * 1000)
        if progress is not None:
            progress(i + 1, len(batches), f"loss on-device {ort_losses[-1]:.4f}, PyTorch {pt_losses[-1]:.4f}")
    if not ort_losses:
        raise OnDeviceError("stopped before the first step: nothing was trained")
    diffs = [abs(a - b) for a, b in zip(ort_losses, pt_losses)]
    max_diff = max(diffs)
    tol = cfg.effective_tolerance
    basis = (f"fp32, dropout off, same batches, same trainable set and the same AdamW update: per-step losses compared "
             f"within {tol:g}" + (" (given)" if cfg.tolerance is not None else
                                   " (170x the largest drift measured, 5x below the smallest defect measured: 2x lr)"))
    if not all(math.isfinite(x) for x in ort_losses + pt_losses):
        notes.append("a loss was NaN or infinite: training diverged (lower the learning rate)")
        max_diff = float("inf")

    # 3. trained weights: on-device vs PyTorch, frozen ones untouched
    state_params = ort_trainer.state.parameters
    ort_trained = {n: np.asarray(state_params[n].data) for n in art.trainable_tensors}
    pt_params = dict(loaded.model.named_parameters())
    weights_diff = max(float(np.abs(ort_trained[n] - pt_params[n].detach().numpy()).max()) for n in ort_trained)
    moved = max(float(np.abs(ort_trained[n] - initial[n].numpy()).max()) for n in ort_trained)
    frozen_names = [n for n in initial if n not in set(art.trainable_tensors)]
    frozen_ok = all(np.array_equal(np.asarray(state_params[n].data), initial[n].numpy())
                    for n in frozen_names if n in state_params)
    ckpt = out / TRAINED_CHECKPOINT
    _, _, CheckpointState, _, _ = _training_api()
    with runs.atomic_path(ckpt) as tmp:
        CheckpointState.save_checkpoint(ort_trainer.state, str(tmp))

    # 4. back to an inference graph, written as an export the later stages read
    inf_dir = out / INFERENCE_DIR
    inf_dir.mkdir(parents=True, exist_ok=True)
    inf_path = inf_dir / ONNX_FILE
    with runs.atomic_path(inf_path) as tmp, _quiet_onnxruntime():
        ort_trainer.module.export_model_for_inferencing(str(tmp), ["logits"])
    import onnx

    proto = onnx.load(str(inf_path))
    if proto.ir_version > MAX_IR_VERSION:
        proto.ir_version = MAX_IR_VERSION
        with runs.atomic_path(inf_path) as tmp:
            onnx.save(proto, str(tmp))
    # PyTorch holding the on-device-trained weights: the graph must compute what it computes
    pt_trained_state = {n: p.detach().clone() for n, p in loaded.model.named_parameters()}
    with torch.no_grad():
        for n, p in loaded.model.named_parameters():
            p.copy_(torch.from_numpy(ort_trained[n]) if n in ort_trained else initial[n])
    trained_dir = out / TRAINED_MODEL_DIR
    with runs.atomic_dir(trained_dir) as tmp:
        loaded.model.save_pretrained(str(tmp))
        loaded.tokenizer.save_pretrained(str(tmp))
    vcfg = ExportConfig.strict(opset=cfg.opset, max_length=cfg.max_length, validation_examples=cfg.validation_examples,
                               tolerance=EXPORT_TOLERANCE)
    split = "validation" if "validation" in data else "test"
    vcfg = replace(vcfg, validation_split=split)
    from ..graph import select_examples
    from ..ortinfer import torch_predict_dataset

    examples = select_examples(data, vcfg)
    reference = torch_predict_dataset(loaded.model, loaded.tokenizer, examples, vcfg.max_length, vcfg.validation_batch_size)
    validation = validate_onnx(inf_path, reference, loaded.tokenizer, examples, vcfg,
                               what="the on-device inference graph (vs PyTorch with the on-device-trained weights)")
    with torch.no_grad():
        for n, p in loaded.model.named_parameters():
            p.copy_(pt_trained_state[n])
    pt_reference = torch_predict_dataset(loaded.model, loaded.tokenizer, examples, vcfg.max_length, vcfg.validation_batch_size)
    agreement = validate_onnx(inf_path, pt_reference, loaded.tokenizer, examples,
                              replace(vcfg, tolerance=max(10 * tol, EXPORT_TOLERANCE)),
                              what="the on-device inference graph (vs the model trained in PyTorch eager)")
    tok_dir = save_tokenizer(loaded.tokenizer, inf_dir / TOKENIZER_DIR)
    ex_path = write_examples(inf_dir / EXAMPLES_FILE, examples)
    ref_path = runs.atomic_write_npy(inf_dir / REFERENCE_FILE, reference)
    initializers = {i.name for i in proto.graph.initializer}
    export = ExportResult(
        onnx_path=inf_path.resolve(), model_source=str(trained_dir.resolve()), model_name=f"{loaded.name}+ondevice",
        opset=cfg.opset, input_names=[i.name for i in proto.graph.input if i.name not in initializers],
        output_names=["logits"], validation=validation, size_mib=file_size_mib(inf_path), node_count=len(proto.graph.node),
        op_histogram=op_histogram(proto), attn_implementation=str(loaded.attn_implementation),
        class_names=[str(c) for c in classes], max_length=cfg.max_length, model_info=model_info(loaded),
        tokenizer_dir=tok_dir.resolve(), examples_path=ex_path.resolve(), reference_logits_path=ref_path.resolve(),
        export_seconds=0.0, config=vcfg)
    runs.save_result(export, inf_dir / EXPORT_FILE)
    if any(n.op_type == "Dropout" for n in proto.graph.node):
        notes.append("the inference graph keeps Dropout nodes (probability 0, a no-op at inference)")

    # 5. cost: step time from the interleaved loop, memory from one fresh process per side
    ort_cost = SideCost("onnxruntime.training.api", statistics.median(ort_ms[1:] or ort_ms), [round(x, 3) for x in ort_ms])
    pt_cost = SideCost("pytorch eager", statistics.median(pt_ms[1:] or pt_ms), [round(x, 3) for x in pt_ms])
    del ort_trainer
    if cfg.measure_memory:
        iso = measure_isolated(art, cfg, batches, input_names, classes, art.trainable_tensors, out / ".measure", threads)
        ort_cost = replace(ort_cost, peak_rss_mib=round(iso["ort"]["peak_rss_mib"], 1),
                           rss_growth_mib=round(iso["ort"]["rss_growth_mib"], 1), setup_s=round(iso["ort"]["setup_s"], 3),
                           isolated_median_step_ms=round(iso["ort"]["median_step_ms"], 3))
        pt_cost = replace(pt_cost, peak_rss_mib=round(iso["eager"]["peak_rss_mib"], 1),
                          rss_growth_mib=round(iso["eager"]["rss_growth_mib"], 1), setup_s=round(iso["eager"]["setup_s"], 3),
                          isolated_median_step_ms=round(iso["eager"]["median_step_ms"], 3))
        notes.append("peak memory: process RSS (psutil, sampled every 10 ms) of a fresh process per side running the same "
                     f"{min(cfg.memory_steps, len(batches))} steps; both processes import torch (onnxruntime.training "
                     "imports ORTModule), so compare the growth during the steps as well as the peak")
    else:
        notes.append("peak memory not measured (measure_memory=False)")
    result = OnDeviceResult(
        config=cfg, model_source=str(loaded.source), class_names=[str(c) for c in classes], artifacts=art,
        ondevice_losses=ort_losses, pytorch_losses=pt_losses, max_loss_diff=max_diff, tolerance=tol,
        loss_parity=bool(max_diff <= tol), parity_basis=basis, ondevice=ort_cost, pytorch=pt_cost,
        weights_max_abs_diff=weights_diff, weights_moved=moved, frozen_unchanged=bool(frozen_ok),
        inference_path=inf_path.resolve(), inference_dir=inf_dir.resolve(), validation=validation,
        agreement_with_pytorch_training=agreement, trained_checkpoint=ckpt.resolve(), trained_model_dir=trained_dir.resolve(),
        stopped=stopped, seconds=time.perf_counter() - started, environment=_environment(threads), notes=notes)
    runs.save_result(result, out / RESULT_FILE)
    return result


def load_ondevice(path: str | os.PathLike) -> OnDeviceResult:
    """Read an ``ondevice.json`` (or the folder holding it)."""
    return runs.load_result(OnDeviceResult, path, RESULT_FILE)


def table(result: OnDeviceResult) -> str:
    """The result as a few lines of text (what the CLI prints)."""
    a, o, p = result.artifacts, result.ondevice, result.pytorch
    sizes = ", ".join(f"{f.name} {f.size_mib:.2f} MiB" for f in a.files)
    lines = [
        f"artifacts: {a.folder} ({a.total_size_mib:.2f} MiB: {sizes})",
        f"  trainable: {a.trainable.value}{f' (last {a.last_n_layers})' if a.trainable is Trainable.LAST else ''}, "
        f"{a.trainable_parameters:,} of {a.total_parameters:,} parameters in {len(a.trainable_tensors)} tensors; "
        f"loss {a.loss}, optimizer {a.optimizer}, opset {a.opset}",
        f"loss curves ({len(result.ondevice_losses)} steps): largest |difference| {result.max_loss_diff:.3g} "
        f"{'<=' if result.loss_parity else '>'} tolerance {result.tolerance:g}: {'agree' if result.loss_parity else 'DIFFER'}",
        f"  on-device {' '.join(f'{x:.4f}' for x in result.ondevice_losses)}",
        f"  PyTorch   {' '.join(f'{x:.4f}' for x in result.pytorch_losses)}",
        f"{'':<26}{'median step ms':>15}{'peak RSS MiB':>14}{'growth MiB':>12}",
    ]
    for side in (o, p):
        peak = f"{side.peak_rss_mib:.0f}" if side.peak_rss_mib is not None else "-"
        growth = f"{side.rss_growth_mib:.0f}" if side.rss_growth_mib is not None else "-"
        lines.append(f"{side.name:<26}{side.median_step_ms:>15.2f}{peak:>14}{growth:>12}")
    mem = f", memory {result.memory_ratio:.2f}x" if result.memory_ratio else ""
    lines.append(f"on-device vs PyTorch eager: step time {result.step_time_ratio:.2f}x{mem} (>1: on-device better)")
    lines.append(f"inference graph: {result.inference_path}")
    lines.append(f"  {result.validation.message}")
    lines.append(f"  vs PyTorch-trained model: largest |Δ logit| {result.agreement_with_pytorch_training.max_abs_diff:.3g}; "
                 f"trained weights differ by {result.weights_max_abs_diff:.3g} (moved {result.weights_moved:.3g})")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(_child())
