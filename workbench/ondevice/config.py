"""On-device training: the configuration, its file names and constants, and the errors."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Optional

from ..core.options import parse_choice

ARTIFACTS_DIR = "artifacts"
TRAINED_MODEL_DIR = "trained_model"  # the PyTorch model holding the on-device-trained weights
TRAINED_CHECKPOINT = "trained_checkpoint"
BATCHES_FILE = "batches.npz"
# the batches of every step are held in memory (and saved to BATCHES_FILE): input_ids, attention_mask,
# token_type_ids as int64 per token; a run whose batches would pass MAX_BATCH_BYTES is refused
_BATCH_BYTES_PER_TOKEN = 3 * 8
MAX_BATCH_BYTES = 2 * 2**30
TRAINING_GRAPH = "base_for_training.onnx"
ARTIFACT_FILES = ("training_model.onnx", "eval_model.onnx", "optimizer_model.onnx", "checkpoint")
MAX_IR_VERSION = 10  # the newest IR version onnxruntime 1.19.2 loads
LOSSES = ("CrossEntropyLoss",)
OPTIMIZERS = ("AdamW",)
# On-device vs PyTorch eager loss (fp32, dropout off), benchmarks/bench_ondevice.py: drift 6e-8 (head) to
# 1.2e-7 (last layer; tiny, 20 steps of 8, lr 1e-4 and 1e-3; MiniLM, 10 steps of 8 x 64). Defects: 2x the
# learning rate 8.7e-4 (head) to 3.6e-3 (all) within 20 steps; position embeddings trained on-device
# (POSITION_EMBEDDINGS_NOTE) 5.5e-4. 2e-5 is 170 times the drift and 27 times below the smallest defect.
# torch.optim.AdamW moves the curve by 5e-7 to 2.8e-5 at lr 1e-4, hence ORT's update rule (HFAdamW).
FP32_TOLERANCE = 2e-5
# The inference graph is an FP32 graph of the trained weights: like any FP32 export it matches
# PyTorch holding those weights within ~1e-6 (ExportConfig.strict uses 1e-5).
EXPORT_TOLERANCE = 1e-5


class OnDeviceError(RuntimeError):
    """The stage cannot run with these inputs; the message says what was wrong and what to do."""


class GradientGraphError(OnDeviceError):
    """ONNX Runtime's gradient graph builder could not handle the model; ``detail`` keeps its own first line
    (source file and failed check, without the C++ signature)."""

    def __init__(self, operator: str, fix: str, detail: str, where: str = ""):
        self.operator, self.fix, self.detail, self.where = operator, fix, detail, where
        super().__init__(f"ONNX Runtime's gradient builder cannot differentiate the {operator} operator"
                         f"{f' ({where})' if where else ''}; fix: {fix} (onnxruntime said: {detail})")


class Trainable(str, enum.Enum):
    """Which parameters train on the device; everything else stays frozen in the checkpoint."""

    HEAD = "head"  # the classification head only (parameters outside the base model)
    LAST = "last"  # the last N encoder layers, what follows them (pooler, final norm) and the head
    ALL = "all"  # every parameter


@dataclass(frozen=True)
class OnDeviceConfig:
    """How to train on the device and how to check it (the model is the stage's input)."""

    trainable: Trainable = field(default=Trainable.HEAD, metadata={"help": "head, last (the last N encoder layers + head) or all"})
    last_n_layers: int = field(default=1, metadata={"help": "with --trainable last: how many encoder layers train"})
    loss: str = field(default="CrossEntropyLoss", metadata={"help": "loss in the training graph"})
    optimizer: str = field(default="AdamW", metadata={"help": "optimizer graph"})
    lr: float = field(default=1e-3, metadata={"help": "learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW's weight decay"})
    betas: tuple[float, float] = field(default=(0.9, 0.999), metadata={"help": "AdamW's betas"})
    eps: float = field(default=1e-8, metadata={"help": "AdamW's epsilon"})
    steps: int = field(default=10, metadata={"help": "training steps on each side"})
    batch_size: int = field(default=8, metadata={"help": "examples per step"})
    max_length: int = field(default=64, metadata={"help": "tokens per text"})
    seed: int = field(default=0, metadata={"help": "seed of the data order and the batches"})
    data: str = field(default="reviews", metadata={"help": (
        "'reviews' (built in) or a CSV/TSV/JSONL/Parquet file with text and label columns")})
    max_train: Optional[int] = field(default=256, metadata={"help": "use at most this many training examples"})
    opset: int = field(default=14, metadata={"help": "opset of the training export (ONNX Runtime's gradient builder fails at 17)"})
    tolerance: Optional[float] = field(default=None, metadata={"help": (
        "largest per-step loss difference allowed (default: 2e-5, measured)")})
    validation_examples: int = field(default=32, metadata={"help": "examples the inference graph is validated on"})
    measure_memory: bool = field(default=True, metadata={"help": "measure peak memory, one fresh process per side (--no-memory skips it)"})
    memory_steps: int = field(default=10, metadata={"help": "steps each side runs again in a fresh process to measure its peak memory"})
    threads: Optional[int] = field(default=None, metadata={"help": "intra-op threads of both sides (default: PyTorch's)"})
    train_position_embeddings: bool = field(default=False, metadata={"help": (
        "train the position embeddings too (off: see POSITION_EMBEDDINGS_NOTE)")})
    web: bool = field(default=True, metadata={"help": (
        "write the web page that trains the artifacts in a browser with onnxruntime-web (--no-web skips it)")})

    def __post_init__(self) -> None:
        object.__setattr__(self, "trainable", parse_choice(Trainable, self.trainable, "trainable", OnDeviceError))
        if self.loss not in LOSSES:
            raise OnDeviceError(f"loss must be one of {list(LOSSES)} (a sequence classifier's loss), got {self.loss!r}")
        if self.optimizer not in OPTIMIZERS:
            raise OnDeviceError(f"optimizer must be one of {list(OPTIMIZERS)}, got {self.optimizer!r}; "
                                "ONNX Runtime's artifact builder also has SGD, which this stage does not compare")
        for name, low in (("steps", 1), ("batch_size", 1), ("last_n_layers", 1), ("validation_examples", 1), ("memory_steps", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise OnDeviceError(f"{name} must be an integer of at least {low}, got {value!r}")
        held = self.steps * self.batch_size * self.max_length * _BATCH_BYTES_PER_TOKEN
        if held > MAX_BATCH_BYTES:  # every step's batch is built up front (both sides train on exactly these)
            most = max(1, MAX_BATCH_BYTES // (self.batch_size * self.max_length * _BATCH_BYTES_PER_TOKEN))
            raise OnDeviceError(
                f"steps must be at most {most} with batch_size {self.batch_size} and max_length {self.max_length}, "
                f"got {self.steps}: the batches of every step are built up front and would take "
                f"{held / 2**30:.3g} GiB (at most {MAX_BATCH_BYTES // 2**30} GiB); compare a few hundred steps")
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
        """Head only, 10 steps of 8 reviews (seconds with the tiny model)."""
        return cls(**kw)

    @classmethod
    def default(cls, **kw) -> "OnDeviceConfig":
        """Last encoder layer + head, 20 steps of 16 reviews at lr 1e-4 (MiniLM's settings)."""
        return cls(**{"trainable": Trainable.LAST, "steps": 20, "batch_size": 16, "lr": 1e-4,
                      "max_train": 1024, **kw})

    @property
    def effective_tolerance(self) -> float:
        return self.tolerance if self.tolerance is not None else FP32_TOLERANCE
