"""The audit's configuration, its presets and file names, and the input error (exit code 2); its
stages are the stage registry's audit route (``workbench.workflows.stages.AUDIT_STAGES``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..graph import ExportConfig
from ..graph import FusionConfig
from ..quant import (DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE, DEFAULT_EVAL_BATCH_SIZE, DEFAULT_MIN_SPEEDUP, DEFAULT_N_BOOT,
                     QuantConfig, QuantizeError, TimingConfig, check_min_speedup)

Log = Callable[[str], None]
from ..runs.layout import AUDIT_FILE  # noqa: E402, F401  (the run layout names every file)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
DEFAULT_PRESETS = ("dynamic", "dynamic-per-channel", "static")
# The environment checks an audit depends on (training pieces such as ORTModule's extensions are not).
AUDIT_NEEDS = ("python", "torch", "transformers", "onnxruntime", "execution providers", "ort transformer optimizer", "onnx exporter")


class AuditInputError(ValueError):
    """Input an audit cannot use (exit code 2); the message says what was given and what to do."""


@dataclass(frozen=True)
class AuditConfig:
    """How to audit a model (the model folder is the stage's input: ``run_audit(model, cfg, out)``).
    ``data`` is the labelled file every row of which is scored. ``budget_overall``/``budget_slice`` are fractions of accuracy
    (0.01 = one point) a quantized variant may lose overall / on any slice big enough to judge
    (a negative budget demands an improvement). ``min_speedup`` is the speed guard: a variant must be at least
    this many times faster than the FP32 graph at the lower end of its interval to meet the budget (0: off).
    ``quick`` times less and bootstraps less."""

    data: str = field(metadata={"help": "CSV, TSV, JSONL or Parquet file with a text and a label column"})
    text_column: str = field(default="text", metadata={"help": "column holding the texts"})
    label_column: str = field(default="label", metadata={"help": "column holding the labels: the model's class names or ids"})
    slice_columns: tuple[str, ...] = field(default=(), metadata={"help": "column(s) to slice by, one slice per value (repeatable)"})
    presets: tuple[str, ...] = field(default=DEFAULT_PRESETS, metadata={"help": "quantization presets"})
    budget_overall: float = field(default=DEFAULT_BUDGET_OVERALL, metadata={"help": "accuracy a variant may lose overall (0.01 = 1 point)"})
    budget_slice: float = field(default=DEFAULT_BUDGET_PER_SLICE, metadata={"help": "accuracy a variant may lose on any slice of 50+ rows"})
    include_small_slices: bool = field(default=False, metadata={"help": "hold slices under 50 rows to the budget too"})
    min_speedup: float = field(default=DEFAULT_MIN_SPEEDUP, metadata={"help": (
        "speed guard: the least speed-up over FP32 (lower end of its interval) a variant needs; 0 = off")})
    quick: bool = field(default=False, metadata={"help": "short timings, 200 bootstrap replicates (a smoke run)"})
    calibration_size: int = field(default=128, metadata={"help": (
        "most rows held out to calibrate static presets (and at most a fifth of the file)")})
    calibration_fraction: float = field(default=0.2, metadata={"help": (
        "most share of the file held out to calibrate static presets (at most 0.5)")})
    seed: int = field(default=0, metadata={"help": "seed of the calibration draw and the bootstrap"})
    n_boot: int = field(default=DEFAULT_N_BOOT, metadata={"help": "bootstrap replicates (--quick: 200)"})
    eval_batch_size: int = field(default=DEFAULT_EVAL_BATCH_SIZE, metadata={"help": "rows per batch when scoring"})
    max_length: int = field(default=128, metadata={"help": "tokens per text (longer texts are truncated)"})
    node_error_samples: int = field(default=16, metadata={"help": "calibration rows fed to both graphs for per-node SQNR (0: skip)"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "slice_columns", tuple(self.slice_columns))
        object.__setattr__(self, "presets", tuple(self.presets))
        known = QuantConfig.available_presets() if "weight-only-int8" in self.presets else QuantConfig.presets()
        for p in self.presets:
            try:
                QuantConfig.preset(p)  # a preset asked for that onnxruntime 1.19.2 cannot build: its reason
            except QuantizeError as exc:
                if p in known or "no quantization preset" not in str(exc):
                    raise AuditInputError(f"--presets {p}: {exc}") from None
        bad = [p for p in self.presets if p not in known]
        if bad or not self.presets:
            raise AuditInputError(f"unknown quantization preset(s) {bad or '(none given)'}; presets: {list(known)}")
        for name in ("budget_overall", "budget_slice"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not -1.0 <= v <= 1.0:
                raise AuditInputError(f"{name} (--{name.replace('_', '-')}) is a fraction of accuracy between -1 and 1 "
                                      f"(0.01 = one point), got {v!r}")
        try:
            object.__setattr__(self, "min_speedup", check_min_speedup(self.min_speedup, "min_speedup (--min-speedup)"))
        except QuantizeError as exc:
            raise AuditInputError(str(exc)) from None
        if not 8 <= self.calibration_size <= 100_000:
            raise AuditInputError(f"calibration_size must be from 8 to 100000 rows, got {self.calibration_size}")
        if not 0.0 < self.calibration_fraction <= 0.5:
            raise AuditInputError(f"calibration_fraction must be in (0, 0.5], got {self.calibration_fraction}")
        for name in ("n_boot", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise AuditInputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 8 <= self.max_length <= 4096:
            raise AuditInputError(f"max_length must be from 8 to 4096 tokens, got {self.max_length}")

    @property
    def static_presets(self) -> list[str]:
        return [p for p in self.presets if QuantConfig.preset(p).mode.value == "static"]

    def export_config(self) -> ExportConfig:
        return ExportConfig(max_length=self.max_length, validation_split="test",
                            validation_examples=32 if self.quick else 64)

    def fusion_config(self) -> FusionConfig:
        if self.quick:
            return FusionConfig.quick(variants=("unoptimized", "ort_all", "transformer"))
        return FusionConfig(variants=("unoptimized", "ort_all", "transformer"), shapes=((1, self.max_length), (8, self.max_length)))

    def timing(self) -> TimingConfig:
        return TimingConfig.quick() if self.quick else TimingConfig(shapes=((1, self.max_length),))
