"""The variants fusion builds, and how to build and time them: :class:`Variant`, :class:`FusionConfig`.

================  ==================================================================  ===========================
variant           graph                                                               session level when it runs
================  ==================================================================  ===========================
unoptimized       the exported graph                                                  ``disabled``
ort_basic         ONNX Runtime's basic level (constant folding, redundant nodes)      ``basic``
ort_extended      + ONNX Runtime's fusions (FusedMatMul, BiasGelu)                    ``extended``
ort_all           + layout optimizations                                              ``all``
transformer       ``onnxruntime.transformers.optimizer`` (the BERT fusions)           ``cfg.transformer_session``
transformer_fp16  the transformer graph in float16 (inputs and outputs kept float32)  ``cfg.transformer_session``
================  ==================================================================  ===========================

The transformer session level is ``all`` by default (what a deployment gets); file names: :func:`variant_file`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional

from ..models.architectures import ARCHITECTURES
from ..core.options import parse_choice
from ..runtime.ortinfer import GRAPH_OPTIMIZATION_LEVELS, check_shapes

from ..runs.layout import FUSED_GRAPH as FUSED_FILE  # noqa: E402, F401  (the run layout names every file)
FUSED_FP16_FILE = "model_fused_fp16.onnx"
FUSION_MODES = ("timed", "full")  # FusionConfig.fusion: the timed choice (workbench.graph.candidates) or every fusion


class FusionError(RuntimeError):
    """A variant could not be built; the message names the variant and what to do."""


def transformers_optimizer(error: type[Exception]):
    """``onnxruntime.transformers.optimizer``, or ``error`` saying what it needs beside the training wheel."""
    try:
        from onnxruntime.transformers import fusion_options, optimizer
    except ImportError as exc:
        raise error(f"onnxruntime.transformers.optimizer cannot be imported ({exc}); it needs 'coloredlogs' and "
                    "'sympy' next to the onnxruntime-training wheel: run `make setup`") from exc
    return optimizer.optimize_model, fusion_options.FusionOptions


class Variant(str, enum.Enum):
    UNOPTIMIZED = "unoptimized"
    ORT_BASIC = "ort_basic"
    ORT_EXTENDED = "ort_extended"
    ORT_ALL = "ort_all"
    TRANSFORMER = "transformer"
    TRANSFORMER_FP16 = "transformer_fp16"  # the fused graph in float16 (FusionConfig.fp16; inputs/outputs kept float32)


# Session graph-optimization level each ONNX Runtime variant stands for.
ORT_LEVEL = {Variant.ORT_BASIC: "basic", Variant.ORT_EXTENDED: "extended", Variant.ORT_ALL: "all"}
# The FP32 variants; the FP16 one is built when FusionConfig.fp16 asks for it (it needs the transformer variant).
ALL_VARIANTS = tuple(v for v in Variant if v is not Variant.TRANSFORMER_FP16)


def to_variant(v) -> Variant:
    return parse_choice(Variant, v, "variant", ValueError, "e.g. FusionConfig(variants=('unoptimized', 'transformer'))")


def variant_file(variant: Variant) -> Optional[str]:
    """The file a variant's graph is written to in the fusion folder (None: the exported file itself)."""
    variant = to_variant(variant)
    if variant is Variant.UNOPTIMIZED:
        return None
    return {Variant.TRANSFORMER: FUSED_FILE, Variant.TRANSFORMER_FP16: FUSED_FP16_FILE}.get(variant) or \
        f"model_ort_{ORT_LEVEL[variant]}.onnx"


OPTIMIZER_MODEL_TYPES = ("bert", "bart", "gpt2", "t5", "unet", "vae", "clip")
def optimizer_model_type(architecture: str) -> str:
    """The optimizer's ``model_type`` that ``"auto"`` picks (``Architecture.optimizer_model_type`` says why "bert")."""
    return next((a.optimizer_model_type for a in ARCHITECTURES.values() if a.model_type == architecture), "bert")


