"""Choosing among candidates already judged, the same for every task, and the message in the task's terms."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from .budget import BudgetCheck, Objective, parse_objective, speed_guard
from .config import QuantConfig
from .run import RESULT_FILE, QuantResult


@dataclass(frozen=True)
class SearchCandidate:
    name: str
    graph: str  # which FP32 graph it came from (key of the graphs searched)
    precision: str  # "fp32" or "int8"
    config: Optional[QuantConfig]
    onnx_path: Path
    result_path: Optional[Path]
    latency_ms: float
    size_mib: float
    accuracy: float
    accuracy_delta: float
    check: BudgetCheck
    reused: bool = False  # an earlier run's result with the same config and baseline, not re-quantized
    # the speed-up over FP32 from paired rounds, with its interval (None: older results)
    speedup: Optional[float] = None
    speedup_lo: Optional[float] = None
    speedup_hi: Optional[float] = None
    fast_enough: bool = True  # past the speed guard (SearchConfig.min_speedup)
    too_slow: str = ""  # why not, in words
    contended: bool = False  # its speed was measured while something else used the CPU
    floor_ms: Optional[float] = None
    of_floor: Optional[float] = None

    @property
    def feasible(self) -> bool:
        """Within both accuracy budgets and past the speed guard."""
        return self.check.feasible and self.fast_enough


@dataclass(frozen=True)
class Scored:
    """A quantized variant no :class:`~workbench.quant.run.QuantResult` holds (an embedding model's); not timed."""

    config: Optional[QuantConfig]
    quantized_path: Path
    size_mib: float
    accuracy: float
    accuracy_delta: float
    latency_ms: float = float("nan")
    speedup_ratio: Any = None  # a workbench.core.latency.Ratio
    contended: bool = False
    out_dir: Optional[Path] = None  # no result file
    latency: tuple = ()

    @property
    def speedup(self) -> float:
        return self.speedup_ratio.value if self.speedup_ratio is not None else float("nan")


def int8_candidate(name: str, graph: str, res: Union[QuantResult, Scored], check: BudgetCheck, min_speedup: float,
                   reused: bool = False) -> SearchCandidate:
    """A quantized variant as a candidate: feasible when its metric passes ``check`` and its speed the guard."""
    fast, why = speed_guard(res, min_speedup)
    ratio = res.speedup_ratio
    lat = res.latency[0] if res.latency else None
    return SearchCandidate(
        name=name, graph=graph, precision="int8", config=res.config, onnx_path=Path(res.quantized_path),
        result_path=(Path(res.out_dir) / RESULT_FILE) if res.out_dir is not None else None, latency_ms=res.latency_ms,
        size_mib=res.size_mib, accuracy=res.accuracy, accuracy_delta=res.accuracy_delta, check=check, reused=reused,
        speedup=res.speedup if res.speedup == res.speedup else None, speedup_lo=ratio.lo if ratio else None,
        speedup_hi=ratio.hi if ratio else None, fast_enough=fast, too_slow=why,
        contended=res.contended, floor_ms=lat.floor_ms if lat else None, of_floor=lat.of_floor if lat else None)


def left_all_in_fp32(candidate) -> bool:
    """Whether a candidate (or its saved dict) is a quantization that left every quantized node in FP32."""
    get = candidate.get if isinstance(candidate, dict) else (lambda key: getattr(candidate, key))
    return get("precision") == "fp32" and get("config") is not None


@dataclass(frozen=True)
class SearchTerms:
    """How the search speaks of a task's metric and budget: ``budget`` in words (after "no INT8 variant is"),
    ``advice`` when nothing fits, formats, ``of_fp32`` (values as a share of FP32's too), ``all_fp32`` (what a
    quantization that left every node in FP32 is)."""

    metric: str = "accuracy"
    budget: str = ""
    advice: str = "raise a budget or try per-channel, static calibration or excluding the worst nodes"
    value: str = ".1%"
    drop: str = "+.2%"
    of_fp32: bool = False
    all_fp32: str = ""

    @classmethod
    def accuracy(cls, budget_overall: float, budget_per_slice: float) -> "SearchTerms":
        return cls(budget=f"within {budget_overall:.1%} overall and {budget_per_slice:.1%} per slice")

    def figures(self, c: SearchCandidate) -> str:
        """``c``'s metric and its change: "accuracy 91.2% (-0.40%)", "NDCG@10 0.8123 (99.60% of FP32's)"."""
        fp32 = c.accuracy - c.accuracy_delta
        change = f"{c.accuracy / max(fp32, 1e-12):.2%} of FP32's" if self.of_fp32 else f"{-c.check.overall_drop:{self.drop}}"
        return f"{self.metric} {c.accuracy:{self.value}} ({change})"


BUSY = "; the speed of "  # where a message starts to say which speeds were taken under load


def _ratio_words(c: SearchCandidate) -> str:
    if c.contended:  # never stated as measured: the message says why at its end
        return "speed not measured (timed while other work used the CPU)"
    return (f"{c.speedup:.2f}x the FP32 graph ({c.speedup_lo:.2f}-{c.speedup_hi:.2f})" if c.speedup_lo is not None
            else f"{c.latency_ms:.2f} ms")


def choice_message(found: Sequence[SearchCandidate], best: Optional[SearchCandidate], terms: SearchTerms, min_speedup: float,
                   notes: Sequence[str] = ()) -> str:
    """What the search chose and why, or why nothing was, in the task's terms: accuracy first, then the speed guard."""
    int8 = [c for c in found if c.precision == "int8"]
    accurate = [c for c in int8 if c.check.feasible]
    whole = [c for c in found if left_all_in_fp32(c)]
    closest = min(int8, key=lambda c: (len(c.check.violations), c.check.worst_slice_drop)) if int8 else None
    near = f"closest: {closest.name} ({'; '.join(closest.check.violations[:2])})" if closest else ""
    keep = f"keep the FP32 graph{' (' + best.name + ')' if best is not None else ''}"
    if best is not None and best.precision == "int8":
        kept = list(best.config.nodes_to_exclude) if best.config is not None else []
        ms = "" if best.contended else f", {best.latency_ms:.2f} ms"
        message = (f"{best.name}: {_ratio_words(best)}{ms}, {best.size_mib:.1f} MiB, {terms.figures(best)}, "
                   f"worst slice {best.check.worst_slice or '-'} {-best.check.worst_slice_drop:{terms.drop}}"
                   + (f"; {len(kept)} node(s) kept in FP32: {kept}" if kept else ""))
    elif accurate:  # within budget but none fast enough: keep the FP32 graph
        quickest = max(accurate, key=lambda c: (c.speedup_lo if c.speedup_lo is not None else (c.speedup or 0.0)))
        message = (f"{keep}: {len(accurate)} INT8 variant{'s are' if len(accurate) > 1 else ' is'} within the {terms.metric} "
                   f"budget, but none is at least {min_speedup:.2f}x faster beyond doubt on this machine; the quickest, "
                   f"{quickest.name}, runs at {quickest.too_slow}")
    elif whole and terms.all_fp32:
        message = (f"no INT8 variant fits the budget: {terms.all_fp32} ({', '.join(c.name for c in whole)}, scored, not timed). "
                   f"Keep the FP32 graph, or {terms.advice}" + (f"; {near}" if near else ""))
    elif int8:
        message = f"no INT8 variant is {terms.budget}; {near}. {keep[0].upper() + keep[1:]}, {terms.advice}"
    else:
        message = "no quantized variant to choose from" + (f"; {best.name}" if best is not None else "")
    message += "".join(f"; {n}" for n in notes)
    busy = [c.name for c in int8 if c.contended]
    if busy:
        message += (f"{BUSY}{', '.join(busy)} was taken while other work used the CPU, even after timing again, so "
                    "it is not stated as measured: time again on a quiet machine")
    reused = [c.name for c in found if c.reused]
    if reused:
        message += f" (reused {len(reused)} earlier result{'s' if len(reused) > 1 else ''}: {', '.join(reused)})"
    return message


def fp32_candidate(name: str, graph: str, path: Path, size_mib: float, value: float, check: Optional[BudgetCheck] = None,
                   latency: Any = None) -> SearchCandidate:
    """The FP32 graph as a candidate (``check`` None: the reference itself; ``latency`` None: not timed)."""
    check = check if check is not None else BudgetCheck(0.0, "", 0.0, True, True, [], 0, [])
    return SearchCandidate(
        name=name, graph=graph, precision="fp32", config=None, onnx_path=Path(path), result_path=None,
        latency_ms=latency.median_ms if latency is not None else float("nan"), size_mib=size_mib, accuracy=value,
        accuracy_delta=0.0, check=check, speedup=1.0, speedup_lo=1.0, speedup_hi=1.0,
        floor_ms=getattr(latency, "floor_ms", None), of_floor=getattr(latency, "of_floor", None))


def all_fp32_candidate(name: str, graph: str, res: Scored, check: BudgetCheck, why: str) -> SearchCandidate:
    """A quantization that left every node in FP32: scored and judged, never timed (the speed-up would be noise) nor chosen."""
    return SearchCandidate(
        name=name, graph=graph, precision="fp32", config=res.config, onnx_path=Path(res.quantized_path), result_path=None,
        latency_ms=float("nan"), size_mib=res.size_mib, accuracy=res.accuracy, accuracy_delta=res.accuracy_delta, check=check,
        fast_enough=False, too_slow=why)


@dataclass(frozen=True)
class SearchResult:
    """Every candidate (for the chart) and the fastest one within both budgets."""

    candidates: list[SearchCandidate]
    chosen: Optional[str]
    budget_overall: float
    budget_per_slice: float
    objective: str
    include_small_slices: bool
    strict: bool
    out_dir: Path
    message: str
    min_speedup: float = 0.0  # the speed guard applied (0 in searches saved before it existed)
    # what every candidate's ``accuracy`` holds: "accuracy", or a ScoredBaseline's metric (its budgets then in its terms)
    metric: str = "accuracy"

    def candidate(self, name: str) -> SearchCandidate:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(f"no candidate {name!r}; candidates: {[c.name for c in self.candidates]}")

    @property
    def best(self) -> Optional[SearchCandidate]:
        return self.candidate(self.chosen) if self.chosen else None

    @property
    def reused(self) -> list[str]:
        """Names of the candidates taken from earlier results instead of quantized again."""
        return [c.name for c in self.candidates if c.reused]


def select_candidate(candidates: Sequence[SearchCandidate], objective: Union[str,
                                                                             Objective] = Objective.LATENCY) -> Optional[SearchCandidate]:
    """The feasible INT8 candidate with the highest speed-up (each timed beside FP32 in its own rounds, so candidates
    timed apart still compare), or the smallest; ties go to the higher accuracy; FP32 when none is feasible."""
    objective = parse_objective(objective)
    feasible = [c for c in candidates if c.feasible]
    ok = [c for c in feasible if c.precision == "int8"] or feasible
    if not ok:
        return None
    if objective is Objective.LATENCY:
        if all(c.speedup is not None for c in ok):
            return min(ok, key=lambda c: (-c.speedup, -c.accuracy, c.name))
        return min(ok, key=lambda c: (c.latency_ms, -c.accuracy, c.name))
    return min(ok, key=lambda c: (c.size_mib, -c.accuracy, c.name))
