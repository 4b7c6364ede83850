"""What defines a training run (:class:`TrainConfig`), and which backend may run it (:func:`check_backend`).

The defaults are the settings measured fastest side by side (:data:`TUNED_DEFAULTS`). bf16 on the CPU needs
AVX-512 BF16 or AMX and not ORTModule (its CPU build has no bf16 MatMul kernel); fp16 needs CUDA.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ..core import serial
from ..data.load import DataConfig
from ..core.options import parse_choice
from ..runtime.session import GRAPH_OPTIMIZATION_LEVELS


class TrainConfigError(ValueError):
    """A training setting that cannot work; the message names the value, what is allowed and the fix."""


class Backend(str, enum.Enum):
    EAGER = "eager"
    ORTMODULE = "ortmodule"
    COMPILE = "compile"


DEFAULT_BACKENDS = tuple(Backend)  # what a comparison trains unless told otherwise: all three


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


ORT_LOG_LEVELS = ("VERBOSE", "INFO", "WARNING", "ERROR", "FATAL")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
ATTENTION = ("eager", "sdpa")
OPSET_RANGE = (14, 20)
MEMORY_OPT_LEVELS = (0, 1, 2)
_DEVICE_RE = re.compile(r"^(cpu|cuda(:\d+)?)$")
# Fastest side by side (benchmarks/bench_train.py). Fused AdamW speeds eager up as much, so the baseline gets
# it too and is never out-tuned in a headline ratio.
TUNED_DEFAULTS = {"opset": 14, "optimizer": "adamw_fused", "ort_allow_spinning": False}
ORTMODULE_OWN_DEFAULTS = {"opset": 17, "optimizer": "adamw", "ort_allow_spinning": True}
# TrainConfig fields only one backend reads: runs that differ only in these still compare like for like.
BACKEND_ONLY_FIELDS = ("opset", "memory_optimizer_level", "ort_threads", "ort_graph_optimization", "ort_allow_spinning",
                       "ort_log_level", "fallback", "save_graphs", "compile_mode", "compile_dynamic")


_TRUE, _FALSE = ("true", "on", "yes", "1"), ("false", "off", "no", "0")


def _flag(value: Any, name: str) -> bool:
    """A yes/no setting: True/False, or the strings on/off, true/false, yes/no, 1/0 (CLI, JSON)."""
    text = str(value).strip().lower()
    if isinstance(value, bool) or text in _TRUE + _FALSE:
        return text in _TRUE
    raise TrainConfigError(f"{name} must be True or False (or one of on/off, yes/no), got {value!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a fine-tuning run, except the backend (which is what we compare). Steps are
    optimizer steps of ``batch_size * grad_accum`` examples; ``max_steps`` cycles the data as needed."""

    model: str = field(default="tiny", metadata={"help": "'minilm', 'tiny', a Hugging Face model folder or a Hub id "
                                                             "(ORG/NAME, read from the Hugging Face cache)"})
    data: DataConfig = field(default_factory=DataConfig.quick, metadata={"help": "the data to train on (DataConfig)"})
    max_length: int = field(default=64, metadata={"help": "tokens per text (longer texts are truncated)"})
    pad_to_max: bool = field(default=False, metadata={"help": (
        "pad every batch to --max-length (fixed shapes: torch.compile compiles once)")})
    batch_size: int = field(default=16, metadata={"help": "examples per batch (one optimizer step takes batch-size x grad-accum)"})
    grad_accum: int = field(default=1, metadata={"help": "batches whose gradients are summed into one optimizer step"})
    epochs: int = field(default=1, metadata={"help": "passes over the training data (when --steps is not set)"})
    max_steps: Optional[int] = field(default=None, metadata={"help": "optimizer steps (overrides --epochs)"})
    lr: float = field(default=5e-5, metadata={"help": "peak learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW's weight decay"})
    schedule: Schedule = field(default=Schedule.LINEAR, metadata={"help": (
        "learning rate after the warm-up: constant, linear or cosine decay to 0")})
    warmup_steps: int = field(default=0, metadata={"help": "steps of linear learning-rate warm-up"})
    max_grad_norm: Optional[float] = field(default=1.0, metadata={"help": "gradients clipped to this norm (None: no clipping)"})
    optimizer: Optimizer = field(default=Optimizer.ADAMW_FUSED, metadata={"help": (
        "adamw (foreach), adamw_fused (one fused kernel) or ort_fused_adam (ONNX Runtime's, CUDA only)")})
    seed: int = field(default=0, metadata={"help": "seed of the data order and the new head's weights"})
    dropout: bool = field(default=False, metadata={"help": (
        "dropout on/off (off: loss curves of two backends can be compared step by step)")})
    attn_implementation: str = field(default="eager", metadata={"help": (
        "attention implementation to load the model with (eager: what ORTModule trains)")})
    eval_every: int = field(default=0, metadata={"help": "evaluate every N steps (0: at the end only)"})
    eval_batch_size: int = field(default=64, metadata={"help": "examples per batch when evaluating"})
    threads: Optional[int] = field(default=None, metadata={"help": "torch intra-op threads (default: torch's own)"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda or cuda:N"})
    precision: Precision = field(default=Precision.FP32, metadata={"help": (
        "fp32, bf16 (CPUs with AVX-512 BF16 or AMX; eager and compile) or fp16 (CUDA)")})
    # ORTModule's knobs
    opset: int = field(default=14, metadata={"help": (
        "ONNX opset ORTModule exports with (ORTModule's own default is 17; 14 measured faster)")})
    memory_optimizer_level: int = field(default=0, metadata={"help": (
        "ORTModule's memory optimizer: 0 off, 1 layer-wise recompute, 2 recompute incl. compromised subgraphs")})
    ort_threads: Optional[int] = field(default=None, metadata={"help": (
        "intra-op threads of ONNX Runtime's session (default: same as --threads)")})
    ort_graph_optimization: str = field(default="all", metadata={"help": "graph optimization level of ONNX Runtime's session"})
    ort_allow_spinning: bool = field(default=False, metadata={"help": (
        "whether ONNX Runtime's idle threads spin (ORTModule's own default; measured slower here) or sleep (--no-spinning)")})
    ort_log_level: str = field(default="ERROR", metadata={"help": "ORTModule's log level (VERBOSE, INFO, WARNING, ERROR or FATAL)"})
    fallback: FallbackPolicy = field(default=FallbackPolicy.DISABLE, metadata={"help": (
        "disable: fail loudly; detect: stop and mark the run fell_back")})
    save_graphs: bool = field(default=True, metadata={"help": "keep ORTModule's training graphs in the run folder"})
    # torch.compile knobs
    compile_mode: str = field(default="default", metadata={"help": "torch.compile mode"})
    compile_dynamic: Optional[bool] = field(default=None, metadata={"help": (
        "torch.compile's dynamic shapes (None: torch decides; False: one graph per shape)")})

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        for name, cls in (("schedule", Schedule), ("optimizer", Optimizer), ("precision", Precision),
                          ("fallback", FallbackPolicy)):
            set_(name, parse_choice(cls, getattr(self, name), name, TrainConfigError))
        if isinstance(self.data, dict):
            set_("data", serial.from_dict(DataConfig, self.data))
        if not isinstance(self.data, DataConfig):
            raise TrainConfigError(f"data must be a workbench.data.load.DataConfig, got {type(self.data).__name__}; "
                                   "use DataConfig.quick() or DataConfig(...)")
        for name in ("pad_to_max", "dropout", "ort_allow_spinning", "save_graphs"):
            set_(name, _flag(getattr(self, name), name))
        if not isinstance(self.model, str) or not self.model:
            raise TrainConfigError(f"model must be 'minilm', 'tiny' or a model folder path, got {self.model!r}")
        for name, low in (("max_length", 8), ("batch_size", 1), ("grad_accum", 1), ("epochs", 1), ("eval_batch_size", 1),
                          ("warmup_steps", 0), ("eval_every", 0), ("seed", 0)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise TrainConfigError(f"{name} must be an integer >= {low}, got {v!r}")
        if self.max_length > 512:
            raise TrainConfigError(f"max_length must be at most 512 (BERT position embeddings), got {self.max_length}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise TrainConfigError(f"max_steps must be a positive integer, got {self.max_steps!r}; leave it unset to train for the epochs")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1):
            raise TrainConfigError(f"lr must be between 0 and 1 (typical: 5e-5 for MiniLM, 1e-3 for the tiny model), got {self.lr!r}")
        if self.weight_decay < 0:
            raise TrainConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise TrainConfigError(f"max_grad_norm must be positive, got {self.max_grad_norm}; leave it unset for no clipping")
        for name in ("threads", "ort_threads"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise TrainConfigError(f"{name} must be a positive integer, got {v!r}; leave it unset for the library's default")
        if not _DEVICE_RE.match(str(self.device)):
            raise TrainConfigError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        if not OPSET_RANGE[0] <= self.opset <= OPSET_RANGE[1]:
            raise TrainConfigError(f"opset must be between {OPSET_RANGE[0]} and {OPSET_RANGE[1]} "
                                   f"(the workbench's default is 14, ORTModule's own 17), got {self.opset}")
        if self.memory_optimizer_level not in MEMORY_OPT_LEVELS:
            raise TrainConfigError(
                f"memory_optimizer_level must be one of {MEMORY_OPT_LEVELS} (0 off, 1 layer-wise recompute, "
                f"2 recompute with compromise), got {self.memory_optimizer_level!r}"
            )
        set_("ort_graph_optimization", str(self.ort_graph_optimization).lower())
        set_("ort_log_level", str(self.ort_log_level).upper())
        for name, allowed in (("attn_implementation", ATTENTION), ("ort_graph_optimization", GRAPH_OPTIMIZATION_LEVELS),
                              ("ort_log_level", ORT_LOG_LEVELS), ("compile_mode", COMPILE_MODES)):
            if getattr(self, name) not in allowed:
                raise TrainConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
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
        """Tiny random BERT on 256 reviews, 24 steps: seconds on 2 CPU cores (tests, workshops). Random
        weights, hence the large learning rate; padded batches, so torch.compile compiles once."""
        return cls(**{"model": "tiny", "data": DataConfig.quick(), "max_length": 64, "pad_to_max": True,
                      "batch_size": 16, "max_steps": 24, "lr": 1e-3, "warmup_steps": 2, "eval_every": 8, **overrides})

    @classmethod
    def demo(cls, **overrides) -> "TrainConfig":
        """MiniLM on 2,048 reviews, 120 steps of 16 at 64 tokens, picked from trials on the full test split.
        The whole validation split is scored once, at the end (a 256-review slice gave accuracies too wide
        to compare)."""
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
    """The backend as an enum; TrainConfigError for a config/backend combination that cannot run."""
    backend = parse_choice(Backend, backend, "backend", TrainConfigError)
    if backend is Backend.ORTMODULE and cfg.precision is Precision.BF16 and cfg.device == "cpu":
        raise TrainConfigError(
            "precision 'bf16' with the ortmodule backend on the CPU cannot run: ONNX Runtime's CPU build has no "
            "bf16 MatMul kernel (NOT_IMPLEMENTED: MatMul(13)). Use precision='fp32' with ortmodule, or bf16 with "
            "the eager or compile backend"
        )
    if cfg.optimizer is Optimizer.ORT_FUSED_ADAM and backend is not Backend.ORTMODULE:
        raise TrainConfigError(f"optimizer 'ort_fused_adam' belongs to ONNX Runtime training; "
                               f"with backend {backend.value!r} use 'adamw_fused'")
    if cfg.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise TrainConfigError(f"device {cfg.device!r} requested but torch sees no CUDA device; use device='cpu'")
    if cfg.precision is Precision.BF16 and cfg.device == "cpu":
        import torch

        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            raise TrainConfigError("precision 'bf16' on this CPU is not supported by PyTorch (no AVX-512 BF16/AMX); use 'fp32'")
    return backend


# shared settings whose names are not self-explanatory in a ratio's label
_SETTING_WORDS = {"optimizer": "optimizer", "attn_implementation": "attention", "dropout": "dropout",
                  "precision": "precision", "batch_size": "batch size", "max_length": "sequence length"}


def shared_differences(a: TrainConfig, b: TrainConfig) -> tuple[str, ...]:
    """The shared settings (all but :data:`BACKEND_ONLY_FIELDS`) in which two configs differ. Empty: like for
    like; anything else would credit the backend with a setting the baseline could use too."""
    return tuple(f.name for f in dataclasses.fields(TrainConfig)
                 if f.name not in BACKEND_ONLY_FIELDS and getattr(a, f.name) != getattr(b, f.name))


def settings_text(cfg: TrainConfig) -> str:
    """The shared settings a training ratio's two sides ran with, in words (labels every ratio)."""
    opt = {Optimizer.ADAMW: "AdamW (foreach)", Optimizer.ADAMW_FUSED: "AdamW (fused)",
           Optimizer.ORT_FUSED_ADAM: "ORT FusedAdam"}[cfg.optimizer]
    shape = f"{cfg.examples_per_step}x{cfg.max_length}" + ("" if cfg.pad_to_max else " (padded per batch)")
    return (f"{opt}, {cfg.attn_implementation} attention, dropout {'on' if cfg.dropout else 'off'}, "
            f"{cfg.precision.value}, batch {shape}")


class NotLikeForLike(TrainConfigError):
    """A speed ratio whose two sides differ in a shared setting (not the backend alone)."""


def require_like_for_like(contender: TrainConfig, baseline: TrainConfig, what: str = "this ratio") -> None:
    """Raise :class:`NotLikeForLike` when ``contender`` changes a shared setting ``baseline`` does not run."""
    diff = shared_differences(contender, baseline)
    if diff:
        def val(cfg, k):
            v = getattr(cfg, k)
            return getattr(v, "value", v)

        words = ", ".join(f"{_SETTING_WORDS.get(k, k)} {val(contender, k)} vs {val(baseline, k)}" for k in diff)
        raise NotLikeForLike(f"{what} compares more than the backend: the two sides differ in {words}; "
                             "give the baseline the same settings (only backend knobs such as opset, spinning, "
                             "graph optimization, memory optimizer or compile mode may differ)")
