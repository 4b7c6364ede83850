"""The export stage's configuration, apart from the export so that validation reads the same defaults
without importing the stage that imports it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from ..core.options import parse_choice
# The TorchScript exporter in torch 2.6 writes opsets 7..20; LayerNormalization is a single op
# from 17 on, SDPA attention needs 14+, and ONNX Runtime 1.19 runs up to opset 21.
OPSET_RANGE = (11, 20)
EXPORTERS = ("auto", "torchscript", "dynamo")


class Attention(str, enum.Enum):
    EAGER = "eager"
    SDPA = "sdpa"


@dataclass(frozen=True)
class ExportConfig:
    """How to export and how strictly to validate. FP32 exports differ from PyTorch by about 1e-6, fused graphs
    by about 1e-5. The tolerance is absolute: an untrained tiny model's logits are about 0.02, where 1e-3 is 5%."""

    opset: int = field(default=17, metadata={"help": "ONNX opset (11-20; 17 writes LayerNormalization as one op)"})
    max_length: int = field(default=128, metadata={"help": "longest sequence in the validation batches"})
    dynamic_axes: bool = field(default=True, metadata={"help": (
        "batch and sequence axes of any size (False: the traced example's shapes only)")})
    attn_implementation: Attention = field(default=Attention.EAGER, metadata={"help": (
        "attention implementation to load the model with (eager: what ONNX Runtime fuses)")})
    validation_split: str = field(default="validation", metadata={"help": "data split to validate on"})
    validation_examples: int = field(default=64, metadata={"help": "how many examples to validate on"})
    validation_batch_size: int = field(default=16, metadata={"help": "examples per validation batch"})
    tolerance: float = field(default=1e-3, metadata={"help": "largest |logit difference| allowed against PyTorch"})
    min_label_agreement: float = field(default=1.0, metadata={"help": "least share of predicted labels that must agree with PyTorch"})
    do_constant_folding: bool = field(default=True, metadata={"help": "fold constant subgraphs while exporting"})
    device: str = field(default="cpu", metadata={"help": (
        "where ONNX Runtime runs the validation: cpu, cuda or cuda:N (CUDA needs onnxruntime-gpu: make setup-gpu-infer)")})
    exporter: str = field(default="auto", metadata={"help": (
        "torch's ONNX exporter: auto (TorchScript while torch ships it: its graphs keep ONNX Runtime's Attention fusion; else "
        "dynamo), torchscript, or dynamo (same logits, no Attention fusion)")})

    def __post_init__(self) -> None:
        from ..runtime.device import normalize_device

        object.__setattr__(self, "device", normalize_device(self.device))
        object.__setattr__(self, "attn_implementation", parse_choice(
            Attention, self.attn_implementation, "attn_implementation", ValueError,
            "use 'eager' (what ONNX Runtime's optimizer fuses)"))
        if self.exporter not in EXPORTERS:
            raise ValueError(f"exporter must be one of {', '.join(EXPORTERS)}, got {self.exporter!r}; 'auto' takes TorchScript "
                             "while torch ships it (its graphs keep ONNX Runtime's fusions), the dynamo exporter after")
        lo, hi = OPSET_RANGE
        if not isinstance(self.opset, int) or not lo <= self.opset <= hi:
            raise ValueError(
                f"opset must be an integer from {lo} to {hi}, got {self.opset!r}; 17 is the default "
                "(LayerNormalization as one op); SDPA attention needs 14 or later"
            )
        if self.max_length < 8 or self.max_length > 4096:
            raise ValueError(f"max_length must be between 8 and 4096 tokens, got {self.max_length}; 128 suits short reviews")
        for name in ("validation_examples", "validation_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not (self.tolerance > 0 and np.isfinite(self.tolerance)):
            raise ValueError(f"tolerance must be a positive number (largest |logit difference|), got {self.tolerance}; try 1e-3")
        if not 0.0 <= self.min_label_agreement <= 1.0:
            raise ValueError(f"min_label_agreement must be a fraction from 0 to 1, got {self.min_label_agreement}")
        if not self.validation_split:
            raise ValueError("validation_split must name a split such as 'validation' or 'test'")

    @classmethod
    def default(cls, **kw) -> "ExportConfig":
        """Opset 17, sequences up to 128 tokens, 64 validation examples, tolerance 1e-3."""
        return cls(**kw)

    @classmethod
    def quick(cls, **kw) -> "ExportConfig":
        """Fewer and shorter validation examples: tests and workshops."""
        return cls(**{"max_length": 64, "validation_examples": 32, **kw})

    @classmethod
    def strict(cls, **kw) -> "ExportConfig":
        """Tolerance 1e-5: what an FP32 export should meet (not a fused or quantized graph)."""
        return cls(**{"tolerance": 1e-5, "validation_examples": 128, **kw})
