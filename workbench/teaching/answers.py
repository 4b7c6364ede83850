"""The instructor's answer key (no notebook imports it): answers differ from laptop to laptop, so each exercise's
key reads the answer off the learner's results, e.g. ``answer("00_tour", wb.quant.result)`` after its last cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional

from . import exercises as ex


def size_ratio(quant_result: Any) -> float:
    """00: the FP32 graph's size over the INT8 graph's (the Quantize step's results table)."""
    return quant_result.fp32_size_mib / quant_result.size_mib


def startup_in_steps(run: Any) -> float:
    """01: ORTModule's start-up (its first step: export and graph build) over its median step."""
    return run.startup_s / run.median_step_s


def fastest_backend(comparison: Any) -> str:
    """02: the backend with the most samples per second after start-up, among those that trained."""
    ok = [r for r in comparison.runs if r.ok and not math.isnan(r.median_step_s)]
    return max(ok, key=lambda r: r.samples_per_s).backend.value


def fusions_per_layer(report: Any) -> dict[str, float]:
    """03: each fused operator's count over the number of encoder layers."""
    return {op: report.fused_op_counts.get(op, 0) / report.num_layers for op in ex.FUSED_PER_LAYER_OPS}


def preset_within_budget(results: Iterable[Any] | Mapping[str, Any], budget: float = 0.01,
                         min_speedup: Optional[float] = None, profile: Any = None) -> Optional[str]:
    """04: of those timed on a quiet machine within ``budget``, the highest speed-up lower end reaching the goal."""
    min_speedup, _ = ex.speed_goal(min_speedup, profile)
    pool = list(results.values()) if isinstance(results, Mapping) else list(results or [])
    fits = [r for r in pool if r.report.max_slice_drop() <= budget and r.accuracy_delta >= -budget
            and ex.lower_end(r) >= min_speedup and not getattr(r, "contended", False)]
    return max(fits, key=ex.lower_end).name if fits else None


def most_hurt_class(quant_result: Any) -> str:
    """05: the class (true label) whose accuracy changes most downwards under INT8."""
    classes = [d for d in quant_result.report.slices if d.slice.startswith("class:") and d.n > 0]
    return min(classes, key=lambda d: d.delta).slice.split(":", 1)[1]


def trainable_fraction(result: Any) -> float:
    """06: trainable parameters over all parameters (the on-device panel's first table)."""
    return result.artifacts.trainable_parameters / result.artifacts.total_parameters


def most_ndcg_kept(result: Any) -> str:
    """07: the scored variant with the largest NDCG@10 as a share of the FP32 graph's."""
    scored = [v for v in result.evaluation.variants if getattr(v, "retrieval", None) is not None]
    return max(scored, key=lambda v: v.retrieval.ndcg_ratio).name


@dataclass(frozen=True)
class Exercise:
    """One notebook's exercise: what the learner sets, how the key finds it, the check it must pass."""

    notebook: str
    variable: str
    key: Callable[..., Any]
    check: Callable[..., ex.Verdict]
    results: str  # what the notebook's check cell passes as results
    how: str  # the way there, in words (what to tell a learner who is stuck)


KEY: dict[str, Exercise] = {e.notebook: e for e in (
    Exercise("00_tour", "SIZE_RATIO", size_ratio, ex.check_size_ratio, "wb.quant.result",
             "FP32 size / INT8 size from the Quantize step's table: below 4, because the embeddings stay FP32."),
    Exercise("01_finetune_ortmodule", "STARTUP_STEPS", startup_in_steps, ex.check_startup_in_steps, "run",
             "start-up (first step) / median step from the run table: the export and graph build, paid once."),
    Exercise("02_eager_vs_ortmodule", "FASTEST", fastest_backend, ex.check_fastest_backend, "comparison",
             "the highest samples per second after start-up (ratios above 1x beat the baseline); not the start-up."),
    Exercise("03_export_and_fusion", "PER_LAYER", fusions_per_layer, ex.check_fusions_per_layer, "report",
             "fused counts / encoder layers: a BERT layer fuses to 1 Attention, 2 SkipLayerNormalization, 1 BiasGelu."),
    Exercise("04_quantization_drift", "BETTER_PRESET", preset_within_budget, ex.check_preset_within_budget,
             "quant.results",
             "a result whose every slice moved by at most 1 point and whose speed-up's lower end reaches the goal "
             "printed above; a plain dynamic preset often misses a slice: Re-quantize with the worst nodes in FP32."),
    Exercise("05_audit_your_own_model", "MOST_HURT_CLASS", most_hurt_class, ex.check_most_hurt_class, "result",
             "the class:... slice with the most negative accuracy change in the slice chart."),
    Exercise("06_on_device_training", "FRACTION", trainable_fraction, ex.check_trainable_fraction, "result",
             "trainable parameters / all parameters from the panel's first table."),
    Exercise("07_quantize_embedding_model", "KEPT_MOST", most_ndcg_kept, ex.check_most_ndcg_kept, "result",
             "the variant with the largest NDCG@10 share of FP32 in the retrieval table (not the fastest)."),
)}


def _short(value: Any) -> Any:
    """3 significant digits: well inside every check's tolerance."""
    return float(f"{value:.3g}") if isinstance(value, float) else value


def answer(notebook: str, results: Any, **kw: Any) -> str:
    """The line to put in ``notebook``'s exercise cell for ``results`` (what its check cell passes), and how."""
    exercise = KEY.get(notebook)
    if exercise is None:
        raise KeyError(f"{notebook!r} has no exercise; notebooks with one: {', '.join(KEY)}")
    value = exercise.key(results, **kw)
    if value is None:
        return f"{exercise.variable}: none of the results run so far fits yet. Way there: {exercise.how}"
    shown = {k: _short(v) for k, v in value.items()} if isinstance(value, dict) else _short(value)
    return f"{exercise.variable} = {shown!r}  # {exercise.how}"
