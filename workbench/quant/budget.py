"""Accuracy budgets: the shared defaults, the objectives, and whether one candidate's drops fit."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from ..core.options import parse_choice
from .config import QuantizeError
from .evaluate import SliceReport

# accuracy a variant may lose (0.01 = one point) overall and per slice: the one copy every front uses
DEFAULT_BUDGET_OVERALL = 0.01
DEFAULT_BUDGET_PER_SLICE = 0.02
# the speed guard: the least lower end of a variant's speed-up interval over FP32 that counts as a win (0: off)
DEFAULT_MIN_SPEEDUP = 1.05


class Objective(str, enum.Enum):
    """What the search minimises among the candidates within budget."""

    LATENCY = "latency"
    SIZE = "size"


def parse_objective(value) -> Objective:
    return parse_choice(Objective, value, "objective", QuantizeError, "latency picks the fastest, size the smallest")


def _number(value, why: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise QuantizeError(f"{why}, got {value!r}") from None


def check_budget_value(name: str, value: float) -> float:
    """A budget as a fraction of accuracy in [0, 1); one message for every front."""
    why = f"{name} is a fraction of accuracy a variant may lose, from 0 up to 1 (0.02 = 2 points)"
    v = _number(value, why)
    if not 0.0 <= v < 1.0:
        raise QuantizeError(f"{why}, got {value}")
    return v


@dataclass(frozen=True)
class BudgetCheck:
    """Whether one candidate's drops fit the budgets. Drops are positive when accuracy fell."""

    overall_drop: float
    worst_slice: str
    worst_slice_drop: float
    within_overall: bool
    within_slices: bool
    violations: list[str]
    slices_checked: int
    slices_skipped: list[str]  # too small to judge (see workbench.quant.evaluate.MIN_SLICE_SIZE)

    @property
    def feasible(self) -> bool:
        return self.within_overall and self.within_slices


def check_budget(reports: Sequence[SliceReport], budget_overall: float, budget_per_slice: float,
                 include_small_slices: bool = False, strict: bool = False, metric: str = "accuracy") -> BudgetCheck:
    """Do the drops in ``metric`` stay within budget overall (first report) and on every slice? ``strict``:
    the worse end of the 95% interval; slices under the minimum size are skipped unless ``include_small_slices``."""
    if not reports:
        raise QuantizeError("check_budget needs at least one SliceReport")

    def drop(d) -> float:
        m = d.deltas[metric]
        if strict:
            v = m.ci_low if m.higher_is_better else m.ci_high
        else:
            v = m.delta
        return -v if m.higher_is_better else v

    main = reports[0]
    overall = drop(main.overall)
    violations = []
    if overall > budget_overall + 1e-12:
        violations.append(f"overall ({main.set_name}): -{overall:.2%} > budget {budget_overall:.2%}")
    worst, worst_drop, checked, skipped = "", 0.0, 0, []
    for rep in reports:
        pool = list(rep.slices) + ([rep.overall] if rep is not main else [])
        for d in pool:
            label = f"{rep.set_name}:{d.slice}"
            if d.n == 0:
                continue
            if d.too_small and not include_small_slices:
                skipped.append(label)
                continue
            checked += 1
            v = drop(d)
            if v > worst_drop or not worst:
                worst, worst_drop = label, v
            if v > budget_per_slice + 1e-12:
                violations.append(f"slice {label} (n={d.n}): -{v:.2%} > budget {budget_per_slice:.2%}")
    return BudgetCheck(overall, worst, worst_drop, overall <= budget_overall + 1e-12,
                       not any(v.startswith("slice") for v in violations), violations, checked, skipped)


def check_min_speedup(value, name: str = "min_speedup") -> float:
    """The speed guard as a ratio >= 0 (1.05: at least 5% faster than FP32; 0: off); one message for every front."""
    import math

    v = _number(value, f"{name} is a speed-up over the FP32 graph (1.05 = at least 5% faster; 0 turns the guard off)")
    if not math.isfinite(v) or v < 0 or v > 100:
        raise QuantizeError(f"{name} is a speed-up over the FP32 graph between 0 (off) and 100, got {value}; 1.05 is the default")
    return v


def speed_guard(result, min_speedup: float) -> tuple[bool, str]:
    """(fast enough, why not), judged on the lower end of the speed-up's interval (older results: the point estimate)."""
    if min_speedup <= 0:
        return True, ""
    ratio = getattr(result, "speedup_ratio", None)
    if ratio is not None:
        if ratio.lo >= min_speedup:
            return True, ""
        return False, (f"{ratio.text()} the speed of the FP32 graph: the interval's lower end {ratio.lo:.2f}x is under "
                       f"the {min_speedup:.2f}x speed guard")
    speedup = getattr(result, "speedup", float("nan"))
    if speedup == speedup and speedup >= min_speedup:
        return True, ""
    return False, f"{speedup:.2f}x the speed of the FP32 graph (no interval: an older result), under the {min_speedup:.2f}x speed guard"
