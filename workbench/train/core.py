"""Fine-tuning: one training loop, three backends, so that runs differ only by backend.

* ``eager``     - plain PyTorch.
* ``ortmodule`` - the model wrapped in ``onnxruntime.training.ortmodule.ORTModule``: the forward
  and backward pass are exported to ONNX once, optimized by ONNX Runtime, and executed by it. The
  optimizer step stays in PyTorch (ORTModule trains the module's own parameters).
* ``compile``   - ``torch.compile`` (Inductor): compiles the forward and backward graph on the
  first steps, then runs generated kernels.

Same seed, same data order, same optimizer, same schedule, same gradient clipping for all three.
Evaluation (validation loss and accuracy) always runs the same eager PyTorch code on the trained
weights, so the accuracy compares the *training*, not the evaluation engine.

::

    from workbench.train import TrainConfig, run_training
    run = run_training(TrainConfig.quick(), "ortmodule", run_dir="runs/mine")
    run.status, run.executed_in_onnxruntime, run.median_step_s, run.final_accuracy

``run_training`` writes ``<run_dir>/<backend>/``: ``train.json`` (the :class:`TrainRun`), a
Hugging Face checkpoint folder ``checkpoint/`` (``save_pretrained``: config, safetensors weights,
tokenizer) that ``workbench.models.load_model(folder)`` loads back, and for ORTModule the training
graphs it built in ``graphs/``. Everything is written to a temporary name and renamed into place.

No silent fallback: ORTModule's default policy quietly trains in PyTorch when export or graph
building fails. ``TrainConfig.fallback`` is ``"disable"`` by default (the failure is raised and
the run is marked ``failed`` with the cause and the fix) or ``"detect"`` (ORTModule's own policy,
but the fallback is detected after the first step and the run is stopped and marked
``fell_back``). Either way a run that did not execute in ONNX Runtime never reads as an ORTModule
result: ``executed_in_onnxruntime`` is False and ``status`` says why.

Precision: fp32 everywhere. bf16 autocast on CPU works with ``eager`` and ``compile`` (this CPU
has AMX); ORTModule's CPU build has no bf16 MatMul kernel, so ``ortmodule`` + bf16 on CPU is
rejected before anything runs. fp16 needs CUDA (all three backends, with a gradient scaler).

Peak memory on CPU is the process's resident set size (RSS), sampled by ``psutil`` every 20 ms
in a background thread and at every step boundary, *during the run only*. We do not use
``resource.getrusage().ru_maxrss``: it is the peak over the whole process lifetime, so a second
run in the same process would inherit the first one's peak. Memory freed by one run is not always
returned to the OS, so for honest side-by-side figures run each backend in its own process
(``run_comparison(..., isolate=True)``, which the CLI and the benchmark do). On CUDA the figure is
``torch.cuda.max_memory_allocated`` (the caching allocator's peak; ORT's CUDA arena is separate).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from .. import runs, serial
from ..options import parse_choice
from ..data import DataConfig


class TrainConfigError(ValueError):
    """A training setting that cannot work; the message names the value, what is allowed and the fix."""


class Backend(str, enum.Enum):
    EAGER = "eager"
    ORTMODULE = "ortmodule"
    COMPILE = "compile"


class Precision(str, enum.Enum):
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


class Schedule(str, enum.Enum):
    CONSTANT = "constant"
    LINEAR = "linear"  # linear warm-up, then linear decay to 0
    COSINE = "cosine"  # linear warm-up, then cosine decay to 0


class Optimizer(str, enum.Enum):
    ADAMW = "adamw"  # torch.optim.AdamW (foreach implementation)
    ADAMW_FUSED = "adamw_fused"  # torch.optim.AdamW(fused=True): one fused kernel, CPU and CUDA
    ORT_FUSED_ADAM = "ort_fused_adam"  # onnxruntime.training.optim.FusedAdam: CUDA only


class FallbackPolicy(str, enum.Enum):
    DISABLE = "disable"  # ORTMODULE_FALLBACK_POLICY=FALLBACK_DISABLE: failures raise, run marked failed
    DETECT = "detect"  # ORTModule's default policy, fallback detected, run stopped and marked fell_back


class RunStatus(str, enum.Enum):
    OK = "ok"
    STOPPED = "stopped"
    FAILED = "failed"
    FELL_BACK = "fell_back"


ORT_GRAPH_OPTIMIZATION = ("disabled", "basic", "extended", "all")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
ATTENTION = ("eager", "sdpa")
OPSET_RANGE = (14, 20)
MEMORY_OPT_LEVELS = (0, 1, 2)
_DEVICE_RE = re.compile(r"^(cpu|cuda(:\d+)?)$")
# The defaults below (TrainConfig) are the settings that trained fastest side by side; ORTModule's
# own defaults are kept here so that "untuned" can still be asked for (benchmarks, comparisons).
# Measured with MiniLM, dropout off, steps of eager / ORTModule interleaved in one process
# (benchmarks/bench_train.py and the issue-11 trials), ratios = eager median step / variant's:
#   Xeon 2.80 GHz, AVX-512 VNNI, no AMX, 16x128: ORTModule 1.40x untuned, 1.63x tuned (FIELD_NOTES)
#   Xeon with AVX-512 VNNI + AMX, 16x128:        ORTModule 1.45x untuned, 1.89x tuned (README)
#   AMD EPYC Zen 3, AVX2 only, 16x64 / 16x128:    ORTModule 1.61x / 1.46x untuned, 2.80x / 1.92x tuned
#     (a shared machine, load 12-22: absolute times meaningless, ratios side by side)
# In these figures eager kept foreach AdamW: part of "tuned" is the fused optimizer, which as a
# default now speeds eager up too, so demo ratios (both fused) sit between the two columns.
# The tuned set won on all three machines (with and without AMX, with and without AVX-512), so it
# is not made conditional on the CPU.
TUNED_DEFAULTS = {"opset": 14, "optimizer": "adamw_fused", "ort_allow_spinning": False}
ORTMODULE_OWN_DEFAULTS = {"opset": 17, "optimizer": "adamw", "ort_allow_spinning": True}
STEP_WARMUP = 2  # steps left out of the medians: step 1 is start-up, step 2 re-compiles under torch.compile


def _enum(cls: type[enum.Enum], value: Any, name: str):
    return parse_choice(cls, value, name, TrainConfigError)


_TRUE, _FALSE = ("true", "on", "yes", "1"), ("false", "off", "no", "0")


def _flag(value: Any, name: str) -> bool:
    """A yes/no setting: True/False, or the strings on/off, true/false, yes/no, 1/0 (CLI, JSON)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise TrainConfigError(f"{name} must be True or False (or one of on/off, yes/no), got {value!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a fine-tuning run, except the backend (which is what we compare).

    Steps are optimizer steps; one step consumes ``batch_size * grad_accum`` examples. With
    ``max_steps`` set, ``epochs`` is ignored and the data is cycled as needed.
    """

    model: str = "tiny"  # "minilm", "tiny" or a Hugging Face model folder
    data: DataConfig = field(default_factory=DataConfig.quick)
    max_length: int = 64
    pad_to_max: bool = False  # pad every batch to max_length (fixed shapes: fairer to torch.compile)
    batch_size: int = 16
    grad_accum: int = 1
    epochs: int = 1
    max_steps: Optional[int] = None
    lr: float = 5e-5
    weight_decay: float = 0.01
    schedule: Schedule = Schedule.LINEAR
    warmup_steps: int = 0
    max_grad_norm: Optional[float] = 1.0
    optimizer: Optimizer = Optimizer.ADAMW_FUSED  # measured faster for every backend (see TUNED_DEFAULTS)
    seed: int = 0
    dropout: bool = False  # off: eager and ORTModule loss curves can be compared step by step
    attn_implementation: str = "eager"  # "sdpa" cannot be trained by ORTModule (kept to show why)
    eval_every: int = 0  # evaluate every N steps (0: only at the end)
    eval_batch_size: int = 64
    threads: Optional[int] = None  # torch intra-op threads (None: torch's default)
    device: str = "cpu"
    precision: Precision = Precision.FP32
    # ORTModule knobs
    opset: int = 14  # ORTModule's own default is 17; 14 measured faster (see TUNED_DEFAULTS)
    memory_optimizer_level: int = 0  # 0 off, 1 layer-wise recompute, 2 recompute incl. compromised subgraphs
    ort_threads: Optional[int] = None  # intra-op threads of ORT's session (None: same as `threads`)
    ort_graph_optimization: str = "all"  # disabled | basic | extended | all
    ort_allow_spinning: bool = False  # False: ORT's idle threads sleep instead of spinning (ORT's default: True)
    ort_log_level: str = "ERROR"
    fallback: FallbackPolicy = FallbackPolicy.DISABLE
    save_graphs: bool = True  # keep ORTModule's training graphs (no weights inside: parameters are graph inputs)
    # torch.compile knobs
    compile_mode: str = "default"
    compile_dynamic: Optional[bool] = None

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        for name, cls in (("schedule", Schedule), ("optimizer", Optimizer), ("precision", Precision),
                          ("fallback", FallbackPolicy)):
            set_(name, _enum(cls, getattr(self, name), name))
        if isinstance(self.data, dict):
            set_("data", serial.from_dict(DataConfig, self.data))
        if not isinstance(self.data, DataConfig):
            raise TrainConfigError(f"data must be a workbench.data.DataConfig, got {type(self.data).__name__}; use DataConfig.quick() or DataConfig(...)")
        for name in ("pad_to_max", "dropout", "ort_allow_spinning", "save_graphs"):
            set_(name, _flag(getattr(self, name), name))
        if not isinstance(self.model, str) or not self.model:
            raise TrainConfigError(f"model must be 'minilm', 'tiny' or a model folder path, got {self.model!r}")
        for name, low in (("max_length", 8), ("batch_size", 1), ("grad_accum", 1), ("epochs", 1), ("eval_batch_size", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise TrainConfigError(f"{name} must be an integer >= {low}, got {v!r}")
        if self.max_length > 512:
            raise TrainConfigError(f"max_length must be at most 512 (BERT position embeddings), got {self.max_length}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise TrainConfigError(f"max_steps must be a positive integer or None (train for `epochs`), got {self.max_steps!r}")
        for name in ("warmup_steps", "eval_every", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise TrainConfigError(f"{name} must be an integer >= 0, got {v!r}")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1):
            raise TrainConfigError(f"lr must be between 0 and 1 (typical: 5e-5 for MiniLM, 1e-3 for the tiny model), got {self.lr!r}")
        if self.weight_decay < 0:
            raise TrainConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise TrainConfigError(f"max_grad_norm must be positive or None (no clipping), got {self.max_grad_norm}")
        if self.attn_implementation not in ATTENTION:
            raise TrainConfigError(f"attn_implementation must be one of {', '.join(ATTENTION)}, got {self.attn_implementation!r}")
        for name in ("threads", "ort_threads"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise TrainConfigError(f"{name} must be a positive integer or None (library default), got {v!r}")
        if not _DEVICE_RE.match(str(self.device)):
            raise TrainConfigError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        if not OPSET_RANGE[0] <= self.opset <= OPSET_RANGE[1]:
            raise TrainConfigError(f"opset must be between {OPSET_RANGE[0]} and {OPSET_RANGE[1]} (the workbench's default is 14, ORTModule's own 17), got {self.opset}")
        if self.memory_optimizer_level not in MEMORY_OPT_LEVELS:
            raise TrainConfigError(
                f"memory_optimizer_level must be one of {MEMORY_OPT_LEVELS} (0 off, 1 layer-wise recompute, "
                f"2 recompute with compromise), got {self.memory_optimizer_level!r}"
            )
        set_("ort_graph_optimization", str(self.ort_graph_optimization).lower())
        if self.ort_graph_optimization not in ORT_GRAPH_OPTIMIZATION:
            raise TrainConfigError(f"ort_graph_optimization must be one of {', '.join(ORT_GRAPH_OPTIMIZATION)}, got {self.ort_graph_optimization!r}")
        set_("ort_log_level", str(self.ort_log_level).upper())
        if self.ort_log_level not in ("VERBOSE", "INFO", "WARNING", "ERROR", "FATAL"):
            raise TrainConfigError(f"ort_log_level must be one of VERBOSE, INFO, WARNING, ERROR, FATAL, got {self.ort_log_level!r}")
        if self.compile_mode not in COMPILE_MODES:
            raise TrainConfigError(f"compile_mode must be one of {', '.join(COMPILE_MODES)}, got {self.compile_mode!r}")
        if self.device == "cpu" and self.precision is Precision.FP16:
            raise TrainConfigError("precision 'fp16' needs a CUDA device; on the CPU use 'bf16' (eager and compile backends) or 'fp32'")
        if self.device == "cpu" and self.optimizer is Optimizer.ORT_FUSED_ADAM:
            raise TrainConfigError(
                "optimizer 'ort_fused_adam' (onnxruntime.training.optim.FusedAdam) runs on CUDA only; "
                "on the CPU use 'adamw_fused' (torch's fused AdamW kernel) or 'adamw'"
            )

    # ---- presets -------------------------------------------------------------------------
    @classmethod
    def quick(cls, **overrides) -> "TrainConfig":
        """Tiny random BERT on 256 reviews, 24 steps: seconds on 2 CPU cores (tests, workshops).

        The tiny model starts from random weights, hence the large learning rate. Batches are
        padded to ``max_length`` so that torch.compile compiles once (variable shapes recompile).
        """
        return cls(**{"model": "tiny", "data": DataConfig.quick(), "max_length": 64, "pad_to_max": True,
                      "batch_size": 16, "max_steps": 24, "lr": 1e-3, "warmup_steps": 2, "eval_every": 8, **overrides})

    @classmethod
    def demo(cls, **overrides) -> "TrainConfig":
        """MiniLM on 2,048 reviews, one pass of 120 steps of 16, padded to 64 tokens (the demo's and the
        workshop's recipe; torch.compile adds its compilation).

        Picked in issue 11 from trials scored on the full test split (1,276 reviews; eager, the same
        math as ORTModule with dropout off; AMD EPYC Zen 3, 2 cores): the earlier recipe (1,024
        reviews, 60 steps, lr 1e-4, 6 warm-up steps) reached 0.795; this one 0.810. The whole
        validation and test splits are scored (1,275 / 1,276 reviews: a 256-review slice gave
        accuracies +-2.6 points wide), validation once, at the end, to keep the demo short."""
        return cls(**{"model": "minilm", "data": DataConfig(max_train=2048, max_eval=None), "max_length": 64, "pad_to_max": True,
                      "batch_size": 16, "max_steps": 120, "lr": 1e-4, "warmup_steps": 12, "eval_every": 0, **overrides})

    @classmethod
    def full(cls, **overrides) -> "TrainConfig":
        """MiniLM on all the reviews, one epoch, dropout on (a real fine-tune: about 20 minutes on 2 cores)."""
        return cls(**{"model": "minilm", "data": DataConfig.full(), "max_length": 64, "batch_size": 32,
                      "epochs": 1, "lr": 5e-5, "warmup_steps": 30, "eval_every": 100, "dropout": True, **overrides})

    @classmethod
    def bench(cls, **overrides) -> "TrainConfig":
        """The benchmark shape: MiniLM, batch 16, every batch padded to 128 tokens, dropout off."""
        return cls(**{"model": "minilm", "data": DataConfig(max_train=1024, max_eval=64), "max_length": 128,
                      "pad_to_max": True, "batch_size": 16, "max_steps": 20, "lr": 5e-5, "warmup_steps": 2,
                      "eval_every": 0, "save_graphs": False, **overrides})

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

    @property
    def examples_per_step(self) -> int:
        return self.batch_size * self.grad_accum


def check_backend(cfg: TrainConfig, backend: Backend | str) -> Backend:
    """Reject a config/backend combination that cannot run, before anything is loaded.

    Returns the backend as an enum.
    """
    backend = _enum(Backend, backend, "backend")
    if backend is Backend.ORTMODULE and cfg.precision is Precision.BF16 and cfg.device == "cpu":
        raise TrainConfigError(
            "precision 'bf16' with the ortmodule backend on the CPU cannot run: ONNX Runtime's CPU build has no "
            "bf16 MatMul kernel (NOT_IMPLEMENTED: MatMul(13)). Use precision='fp32' with ortmodule, or bf16 with "
            "the eager or compile backend"
        )
    if cfg.optimizer is Optimizer.ORT_FUSED_ADAM and backend is not Backend.ORTMODULE:
        raise TrainConfigError(f"optimizer 'ort_fused_adam' belongs to ONNX Runtime training; with backend {backend.value!r} use 'adamw_fused'")
    if cfg.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise TrainConfigError(f"device {cfg.device!r} requested but torch sees no CUDA device; use device='cpu'")
    if cfg.precision is Precision.BF16 and cfg.device == "cpu":
        import torch

        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            raise TrainConfigError("precision 'bf16' on this CPU is not supported by PyTorch (no AVX-512 BF16/AMX); use 'fp32'")
    return backend


# ---- results -----------------------------------------------------------------------------
@dataclass(frozen=True)
class StepRecord:
    step: int  # 1-based optimizer step
    loss: float  # mean training loss over the step's micro-batches
    step_s: float  # forward + backward + optimizer step (tokenisation excluded)
    samples_per_s: float
    lr: float
    examples: int


@dataclass(frozen=True)
class EvalRecord:
    step: int
    val_loss: float
    val_accuracy: float
    examples: int
    eval_s: float


@dataclass(frozen=True)
class GraphStage:
    """One graph ORTModule built for the training step, and what changed from the stage before."""

    name: str  # torch_exported | post_processed | optimized_pre_grad | optimized | execution_model
    path: str
    nodes: int
    op_counts: dict[str, int]
    contrib_op_counts: dict[str, int]  # ops from ONNX Runtime's own domain (com.microsoft)
    fused_op_counts: dict[str, int]  # ops that stand for several of the exported ops (FusedMatMul, ...)
    added_ops: dict[str, int]  # op types whose count went up from the previous stage (by how much)
    removed_ops: dict[str, int]  # op types whose count went down


@dataclass(frozen=True)
class TrainGraphs:
    folder: str
    stages: list[GraphStage]

    def stage(self, name: str) -> GraphStage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no graph stage {name!r}; stages: {[s.name for s in self.stages]}")


@dataclass(frozen=True)
class CompileStats:
    """Dynamo's own counters (``torch._dynamo.utils.counters``) over one run: the evidence that
    torch.compile compiled the model rather than leaving it to eager PyTorch."""

    frames_total: int  # Python frames Dynamo was asked to compile
    frames_compiled: int  # of those, compiled ("ok")
    graphs: int  # FX graphs captured (1 per frame when nothing breaks)
    graph_breaks: int  # places where Dynamo split the graph and ran Python eagerly
    break_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def compiled(self) -> bool:
        return self.frames_compiled > 0 and self.graphs > 0


def _dynamo_counters() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters

    return {k: dict(v) for k, v in counters.items()}


def _compile_stats(before: dict[str, dict[str, int]]) -> CompileStats:
    after = _dynamo_counters()

    def grew(group: str) -> dict[str, int]:
        old = before.get(group, {})
        return {k: v - old.get(k, 0) for k, v in after.get(group, {}).items() if v - old.get(k, 0)}

    frames, stats, breaks = grew("frames"), grew("stats"), grew("graph_break")
    return CompileStats(frames_total=frames.get("total", 0), frames_compiled=frames.get("ok", 0),
                        graphs=stats.get("unique_graphs", 0), graph_breaks=sum(breaks.values()), break_reasons=breaks)


@dataclass(frozen=True)
class TrainRun:
    """One training run with one backend: what happened, per step and per evaluation."""

    backend: Backend
    status: RunStatus
    reason: str  # cause and fix when status is not ok
    executed_in_onnxruntime: bool
    steps: list[StepRecord]
    evals: list[EvalRecord]
    peak_memory_mib: float  # process RSS peak during the run (CPU) / allocator peak (CUDA)
    startup_s: float  # first optimizer step, including export + graph build (ortmodule) or compilation (compile)
    total_s: float
    checkpoint_dir: Optional[str]
    graphs: Optional[TrainGraphs]
    config: TrainConfig
    total_steps: int = 0
    setup_s: float = 0.0  # loading data and model, wrapping it
    memory_baseline_mib: float = 0.0  # RSS just before the model was loaded
    memory_source: str = ""
    error: str = ""  # exception type, message and traceback when failed
    world_size: int = 1
    model_parameters: int = 0
    started_at: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    # compile backend: what Dynamo did during this run (its counters, before/after): frames it was
    # asked to compile and compiled, graphs, graph breaks and their reasons (a graph break runs that
    # part eagerly, it is reported, not hidden); empty for the other backends
    compile_stats: Optional["CompileStats"] = None

    # convenience views (not serialised)
    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK

    @property
    def losses(self) -> list[float]:
        return [s.loss for s in self.steps]

    def timed_steps(self) -> list[StepRecord]:
        """Steps after the start-up ones (the first STEP_WARMUP), or all but the first if the run is short."""
        skip = STEP_WARMUP if len(self.steps) > STEP_WARMUP + 2 else 1
        return self.steps[skip:] if len(self.steps) > skip else []

    @property
    def median_step_s(self) -> float:
        t = [s.step_s for s in self.timed_steps()]
        return statistics.median(t) if t else float("nan")

    @property
    def samples_per_s(self) -> float:
        m = self.median_step_s
        return self.config.examples_per_step * self.world_size / m if m and m == m else float("nan")

    @property
    def samples_per_s_with_startup(self) -> float:
        """Samples/s over every step, the first (export + graph build, or compilation) included."""
        total = sum(s.step_s for s in self.steps)
        return sum(s.examples for s in self.steps) / total if total > 0 else float("nan")

    @property
    def final_accuracy(self) -> float:
        return self.evals[-1].val_accuracy if self.evals else float("nan")

    @property
    def final_val_loss(self) -> float:
        return self.evals[-1].val_loss if self.evals else float("nan")


@dataclass(frozen=True)
class Progress:
    """What a progress callback receives after every step (and after every evaluation)."""

    backend: Backend
    step: int
    total_steps: int
    loss: float
    elapsed_s: float
    eta_s: float
    samples_per_s: float
    val_loss: Optional[float] = None
    val_accuracy: Optional[float] = None
    phase: str = "train"  # "startup" before the first step, "train", "eval", "done"

    @property
    def fraction(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0


ProgressFn = Callable[[Progress], None]


def load_train_run(path: str | os.PathLike) -> TrainRun:
    """Read a TrainRun back from ``train.json`` or from the backend folder holding it."""
    return runs.load_result(TrainRun, path, "train.json")


def list_train_runs(run_dir: str | os.PathLike) -> list[TrainRun]:
    """Every backend's TrainRun saved under ``run_dir`` (``<run_dir>/<backend>/train.json``)."""
    return [load_train_run(p) for p in runs.iter_files(run_dir, "*/train.json")]


# ---- memory ------------------------------------------------------------------------------
class PeakMemory:
    """Samples the process RSS in a background thread (CPU) or reads the CUDA allocator's peak."""

    def __init__(self, device: str, interval_s: float = 0.02):
        import psutil

        self.device, self.interval_s = device, interval_s
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.baseline_mib = self.rss_mib()
        self.peak_mib = self.baseline_mib
        if device.startswith("cuda"):
            import torch

            torch.cuda.reset_peak_memory_stats()
            self.source = "torch.cuda.max_memory_allocated (PyTorch caching allocator; ONNX Runtime's CUDA arena not included)"
        else:
            self.source = f"process RSS (psutil), sampled every {interval_s * 1000:.0f} ms and at every step during this run"

    def rss_mib(self) -> float:
        return self._proc.memory_info().rss / 2**20

    def sample(self) -> None:
        if not self.device.startswith("cuda"):
            self.peak_mib = max(self.peak_mib, self.rss_mib())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> "PeakMemory":
        if not self.device.startswith("cuda"):
            self._thread = threading.Thread(target=self._loop, name="workbench-rss", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        if self.device.startswith("cuda"):
            import torch

            self.peak_mib = torch.cuda.max_memory_allocated() / 2**20


# ---- batches -----------------------------------------------------------------------------
def steps_per_epoch(n_train: int, cfg: TrainConfig, world_size: int = 1) -> int:
    """Optimizer steps in one pass over ``n_train`` examples (incomplete batches are dropped)."""
    return (n_train // (cfg.batch_size * world_size)) // cfg.grad_accum


def total_steps_for(n_train: int, cfg: TrainConfig, world_size: int = 1) -> int:
    per_epoch = steps_per_epoch(n_train, cfg, world_size)
    if per_epoch == 0:
        raise TrainConfigError(
            f"the training split has {n_train} examples, fewer than one step needs "
            f"(batch_size {cfg.batch_size} x grad_accum {cfg.grad_accum} x {world_size} process(es)); "
            "lower batch_size/grad_accum or use more data (DataConfig(max_train=...))"
        )
    return cfg.max_steps if cfg.max_steps is not None else per_epoch * cfg.epochs


def iter_micro_batches(dataset, tokenizer, cfg: TrainConfig, rank: int = 0, world_size: int = 1) -> Iterator[tuple[dict, Any]]:
    """Endless (encoded inputs, labels) micro-batches in the seeded order, epoch after epoch.

    The order depends only on (seed, epoch), so every backend sees the same batches. Under
    DistributedDataParallel each global batch of ``batch_size * world_size`` examples is split
    between the ranks. Incomplete batches are dropped, so shapes stay fixed across steps.
    """
    import torch

    from ..batches import batch_indices, encode

    texts, labels = dataset["text"], dataset["label"]
    global_batch = cfg.batch_size * world_size
    epoch = 0
    while True:
        for idx in batch_indices(len(dataset), global_batch, shuffle=True, seed=cfg.seed, epoch=epoch, drop_last=True):
            mine = idx[rank * cfg.batch_size:(rank + 1) * cfg.batch_size]
            enc = encode(tokenizer, [texts[i] for i in mine], cfg.max_length, cfg.pad_to_max)
            yield enc, torch.tensor([labels[i] for i in mine], dtype=torch.long)
        epoch += 1


def lr_factor(step: int, total: int, cfg: TrainConfig) -> float:
    """Learning-rate multiplier for the 0-based optimizer step ``step`` (warm-up, then the schedule)."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / (cfg.warmup_steps + 1)
    if cfg.schedule is Schedule.CONSTANT:
        return 1.0
    progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
    if cfg.schedule is Schedule.LINEAR:
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


# ---- backends ----------------------------------------------------------------------------
@contextlib.contextmanager
def _env(values: dict[str, Optional[str]]):
    """Set (or with None: unset) environment variables for the duration of the block."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ortmodule_env(cfg: TrainConfig) -> dict[str, Optional[str]]:
    """The ORTMODULE_* variables ORTModule reads when it is constructed, for this config."""
    return {
        "ORTMODULE_FALLBACK_POLICY": "FALLBACK_DISABLE" if cfg.fallback is FallbackPolicy.DISABLE else None,
        "ORTMODULE_ONNX_OPSET_VERSION": str(cfg.opset),
        "ORTMODULE_MEMORY_OPT_LEVEL": str(cfg.memory_optimizer_level),
    }


def _has_fd(stream) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both OSError and ValueError
        return False


def allow_streams_without_fd() -> None:
    """Let ORTModule build its graph when ``sys.stdout``/``sys.stderr`` have no file descriptor.

    ORTModule 1.19.2 silences ONNX Runtime's C++ logging during graph building by redirecting file
    descriptors 1 and 2 (``_logger._suppress_os_stream_output``). Under ``contextlib.redirect_stdout``,
    pytest's ``capsys`` or any other in-memory stream, ``sys.stdout.fileno()`` raises, and its
    clean-up then fails with ``TypeError: 'NoneType' object cannot be interpreted as an integer``,
    which looks like an ORTModule failure. Patched once: without descriptors, the redirection is
    skipped (the C++ logs, if any, go to the process's real stdout/stderr).
    """
    from onnxruntime.training.ortmodule import _logger

    original = _logger._suppress_os_stream_output
    if getattr(original, "_workbench_patched", False):
        return

    def suppress(enable=True, on_exit=None):
        return original(enable=enable and _has_fd(sys.stdout) and _has_fd(sys.stderr), on_exit=on_exit)

    suppress._workbench_patched = True
    _logger._suppress_os_stream_output = suppress


def wrap_ortmodule(model, cfg: TrainConfig, graph_prefix: Optional[Path] = None):
    """Wrap ``model`` in ORTModule with the config's knobs.

    Opset, memory optimizer, compute optimizer and the fallback policy are read by ORTModule from
    ``ORTMODULE_*`` environment variables when it is built (set only for the construction here).
    Threads, graph optimization level and spinning are ONNX Runtime *session* options, which
    ORTModule builds itself; we adjust the session options it creates.

    Not offered: ``ORTMODULE_ENABLE_COMPUTE_OPTIMIZER=0`` crashes ORTModule 1.19.2 on the first
    step (``TypeError: 'NoneType' object is not iterable`` in ``_export_model``: the label-sparsity
    hook list is None when the optimizer is off).
    """
    from ..env import check_ortmodule_extensions

    ext = check_ortmodule_extensions()
    if not ext.ok:
        raise TrainConfigError(f"the ortmodule backend cannot run: {ext.value}; fix: {ext.fix}")
    allow_streams_without_fd()
    from ..quiet import ortmodule_warnings

    ortmodule_warnings()  # DeepSpeed's absence and ORTModule's own deprecated export call: see quiet.py
    with _env(ortmodule_env(cfg)):
        from onnxruntime.training.ortmodule import DebugOptions, LogLevel, ORTModule

        opts = DebugOptions(log_level=LogLevel[cfg.ort_log_level])
        if graph_prefix is not None:
            graph_prefix.parent.mkdir(parents=True, exist_ok=True)
            opts = DebugOptions(log_level=LogLevel[cfg.ort_log_level], save_onnx=True, onnx_prefix=str(graph_prefix))
        wrapped = ORTModule(model, opts)
    _raise_if_fell_back(wrapped, when="while wrapping the model")
    manager = wrapped._torch_module._execution_manager(True)
    original = manager._get_session_config
    threads = cfg.ort_threads or cfg.threads

    def session_config():
        import onnxruntime as ort

        so, providers, provider_options = original()
        if threads:
            so.intra_op_num_threads = threads
        so.graph_optimization_level = {
            "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[cfg.ort_graph_optimization]
        if not cfg.ort_allow_spinning:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return so, providers, provider_options

    manager._get_session_config = session_config
    return wrapped


class FellBackError(RuntimeError):
    """ORTModule ran (or would run) the model in PyTorch instead of ONNX Runtime."""


def ortmodule_fell_back(wrapped) -> Optional[BaseException]:
    """The exception that made ORTModule fall back to PyTorch, or None while it runs in ONNX Runtime."""
    from onnxruntime.training.ortmodule._torch_module_pytorch import TorchModulePytorch

    fm = getattr(wrapped, "_fallback_manager", None)
    if fm is not None and fm.is_pending():
        return fm._exception
    if isinstance(getattr(wrapped, "_torch_module", None), TorchModulePytorch):
        return RuntimeError("ORTModule switched its backend to PyTorch during initialisation")
    return None


def _raise_if_fell_back(wrapped, when: str) -> None:
    exc = ortmodule_fell_back(wrapped)
    if exc is not None:
        raise FellBackError(f"ORTModule fell back to PyTorch {when}: {type(exc).__name__}: {_first_lines(str(exc), 6)}") from exc


def _first_lines(text: str, n: int) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return " | ".join(lines[:n]) + (" ..." if len(lines) > n else "")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def explain_failure(exc: BaseException, backend: Backend, cfg: TrainConfig) -> str:
    """Turn an exception from a training step into 'what went wrong, and what to do'."""
    text = f"{type(exc).__name__}: {exc}"
    detail = _first_lines(str(exc), 4)
    if isinstance(exc, FellBackError):
        cause = exc.__cause__
        return (
            f"{exc.args[0].split(':')[0]} (fallback policy 'detect' = ORTModule's default, which silently trains in "
            "PyTorch), so this run did not execute in ONNX Runtime and is not an ORTModule result; it was stopped. "
            f"Cause: {explain_failure(cause, backend, cfg) if cause is not None else detail}"
        )
    if backend is Backend.ORTMODULE:
        if "gradient_builder" in text or (cfg.attn_implementation == "sdpa" and "ORTModule" in text):
            sdpa = cfg.attn_implementation == "sdpa"
            return (
                f"ORTModule could not build the gradient graph of the model (attention: {cfg.attn_implementation!r}, "
                f"dropout {'on' if cfg.dropout else 'off'}). "
                + ("transformers' SDPA attention with dropout exports an attention-dropout node whose gradient ONNX "
                   "Runtime cannot build. Fix: load the model with attn_implementation='eager' (the default in "
                   "TrainConfig), or turn dropout off, or train with the eager backend. " if sdpa else
                   "Fix: train with the eager backend, or simplify the model's forward pass. ")
                + f"ONNX Runtime said: {detail}"
            )
        if "Duplicate definition of name (_grad)" in text:
            # Measured on ModernBERT (norm_bias=False): ORTModule's export writes LayerNormalization with
            # an empty bias input, and the 1.19.2 gradient builder names the gradient of every empty
            # input "_grad", so two bias-free LayerNorms give the same name twice.
            return (
                "ORTModule could not build the gradient graph: the model has LayerNorms without a bias "
                "(ModernBERT's norm_bias=False), which export with an empty bias input, and onnxruntime-training "
                "1.19.2's gradient builder names the gradient of each empty input '_grad', twice. Fix: train with "
                "the eager or compile backend (export, fusion and INT8 of the trained model work), or set "
                "\"norm_bias\": true in the model's config.json: its LayerNorms then get zero biases (the same "
                "outputs) that ORTModule can differentiate, and are trained with the rest. "
                "ONNX Runtime said: 'This is an invalid model. Error: Duplicate definition of name (_grad).'"
            )
        if "Could not find an implementation" in text:
            return (
                f"ONNX Runtime has no kernel for an op in this graph on {cfg.device} (precision {cfg.precision.value}). "
                "Fix: use precision='fp32' with ortmodule, or another backend. "
                f"ONNX Runtime said: {detail}"
            )
        if "exporting the PyTorch model to ONNX" in text or "UnsupportedOperatorError" in text:
            op = re.search(r"Exporting the operator '([^']+)' to ONNX opset version (\d+) is not supported", text)
            what = (f"the operator {op.group(1)} has no ONNX export at opset {op.group(2)}" if op
                    else f"an op or construct without an ONNX equivalent at opset {cfg.opset}")
            return (
                f"ORTModule could not export the model to ONNX: {what}. Fix: replace that op in the model (or "
                "register an ONNX symbolic for it), try another opset (TrainConfig(opset=...)), or train with the "
                f"eager backend. Export error: {_last_line(text)}"
            )
        return f"ORTModule failed: {type(exc).__name__}: {detail}. Fix: see the error above, or train with the eager backend."
    if backend is Backend.COMPILE:
        return (
            f"torch.compile failed: {type(exc).__name__}: {detail}. Fix: try compile_mode='default', "
            "compile_dynamic=False with pad_to_max=True, or train with the eager backend."
        )
    return f"training failed: {type(exc).__name__}: {detail}"


def _prepare_model(model, backend: Backend, cfg: TrainConfig, graph_prefix: Optional[Path]):
    if backend is Backend.ORTMODULE:
        return wrap_ortmodule(model, cfg, graph_prefix)
    if backend is Backend.COMPILE:
        import torch

        # Start from an empty Dynamo cache: a second run in this process would otherwise reuse the
        # code compiled for the first (same model class), so its start-up would not include the
        # compilation and Dynamo's counters (CompileStats) would show nothing compiled.
        torch._dynamo.reset()
        return torch.compile(model, mode=cfg.compile_mode, dynamic=cfg.compile_dynamic)
    return model


def _make_optimizer(params, cfg: TrainConfig):
    import torch

    params = [p for p in params if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]  # biases and LayerNorm weights
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if cfg.optimizer is Optimizer.ORT_FUSED_ADAM:
        from onnxruntime.training.optim import AdamWMode, FusedAdam

        return FusedAdam(groups, lr=cfg.lr, adam_w_mode=AdamWMode.ADAMW_TORCH, eps=1e-8)
    return torch.optim.AdamW(groups, lr=cfg.lr, fused=cfg.optimizer is Optimizer.ADAMW_FUSED or None)


def evaluate(model, dataset, tokenizer, cfg: TrainConfig, device) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` (plain PyTorch, eval mode, no dropout) on ``dataset``."""
    import torch

    from ..batches import iter_encoded, model_inputs

    was_training = model.training
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    try:
        with torch.no_grad(), _autocast(cfg, device):
            for enc, labels, _ in iter_encoded(dataset, tokenizer, cfg.eval_batch_size, cfg.max_length):
                enc = {k: v.to(device) for k, v in model_inputs(model, enc).items()}
                labels = labels.to(device)
                logits = model(**enc).logits.float()
                total_loss += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
                correct += int((logits.argmax(-1) == labels).sum())
                n += len(labels)
    finally:
        model.train(was_training)
    return total_loss / max(n, 1), correct / max(n, 1)


def _autocast(cfg: TrainConfig, device):
    import torch

    if cfg.precision is Precision.FP32:
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if cfg.precision is Precision.BF16 else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def _sync(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def _load_average() -> str:
    """The 1-minute load average (runnable processes), as text: a shared machine's load is part of every timing."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:  # not available on this platform
        return ""


def _environment(cfg: TrainConfig) -> dict[str, str]:
    import torch

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "cpu_count": str(os.cpu_count()),
        "processor": platform.processor() or platform.machine(),
        "pid": str(os.getpid()),
        "isolated": "1" if os.environ.get("WORKBENCH_ISOLATED") == "1" else "0",
    }
    try:
        import onnxruntime

        env["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        pass
    return env


# ---- the loop ----------------------------------------------------------------------------
def _dist_info() -> tuple[int, int]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return 0, 1


class Trainer:
    """One backend's training state, advanced one optimizer step at a time.

    This *is* the training loop body: :func:`run_training` calls :meth:`step` in a loop, and the
    benchmark interleaves several trainers step by step so that every variant sees the same
    machine load. Builds the wrapped model (ORTModule / torch.compile / plain), the optimizer
    (on the original module's parameters, which ORTModule and torch.compile train in place), the
    schedule and the seeded batch stream.
    """

    def __init__(self, cfg: TrainConfig, backend: Backend | str, loaded, train_dataset, total_steps: int,
                 graph_prefix: Optional[Path] = None, rank: int = 0, world_size: int = 1):
        import torch

        self.cfg, self.backend = cfg, _enum(Backend, backend, "backend")
        self.world_size, self.total_steps, self.step_no = world_size, total_steps, 0
        self.device = torch.device(cfg.device)
        self.net = loaded.model.to(self.device)
        self.net.train()
        torch.manual_seed(cfg.seed)
        wrapped = _prepare_model(self.net, self.backend, cfg, graph_prefix)
        self.ort_module = wrapped if self.backend is Backend.ORTMODULE else None
        if world_size > 1:
            wrapped = torch.nn.parallel.DistributedDataParallel(wrapped)
        self.wrapped = wrapped
        if self.backend is Backend.ORTMODULE:
            import onnxruntime

            onnxruntime.set_seed(cfg.seed)
        self.optimizer = _make_optimizer(self.net.parameters(), cfg)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_factor(s, total_steps, cfg))
        self.scaler = torch.amp.GradScaler(self.device.type) if cfg.precision is Precision.FP16 else None
        self.batches = iter_micro_batches(train_dataset, loaded.tokenizer, cfg, rank, world_size)

    def step(self) -> StepRecord:
        """One optimizer step (``grad_accum`` micro-batches); tokenisation is done before the clock starts.

        Raises :class:`FellBackError` when ORTModule ran the step in PyTorch, FloatingPointError
        on a non-finite loss, and whatever the backend raised otherwise.
        """
        import torch

        from ..batches import model_inputs

        cfg, device = self.cfg, self.device
        self.step_no += 1
        micro = [next(self.batches) for _ in range(cfg.grad_accum)]
        # Only what the model's forward() takes (no token_type_ids for DistilBERT, MPNet, ...).
        micro = [({k: v.to(device) for k, v in model_inputs(self.net, enc).items()}, y.to(device)) for enc, y in micro]
        _sync(device)
        t0 = time.perf_counter()
        loss_sum = 0.0
        for enc, labels in micro:
            with _autocast(cfg, device):
                out = self.wrapped(**enc, labels=labels)
            if self.ort_module is not None:
                _raise_if_fell_back(self.ort_module, when=f"at step {self.step_no}")
            loss = out.loss / cfg.grad_accum
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            loss_sum += float(loss.detach())
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        if cfg.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), cfg.max_grad_norm)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        lr_now = self.scheduler.get_last_lr()[0]
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        _sync(device)
        dt = time.perf_counter() - t0
        if not math.isfinite(loss_sum):
            raise FloatingPointError(
                f"the training loss became {loss_sum} at step {self.step_no}: lower lr (now {cfg.lr}) or use precision='fp32'"
            )
        examples = cfg.examples_per_step * self.world_size
        return StepRecord(self.step_no, loss_sum, dt, examples / dt, lr_now, examples)


def run_training(
    cfg: TrainConfig,
    backend: Backend | str,
    run_dir: str | os.PathLike | None = None,
    progress: Optional[ProgressFn] = None,
    stop: Optional[threading.Event] = None,
    *,
    model=None,
) -> TrainRun:
    """Fine-tune ``cfg.model`` on ``cfg.data`` with one backend; save and return the :class:`TrainRun`.

    ``progress(Progress)`` is called after every step and evaluation. ``stop`` (a
    ``threading.Event``) is checked between steps: a stopped run keeps what it has (steps,
    checkpoint) and is marked ``stopped``. Settings that cannot work together raise
    :class:`TrainConfigError` before anything runs; a failure *during* training is returned as a
    run with status ``failed`` and the cause and fix in ``reason`` (it is also saved).

    Under ``torchrun`` (``torch.distributed`` initialised) the same loop runs with
    DistributedDataParallel; only rank 0 reports progress and writes the run.

    ``model`` (advanced, tests): a ``workbench.models.LoadedModel`` to train instead of loading
    ``cfg.model``; its head must match the data's classes.
    """
    backend = check_backend(cfg, backend)
    rank, world_size = _dist_info()
    if world_size > 1 and backend is Backend.COMPILE:
        raise TrainConfigError("the compile backend is not supported under DistributedDataParallel here; use eager or ortmodule")
    if run_dir is None:
        run_dir = runs.new_run_dir(f"train-{backend.value}") if rank == 0 else None
    out = Path(run_dir) / backend.value if run_dir is not None else None
    if out is not None and rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = _load_average()
    t_start = time.perf_counter()

    import torch

    from ..data import class_names
    from ..models import load_for_data

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = torch.device(cfg.device)
    dd = _load_data(cfg.data)
    classes = class_names(dd)
    total = total_steps_for(len(dd["train"]), cfg, world_size)

    memory = PeakMemory(cfg.device)
    with memory:
        if model is None:
            from ..quiet import new_classifier_head_expected

            with new_classifier_head_expected():  # the head is new on purpose: it is trained next
                model = load_for_data(cfg.model, classes, attn_implementation=cfg.attn_implementation, dropout=cfg.dropout, seed=cfg.seed)
        loaded = model
        net = loaded.model.to(device)
        net.train()
        n_params = sum(p.numel() for p in net.parameters())
        graph_tmp = out / f".graphs.{os.getpid()}.tmp" if (out is not None and backend is Backend.ORTMODULE and cfg.save_graphs and rank == 0) else None
        if graph_tmp is not None:
            shutil.rmtree(graph_tmp, ignore_errors=True)

        steps: list[StepRecord] = []
        evals: list[EvalRecord] = []
        status, reason, error = RunStatus.OK, "", ""
        startup_s = float("nan")
        setup_s = 0.0
        executed_in_ort = False
        dynamo_before = _dynamo_counters() if backend is Backend.COMPILE else None
        try:
            trainer = Trainer(cfg, backend, loaded, dd["train"], total, graph_tmp / "train" if graph_tmp is not None else None,
                              rank=rank, world_size=world_size)
            setup_s = time.perf_counter() - t_start
            if progress is not None and rank == 0:
                progress(Progress(backend, 0, total, float("nan"), setup_s, float("nan"), 0.0, phase="startup"))

            for step in range(1, total + 1):
                if _should_stop(stop, world_size):
                    status, reason = RunStatus.STOPPED, f"stopped on request after {step - 1} of {total} steps; the checkpoint holds the weights at that point"
                    break
                rec = trainer.step()
                if step == 1:
                    startup_s = rec.step_s
                    executed_in_ort = backend is Backend.ORTMODULE
                steps.append(rec)
                memory.sample()

                val = None
                if cfg.eval_every and step % cfg.eval_every == 0 and step < total and rank == 0:
                    val = _run_eval(net, dd, loaded.tokenizer, cfg, device, step, evals)
                if progress is not None and rank == 0:
                    progress(_progress(backend, steps, total, t_start, val))

            if status is RunStatus.OK and rank == 0 and dd["validation"].num_rows:
                val = _run_eval(net, dd, loaded.tokenizer, cfg, device, len(steps), evals)
                if progress is not None:
                    progress(dataclasses.replace(_progress(backend, steps, total, t_start, val), phase="done"))
        except Exception as exc:  # recorded with its cause and fix, saved, and returned as a failed run
            error = "".join(traceback.format_exception(exc))
            reason = explain_failure(exc, backend, cfg)
            status = RunStatus.FELL_BACK if isinstance(exc, FellBackError) else RunStatus.FAILED
            executed_in_ort = False
            if world_size > 1:
                raise  # a failing rank must bring the whole job down, not hang the other ranks

    compile_stats = _compile_stats(dynamo_before) if dynamo_before is not None else None
    if compile_stats is not None and status is RunStatus.OK and not compile_stats.compiled:
        # the counterpart of ORTModule's silent fallback: a "compile" run that compiled nothing was eager
        status = RunStatus.FELL_BACK
        reason = (f"torch.compile compiled nothing: Dynamo's counters show {compile_stats.frames_compiled} of "
                  f"{compile_stats.frames_total} frame(s) compiled and {compile_stats.graphs} graph(s); the run was "
                  "eager PyTorch. Fix: check TORCHDYNAMO_DISABLE and torch._dynamo.config, or train with eager")
    graphs = None
    checkpoint = None
    if rank == 0 and out is not None:
        if graph_tmp is not None and graph_tmp.exists() and status in (RunStatus.OK, RunStatus.STOPPED):
            graphs = _finalise_graphs(graph_tmp, out / "graphs")
        if graph_tmp is not None:
            shutil.rmtree(graph_tmp, ignore_errors=True)
        if status in (RunStatus.OK, RunStatus.STOPPED) and steps:
            checkpoint = str(save_checkpoint(net, loaded.tokenizer, out / "checkpoint", cfg))
    run = TrainRun(
        backend=backend, status=status, reason=reason, executed_in_onnxruntime=executed_in_ort,
        steps=steps, evals=evals, peak_memory_mib=round(memory.peak_mib, 1),
        startup_s=startup_s, total_s=time.perf_counter() - t_start, checkpoint_dir=checkpoint, graphs=graphs,
        config=cfg, total_steps=total, setup_s=setup_s, memory_baseline_mib=round(memory.baseline_mib, 1),
        memory_source=memory.source, error=error, world_size=world_size, model_parameters=n_params,
        started_at=started_at, compile_stats=compile_stats,
        environment={**_environment(cfg), "load_avg_start": load_start, "load_avg_end": _load_average()},
    )
    if rank == 0 and out is not None:
        runs.save_result(run, out / "train.json")
    return run


@functools.lru_cache(maxsize=4)
def _load_builtin(cfg: DataConfig):
    from ..data import load_data

    return load_data(cfg)


def _load_data(cfg: DataConfig):
    """The run's data. The built-in reviews never change, so their splits are cached per DataConfig
    (runs of several backends in one process then skip re-reading them); user files are re-read."""
    from ..data import BUILTIN, load_data

    return _load_builtin(cfg) if cfg.source == BUILTIN else load_data(cfg)


def _should_stop(stop: Optional[threading.Event], world_size: int) -> bool:
    flag = bool(stop is not None and stop.is_set())
    if world_size > 1:  # every rank must agree, or the others would wait forever in all-reduce
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        flag = bool(t.item())
    return flag


def _run_eval(net, dd, tokenizer, cfg, device, step, evals) -> EvalRecord:
    t0 = time.perf_counter()
    loss, acc = evaluate(net, dd["validation"], tokenizer, cfg, device)
    rec = EvalRecord(step, loss, acc, dd["validation"].num_rows, time.perf_counter() - t0)
    evals.append(rec)
    return rec


def _progress(backend, steps: list[StepRecord], total: int, t_start: float, val: Optional[EvalRecord]) -> Progress:
    last = steps[-1]
    recent = [s.step_s for s in steps[1:][-20:]] or [last.step_s]
    per_step = statistics.median(recent)
    return Progress(
        backend=backend, step=last.step, total_steps=total, loss=last.loss,
        elapsed_s=time.perf_counter() - t_start, eta_s=per_step * (total - last.step),
        samples_per_s=last.examples / per_step,
        val_loss=val.val_loss if val else None, val_accuracy=val.val_accuracy if val else None,
        phase="eval" if val else "train",
    )


# ---- checkpoint --------------------------------------------------------------------------
def save_checkpoint(model, tokenizer, folder: Path, cfg: TrainConfig) -> Path:
    """``save_pretrained`` into a temporary folder beside ``folder``, then rename it into place.

    A model trained with dropout off has its dropout probabilities set to 0 in its config; the
    saved config gets the original values back so that later fine-tuning behaves normally.
    """
    folder = Path(folder)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{time.time_ns()}.tmp")
    old = folder.with_name(f".{folder.name}.{os.getpid()}.{time.time_ns()}.old")
    model = getattr(model, "_orig_mod", model)
    saved = {}
    if not cfg.dropout:
        defaults = _dropout_defaults(cfg.model)
        for k, v in defaults.items():
            if hasattr(model.config, k):
                saved[k] = getattr(model.config, k)
                setattr(model.config, k, v)
    try:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        for k, v in saved.items():
            setattr(model.config, k, v)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def _dropout_defaults(name: str) -> dict[str, Any]:
    from transformers import AutoConfig, BertConfig

    from ..models import DROPOUT_ATTRIBUTES, resolve_model_path

    path = resolve_model_path(name)
    base = BertConfig() if path is None else AutoConfig.from_pretrained(str(path), local_files_only=True)
    # every name load_model(dropout=False) zeroes (DistilBERT's, DeBERTa's and ModernBERT's too)
    return {k: getattr(base, k) for k in DROPOUT_ATTRIBUTES if hasattr(base, k)}


# ---- training graphs ---------------------------------------------------------------------
GRAPH_STAGES = ("torch_exported", "post_processed", "optimized_pre_grad", "optimized", "execution_model")
# Kernels that stand for a pattern of several exported ops (forward and gradient).
FUSED_OP_TYPES = frozenset({
    "FusedMatMul", "FusedGemm", "FusedConv", "Gemm", "LayerNormalization", "SimplifiedLayerNormalization",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization", "BiasGelu",
    "FastGelu", "Gelu", "QuickGelu", "BiasDropout", "BitmaskDropout", "BitmaskBiasDropout", "BiasSoftmax",
    "BiasSoftmaxDropout", "Attention", "MultiHeadAttention", "MatMulScaleTranspose",
    "SoftmaxCrossEntropyLossInternal", "SoftmaxCrossEntropyLossInternalGrad", "LayerNormalizationGrad",
    "SimplifiedLayerNormalizationGrad", "InvertibleLayerNormalizationGrad", "GeluGrad", "FastGeluGrad",
    "BiasGeluGrad_dX", "BiasFastGeluGrad_dX", "BitmaskDropoutGrad", "SoftmaxGrad_13", "ReduceAllL2",
    "ConcatTraining", "PadAndUnflatten", "FlattenAndUnpad", "ScaledSum", "BatchScale", "MemcpyFromHost",
})


def summarize_graph(path: str | os.PathLike, name: str, previous: Optional[GraphStage] = None) -> GraphStage:
    """Node count, op-type counts, ONNX Runtime contrib ops and fused kernels of one saved graph."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    counts: dict[str, int] = {}
    contrib: dict[str, int] = {}

    def walk(graph):
        for node in graph.node:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
            if node.domain == "com.microsoft":
                contrib[node.op_type] = contrib.get(node.op_type, 0) + 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)

    walk(model.graph)
    fused = {k: v for k, v in counts.items() if k in FUSED_OP_TYPES}
    before = previous.op_counts if previous else {}
    added = {k: v - before.get(k, 0) for k, v in counts.items() if v > before.get(k, 0)} if previous else {}
    removed = {k: v - counts.get(k, 0) for k, v in before.items() if v > counts.get(k, 0)} if previous else {}
    return GraphStage(name, str(path), sum(counts.values()), dict(sorted(counts.items())), dict(sorted(contrib.items())),
                      dict(sorted(fused.items())), dict(sorted(added.items())), dict(sorted(removed.items())))


def _finalise_graphs(tmp: Path, final: Path) -> Optional[TrainGraphs]:
    """Summarise the graphs ORTModule wrote into ``tmp`` and move the folder to ``final`` in one rename.

    The graphs hold no weights (ORTModule feeds the parameters in as graph inputs): about 1 MB for
    MiniLM in all, so they are kept whole.
    """
    files = {stage: next(iter(sorted(tmp.glob(f"*_{stage}_training.onnx"))), None) for stage in GRAPH_STAGES}
    found = {k: v for k, v in files.items() if v is not None}
    if not found:
        return None
    stages: list[GraphStage] = []
    prev = None
    for stage in GRAPH_STAGES:
        if stage in found:
            prev = summarize_graph(found[stage], stage, prev)
            stages.append(prev)
    old = final.with_name(f".{final.name}.{os.getpid()}.old")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    stages = [dataclasses.replace(s, path=str(final / Path(s.path).name)) for s in stages]
    return TrainGraphs(str(final), stages)


# ---- one backend in its own process --------------------------------------------------------
PROGRESS_PREFIX = "WORKBENCH_PROGRESS "


def run_training_isolated(
    cfg: TrainConfig,
    backend: Backend | str,
    run_dir: str | os.PathLike,
    progress: Optional[ProgressFn] = None,
    stop: Optional[threading.Event] = None,
    timeout_s: Optional[float] = None,
    env: Optional[dict[str, str]] = None,
) -> TrainRun:
    """:func:`run_training` in a fresh Python process (``python -m workbench.train``).

    Each backend then starts from a clean process: its peak RSS, thread pools and compile caches
    are its own. Progress comes back as JSON lines; ``stop`` sends SIGTERM, which the child turns
    into a clean stop between steps (a first step that is still exporting or compiling finishes
    first). ``env`` adds environment variables for the child (e.g. a fresh
    ``TORCHINDUCTOR_CACHE_DIR`` to measure a cold torch.compile start-up).
    """
    import signal
    import subprocess

    backend = check_backend(cfg, backend)
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = runs.atomic_write_json(run_dir / f".{backend.value}.config.json", cfg)
    cmd = [sys.executable, "-m", "workbench.train", "--config", str(cfg_path), "--backend", backend.value, "--run-dir", str(run_dir)]
    # The child runs in the caller's working directory (relative model and data paths in cfg mean
    # the same there) and imports this very copy of workbench: its parent folder goes first on
    # PYTHONPATH (a checkout, or site-packages for an installed wheel).
    here = str(Path(__file__).resolve().parent.parent)
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (here, child_env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=child_env)
    err_tail: list[str] = []

    def drain_stderr():
        for line in proc.stderr:
            err_tail.append(line)
            del err_tail[:-60]

    t_err = threading.Thread(target=drain_stderr, daemon=True)
    t_err.start()
    watcher = None
    if stop is not None:
        def watch():
            while proc.poll() is None:
                if stop.wait(0.2):
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    t0 = time.perf_counter()
    for line in proc.stdout:
        if line.startswith(PROGRESS_PREFIX) and progress is not None:
            progress(serial.from_dict(Progress, json.loads(line[len(PROGRESS_PREFIX):])))
        if timeout_s is not None and time.perf_counter() - t0 > timeout_s:
            proc.kill()
            break
    rc = proc.wait()
    t_err.join(timeout=5)
    cfg_path.unlink(missing_ok=True)
    result = run_dir / backend.value / "train.json"
    if rc != 0 or not result.is_file():
        raise RuntimeError(
            f"the {backend.value} training process exited with code {rc} without a result at {result}; "
            f"its last output:\n{''.join(err_tail[-25:])}"
        )
    return load_train_run(result)


def _child_main(argv: Optional[list[str]] = None) -> int:
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="python -m workbench.train", description="one training run (used by run_training_isolated)")
    parser.add_argument("--config", required=True, help="TrainConfig as JSON (workbench.serial.to_dict)")
    parser.add_argument("--backend", required=True, choices=[b.value for b in Backend])
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args(argv)
    cfg = serial.from_dict(TrainConfig, json.loads(Path(args.config).read_text()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    os.environ["WORKBENCH_ISOLATED"] = "1"

    def emit(p: Progress) -> None:
        print(PROGRESS_PREFIX + json.dumps(serial.to_dict(p), allow_nan=False), flush=True)

    run_training(cfg, args.backend, args.run_dir, progress=emit, stop=stop)
    return 0  # a failed run is a result too (saved with its reason); the parent reads train.json


if __name__ == "__main__":
    sys.exit(_child_main())
