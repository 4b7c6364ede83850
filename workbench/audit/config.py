"""The audit's configuration, its presets and file names, and the input error (exit code 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..graph import ExportConfig, FusionConfig
from ..quant import (DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE, DEFAULT_EVAL_BATCH_SIZE, DEFAULT_MIN_SPEEDUP,
                     DEFAULT_N_BOOT, BaselineConfig, EvalConfig, QuantConfig, QuantizeError, SearchConfig, TimingConfig)
from ..quant.config import available_presets
from ..runtime.engine import EngineConfig

Log = Callable[[str], None]
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
DEFAULT_PRESETS = ("dynamic", "dynamic-per-channel", "static")
# The environment checks an audit depends on (training pieces such as ORTModule's extensions are not).
AUDIT_NEEDS = ("python", "torch", "transformers", "onnxruntime", "execution providers", "ort transformer optimizer", "onnx exporter")


class AuditInputError(ValueError):
    """Input an audit cannot use (exit code 2); the message says what was given and what to do."""


# the stages' field names that the audit's config names otherwise
_AUDIT_NAMES = {"batch_size": "eval_batch_size", "budget_per_slice": "budget_slice"}


def _audit_words(message: str) -> str:
    """A stage's message with its leading field named as the audit's config names it (the CLI then puts in the flag)."""
    found = re.match(r"([a-z_]+)( .*)", message, re.S)
    return _AUDIT_NAMES.get(found[1], found[1]) + found[2] if found is not None else message


@dataclass(frozen=True)
class AuditConfig:
    """The stages' configs are built from it here, so every value one of them would refuse is refused when the config
    is made, before anything runs (:class:`AuditInputError`, one line naming the field and its flag)."""

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
    fusion: Optional[str] = field(default=None, metadata={"help": (
        "which fused graph is quantized: timed (the full fusion, or one with a fusion family left out where that is "
        "measurably faster on this machine) or full (every fusion); default timed, full with --quick")})
    engine: str = field(default="local", metadata={"help": (
        "where the rows are scored with each graph: local (this process) or ray (a pool of Ray actors; the [scale] extra)")})
    ray_address: Optional[str] = field(default=None, metadata={"help": (
        "engine ray: the cluster to connect to (default: $RAY_ADDRESS, else a local Ray instance on 127.0.0.1 for the run)")})
    ray_actors: Optional[int] = field(default=None, metadata={"help": (
        "engine ray: actors scoring at once, each with the graph open (default: Ray's CPUs / ray_threads)")})
    ray_threads: int = field(default=1, metadata={"help": "engine ray: ONNX Runtime threads (and Ray CPUs) of each actor"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "slice_columns", tuple(self.slice_columns))
        object.__setattr__(self, "presets", tuple(self.presets))
        if not self.presets:
            raise AuditInputError(f"no quantization preset given; presets: {list(available_presets())}")
        for p in self.presets:
            try:
                QuantConfig.preset(p)  # an unknown name, or a preset onnxruntime 1.19.2 cannot build: its reason
            except QuantizeError as exc:
                raise AuditInputError(f"--presets {p}: {exc}") from None
        if not 8 <= self.calibration_size <= 100_000:
            raise AuditInputError(f"calibration_size must be from 8 to 100000 rows, got {self.calibration_size}")
        if not 0.0 < self.calibration_fraction <= 0.5:
            raise AuditInputError(f"calibration_fraction must be in (0, 0.5], got {self.calibration_fraction}")
        if not isinstance(self.max_length, int) or not 8 <= self.max_length <= 4096:
            raise AuditInputError(f"max_length must be from 8 to 4096 tokens, got {self.max_length!r}")
        try:  # what a stage would refuse after the export and the fusion, refused now by its own rules, in the audit's words
            self.engine_config()
            self.fusion_config()
            self.eval_config()
            self.baseline_config(0, self.timing())
            search = self.search_config()
        except ValueError as exc:  # EngineError, QuantizeError and EvaluationError are ValueErrors
            raise AuditInputError(_audit_words(str(exc))) from None
        for name, value in (("budget_overall", search.budget_overall), ("budget_slice", search.budget_per_slice),
                            ("min_speedup", search.min_speedup)):
            object.__setattr__(self, name, value)

    def engine_config(self) -> EngineConfig:
        """Where the rows are scored (:func:`workbench.runtime.engine.scoring_engine`)."""
        return EngineConfig(self.engine, self.ray_address, self.ray_actors, self.ray_threads)

    def eval_config(self, node_error_samples: Optional[int] = None) -> EvalConfig:
        """The quantize stage's scoring: the audit's bootstrap, seed and per-node error texts."""
        return EvalConfig(n_boot=self.n_boot, seed=self.seed,
                          node_error_samples=self.node_error_samples if node_error_samples is None else node_error_samples)

    def baseline_config(self, calibration_samples: int, timing: TimingConfig) -> BaselineConfig:
        """The FP32 baseline the variants are scored against: every row scored once, in ``eval_batch_size`` batches."""
        return BaselineConfig(golden=False, calibration_samples=calibration_samples, timing=timing,
                              batch_size=self.eval_batch_size, max_length=self.max_length)

    def search_config(self) -> SearchConfig:
        """The search over the audit's variants: its budgets and speed guard (the variants are already quantized)."""
        return SearchConfig(candidates=(), budget_overall=self.budget_overall, budget_per_slice=self.budget_slice,
                            include_small_slices=self.include_small_slices, min_speedup=self.min_speedup)

    @property
    def static_presets(self) -> list[str]:
        return [p for p in self.presets if QuantConfig.preset(p).mode.value == "static"]

    def export_config(self) -> ExportConfig:
        return ExportConfig(max_length=self.max_length, validation_split="test",
                            validation_examples=32 if self.quick else 64)

    def fusion_config(self) -> FusionConfig:
        chosen = {"fusion": self.fusion} if self.fusion is not None else {}
        if self.quick:
            return FusionConfig.quick(variants=("unoptimized", "ort_all", "transformer"), **chosen)
        return FusionConfig(variants=("unoptimized", "ort_all", "transformer"), shapes=((1, self.max_length), (8, self.max_length)),
                            **chosen)

    def timing(self) -> TimingConfig:
        return TimingConfig.quick() if self.quick else TimingConfig(shapes=((1, self.max_length),))