@dataclass(frozen=True)
class FusionConfig:
    """Which variants to build and how to time them; fused kernels reorder float sums (about 1e-5 on MiniLM)."""

    variants: tuple[Variant, ...] = field(default=ALL_VARIANTS, metadata={"help": (
        "comma-separated variants to build (unoptimized, the baseline, is always built)")})
    shapes: tuple[tuple[int, int], ...] = field(default=((1, 32), (1, 128), (8, 128)), metadata={"help": (
        "BATCHxSEQ,... to time, e.g. 1x32,1x128,8x128")})
    warmup: int = field(default=3, metadata={"help": "untimed runs per shape"})
    repeats: int = field(default=20, metadata={"help": "timed runs per shape"})
    max_seconds_per_shape: Optional[float] = field(default=20.0, metadata={"help": (
        "stop timing a shape after this many seconds even if fewer repeats ran (None: no limit)")})
    retimes: int = field(default=1, metadata={"help": (
        "times a timing found taken on a busy machine is taken again, each after waiting up to 10 s for the machine to "
        "calm down (--quick: 0)")})
    threads: Optional[int] = field(default=None, metadata={"help": (
        "intra-op threads for ONNX Runtime and PyTorch (default: each runtime's own)")})
    measure_latency: bool = field(default=True, metadata={"help": (
        "time the variants and PyTorch (--no-latency: build, validate and diff only)")})
    time_pytorch: bool = field(default=True, metadata={"help": "time PyTorch beside the variants"})
    transformer_session: str = field(default="all", metadata={"help": "session level the transformer-optimized graph runs with"})
    model_type: str = field(default="auto", metadata={"help": (
        "model_type passed to the transformer optimizer (auto: the type of the exported architecture)")})
    opt_level: int = field(default=1, metadata={"help": "transformer optimizer opt_level"})
    fusion: str = field(default="timed", metadata={"help": (
        "which fused graph later stages take: timed (the full fusion, or the full fusion with one fusion family left out "
        "when that is measurably faster here: workbench.graph.candidates) or full (every fusion, as the optimizer makes it)")})
    num_heads: int = field(default=0, metadata={"help": "attention heads (0: from the export)"})
    hidden_size: int = field(default=0, metadata={"help": "hidden size (0: from the export)"})
    tolerance: Optional[float] = field(default=None, metadata={"help": (
        "largest |logit difference| allowed (default: the export's validation tolerance)")})
    validation_examples: Optional[int] = field(default=None, metadata={"help": (
        "examples each variant is validated on (default: the export's)")})
    match_by_value: bool = field(default=True, metadata={"help": (
        "trace renamed fused nodes back to the original graph by comparing their output values")})
    device: str = field(default="cpu", metadata={"help": (
        "where the variants run and are timed: cpu, cuda or cuda:N (CUDA needs onnxruntime-gpu: make setup-gpu-infer)")})
    fp16: bool = field(default=False, metadata={"help": (
        "also build the fused graph in float16 (inputs/outputs float32), validated against FP32 with FP16's tolerance")})
    cuda_graph: bool = field(default=False, metadata={"help": (
        "CUDA only: also time each variant as a CUDA graph where ONNX Runtime accepts it, and say why where it refuses")})
    time_pytorch_peers: bool = field(default=True, metadata={"help": (
        "CUDA only: also time PyTorch's SDPA and torch.compile FP16 peers beside eager FP32")})

    def __post_init__(self) -> None:
        from ..runtime.device import normalize_device

        device = normalize_device(self.device)
        if self.cuda_graph and device == "cpu":
            raise ValueError("cuda_graph=True needs device='cuda' (CUDA graphs are a CUDA-provider feature); "
                             "use FusionConfig.gpu() on a machine with a GPU")
        variants = tuple(to_variant(v) for v in self.variants)
        fp16 = bool(self.fp16) or Variant.TRANSFORMER_FP16 in variants
        if fp16:
            variants = (*variants, Variant.TRANSFORMER, Variant.TRANSFORMER_FP16)
        if not variants:
            raise ValueError("variants must name at least one variant, e.g. ('unoptimized', 'transformer')")
        # the unoptimized graph is always built: the baseline every diff is taken against
        variants = tuple(v for v in Variant if v in variants or v is Variant.UNOPTIMIZED)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "fp16", fp16)
        object.__setattr__(self, "variants", variants)
        object.__setattr__(self, "shapes", check_shapes(self.shapes))
        if self.warmup < 0 or self.repeats < 1:
            raise ValueError(f"warmup must be >= 0 and repeats >= 1, got warmup={self.warmup}, repeats={self.repeats}")
        if isinstance(self.retimes, bool) or not isinstance(self.retimes, int) or self.retimes < 0:
            raise ValueError(f"retimes must be 0 (take each timing once) or more, got {self.retimes!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be a positive number, got {self.threads}; leave it unset for ONNX Runtime's default (one per "
                             f"core)")
        choices = (("transformer_session", GRAPH_OPTIMIZATION_LEVELS,
                    "'all' is what a deployment runs, 'disabled' shows the optimizer's fusions alone"),
                   ("model_type", ("auto", *OPTIMIZER_MODEL_TYPES),
                    "'auto' (the default) picks 'bert', which covers BERT, RoBERTa, DistilBERT, MiniLM and the other encoders"),
                   ("fusion", FUSION_MODES, "'timed' takes the fastest validated fusion on this machine, 'full' keeps every fusion"),
                   ("opt_level", (0, 1, 2, 99), "1 is the default for BERT"))
        for name, allowed, hint in choices:
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}; {hint}")
        if self.num_heads < 0 or self.hidden_size < 0:
            raise ValueError("num_heads and hidden_size must be >= 0 (0: detect)")
        if self.tolerance is not None and not self.tolerance > 0:
            raise ValueError(f"tolerance must be a positive number, got {self.tolerance}; leave it unset for the default per precision")
        if self.validation_examples is not None and self.validation_examples < 1:
            raise ValueError(f"validation_examples must be at least 1, got {self.validation_examples}; leave it unset for the default")

    @classmethod
    def default(cls, **kw) -> "FusionConfig":
        return cls(**kw)

    @classmethod
    def quick(cls, **kw) -> "FusionConfig":
        """Tests and workshops: small shapes, few runs, one thread, and the full fusion (so few runs cannot choose between fusions)."""
        return cls(**{"shapes": ((1, 16), (2, 32)), "warmup": 1, "repeats": 3, "threads": 1,
                      "max_seconds_per_shape": 5.0, "retimes": 0, "fusion": "full", **kw})

    @classmethod
    def gpu(cls, **kw) -> "FusionConfig":
        """The GPU comparison: fused and FP16 graphs with I/O binding and CUDA graphs, beside PyTorch's SDPA and compiled peers."""
        return cls(**{"variants": (Variant.UNOPTIMIZED, Variant.TRANSFORMER, Variant.TRANSFORMER_FP16),
                      "shapes": ((1, 128), (32, 128)), "warmup": 10, "repeats": 100, "device": "cuda", "fp16": True,
                      "cuda_graph": True, **kw})

    @classmethod
    def inspect_only(cls, **kw) -> "FusionConfig":
        """Build, diff and validate every variant; time nothing."""
        return cls(**{"measure_latency": False, "time_pytorch": False, **kw})

    @classmethod
    def transformer_only(cls, **kw) -> "FusionConfig":
        """Just the transformer optimizer against the unoptimized graph (what quantization needs)."""
        return cls(**{"variants": (Variant.UNOPTIMIZED, Variant.TRANSFORMER), **kw})
