"""Checks for the notebooks' exercises: each says whether the learner got it, never the answer.

The truth comes from the learner's own results (it differs from laptop to laptop). A check never raises on a
missing or odd answer (``None`` while not attempted), so a notebook run top to bottom by a test prints "not yet".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

NOT_YET, CORRECT, NOT_QUITE = "not yet", "correct", "not quite"
_MARK = {NOT_YET: "…", CORRECT: "✓", NOT_QUITE: "✗"}


@dataclass(frozen=True)
class Verdict:
    exercise: str
    status: str  # NOT_YET | CORRECT | NOT_QUITE
    message: str

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return f"{_MARK[self.status]} {self.exercise}: {self.status}. {self.message}"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the sentence, not the dataclass
        p.text(str(self))

    def __repr__(self) -> str:
        return str(self)


def _number(answer: Any) -> Optional[float]:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _judge_number(name: str, value: float, truth: float, rel: float, right: str, hint: str) -> Verdict:
    if abs(value - truth) <= rel * abs(truth):
        return Verdict(name, CORRECT, right)
    return Verdict(name, NOT_QUITE, f"{hint} (your answer is {'too high' if value > truth else 'too low'}).")


def _judge_choice(name: str, answer: Any, given: str, choices: list[str], what: str, right_one: Optional[str], right: str,
                  hint: str) -> Verdict:
    if given not in choices:
        return Verdict(name, NOT_QUITE, f"{what} {choices}, got {answer!r}.")
    return Verdict(name, CORRECT, right) if given == right_one else Verdict(name, NOT_QUITE, hint)


# ---- 00 tour -------------------------------------------------------------------------------
def check_size_ratio(answer: Any, quant_result: Any) -> Verdict:
    """00: how many times smaller the INT8 graph is than the FP32 graph (within 10%)."""
    name = "INT8 size ratio"
    if quant_result is None:
        return Verdict(name, NOT_YET, "run the Quantize step first (or RUN_ALL = True).")
    if answer is None:
        return Verdict(name, NOT_YET, "set SIZE_RATIO to your answer and run this cell again.")
    value = _number(answer)
    if value is None or value <= 0:
        return Verdict(name, NOT_QUITE, f"SIZE_RATIO must be a positive number (FP32 size / INT8 size), got {answer!r}.")
    return _judge_number(name, value, quant_result.fp32_size_mib / quant_result.size_mib, 0.10,
                         "INT8 weights take a byte where FP32 takes four; what is not a weight "
                         "(embeddings kept in FP32, graph structure) keeps the ratio below 4.",
                         "FP32 size divided by INT8 size: both sizes are in the Quantize step's results table")


# ---- 01 fine-tune with ORTModule -----------------------------------------------------------
def check_startup_in_steps(answer: Any, run: Any) -> Verdict:
    """01: how many median steps ORTModule's start-up (its first step) is worth (within 25%)."""
    name = "start-up in steps"
    if run is None or not getattr(run, "steps", None):
        return Verdict(name, NOT_YET, "train first: the answer comes from your own run.")
    if answer is None:
        return Verdict(name, NOT_YET, "set STARTUP_STEPS to your answer and run this cell again.")
    value = _number(answer)
    if value is None or value <= 0:
        return Verdict(name, NOT_QUITE, f"STARTUP_STEPS must be a positive number, got {answer!r}.")
    median = run.median_step_s
    if not (median and median == median and run.startup_s == run.startup_s):
        return Verdict(name, NOT_YET, "the run is too short to have a median step: train more steps.")
    return _judge_number(name, value, run.startup_s / median, 0.25,
                         "that is what the export and graph build cost, paid once per process: "
                         "a short run pays it in full, a long one hardly notices it.",
                         "divide the start-up (first step) by the median step time, both in the run table")


# ---- 02 eager vs ORTModule -----------------------------------------------------------------
def check_fastest_backend(answer: Any, comparison: Any) -> Verdict:
    """02: which backend trained the most samples per second after start-up, on this machine."""
    name = "fastest backend"
    ok = [r for r in (getattr(comparison, "runs", None) or []) if r.ok and r.median_step_s == r.median_step_s]
    if len(ok) < 2:
        return Verdict(name, NOT_YET, "train at least two backends first.")
    if answer is None:
        return Verdict(name, NOT_YET, "set FASTEST to a backend name and run this cell again.")
    return _judge_choice(name, answer, str(answer).strip().lower(), [r.backend.value for r in ok],
                         "FASTEST must be one of the backends you trained", max(ok, key=lambda r: r.samples_per_s).backend.value,
                         "measured on this machine; on a GPU with fused optimizers the order can change.",
                         "look at the throughput ratios (above 1x is faster than the baseline), "
                         "not at the start-up, which is paid once.")


# ---- 03 export and fusion ------------------------------------------------------------------
FUSED_PER_LAYER_OPS = ("Attention", "SkipLayerNormalization", "BiasGelu")


def check_fusions_per_layer(answer: Any, report: Any) -> Verdict:
    """03: how many of each fused operator the transformer optimizer makes *per encoder layer*."""
    name = "fusions per layer"
    if report is None:
        return Verdict(name, NOT_YET, "export and fuse first.")
    if answer is None:
        return Verdict(name, NOT_YET, "set PER_LAYER to a dict like {'Attention': ..., 'SkipLayerNormalization': ..., "
                                      "'BiasGelu': ...} and run this cell again.")
    if not isinstance(answer, Mapping):
        return Verdict(name, NOT_QUITE, f"PER_LAYER must be a dict of operator name -> count per layer, got {answer!r}.")
    missing = [op for op in FUSED_PER_LAYER_OPS if op not in answer]
    if missing:
        return Verdict(name, NOT_QUITE, f"PER_LAYER also needs {missing}.")
    layers = report.num_layers
    if not layers:
        return Verdict(name, NOT_YET, "the report does not know the number of layers: re-run the export.")
    counts = report.fused_op_counts
    wrong = [op for op in FUSED_PER_LAYER_OPS if _number(answer[op]) is None or
             not math.isclose(_number(answer[op]) * layers, counts.get(op, 0))]
    if not wrong:
        return Verdict(name, CORRECT, "one attention block, two residual+LayerNorm pairs and one GELU after a bias "
                                      "per layer; a count below that means a pattern was missed (see the diagnoses).")
    return Verdict(name, NOT_QUITE, f"{len(wrong)} of {len(FUSED_PER_LAYER_OPS)} are off ({', '.join(wrong)}): divide "
                                    "the fused counts by the number of encoder layers the model has.")


# ---- 04 quantization -----------------------------------------------------------------------
def exercise_speed_target(profile) -> float:
    """04's speed goal on the machine of ``profile``: a third of the way from FP32 to what this CPU's
    INT8 matrix multiply allows over its FP32 one, at least 1.05x (where it was met: docs/benchmarks/index.md)."""
    ratio = float(getattr(profile, "int8_over_fp32", 1.0) or 1.0)
    return round(max(1.05, 1.0 + (ratio - 1.0) / 3.0), 2)


def speed_goal(min_speedup: Optional[float], profile: Any) -> tuple[float, Any]:
    """(04's speed goal, the profile it came from): ``min_speedup`` when given, else this machine's."""
    if min_speedup is None:
        if profile is None:
            from ..perf.machine_profile import machine_profile

            profile = machine_profile()
        min_speedup = exercise_speed_target(profile)
    return min_speedup, profile


def lower_end(result: Any) -> float:
    """The lower end of a quantization's speed-up interval (its speed-up where it has none)."""
    ratio = getattr(result, "speedup_ratio", None)
    return ratio.lo if ratio is not None else result.speedup


def check_preset_within_budget(answer: Any, results: Iterable[Any] | Mapping[str, Any] | None,
                               budget: float = 0.01, min_speedup: Optional[float] = None, profile: Any = None) -> Verdict:
    """04: a result within ``budget`` on every slice whose speed-up's lower end reaches this machine's goal."""
    name = "within 1 point on every slice, faster than FP32"
    min_speedup, profile = speed_goal(min_speedup, profile)
    where = (f" (the goal on this CPU: {profile.isa_text()}, its INT8 matrix multiply {profile.int8_over_fp32:.1f}x its FP32)"
             if profile is not None else "")
    pool = list(results.values()) if isinstance(results, Mapping) else list(results or [])
    by_name = {r.name: r for r in pool}
    if answer is None:
        return Verdict(name, NOT_YET, "set BETTER_PRESET to the name of a result in the panel's table and run this cell again.")
    chosen = by_name.get(str(answer).strip())
    if chosen is None:
        return Verdict(name, NOT_YET, f"{answer!r} has not been run here: pick it in the panel and press Quantize "
                                      f"(results so far: {sorted(by_name)}).")
    problems = []
    worst = max(chosen.report.max_slice_drop(), -chosen.accuracy_delta)
    if worst > budget:
        problems.append(f"a slice (or the overall accuracy) drops by {100 * worst:.1f} points, more than "
                        f"{100 * budget:.0f}")
    ratio = getattr(chosen, "speedup_ratio", None)
    if not lower_end(chosen) >= min_speedup:
        shown = ratio.text() if ratio is not None else f"{chosen.speedup:.2f}x"
        problems.append(f"it is {shown} as fast as FP32 (judged on the lower end); the goal is at least "
                        f"{min_speedup:.2f}x{where}")
    if getattr(chosen, "contended", False):
        problems.append("its speed was measured while other work used the CPU: run it again on a quiet machine")
    if not problems:
        return Verdict(name, CORRECT, "accuracy held on every slice and it is still clearly faster: that is the "
                                      "trade-off the search in the panel automates.")
    return Verdict(name, NOT_QUITE, "; ".join(problems) + ". Try another preset, or keep some of the worst nodes "
                                    "in FP32 (Re-quantize) and see what each costs.")


# ---- 05 audit your own model ---------------------------------------------------------------
def check_most_hurt_class(answer: Any, quant_result: Any) -> Verdict:
    """05: which class (true label) loses the most accuracy under INT8."""
    name = "most affected class"
    if quant_result is None:
        return Verdict(name, NOT_YET, "quantize first.")
    classes = [d for d in quant_result.report.slices if d.slice.startswith("class:") and d.n > 0]
    if len(classes) < 2:
        return Verdict(name, NOT_YET, "the report has no per-class slices to compare.")
    if answer is None:
        return Verdict(name, NOT_YET, "set MOST_HURT_CLASS to a class name and run this cell again.")
    deltas = {d.slice.split(":", 1)[1]: d.delta for d in classes}
    given = str(answer).strip().removeprefix("class:")
    worst = min(deltas.values())  # a tie: each of the classes that lost the most is right
    return _judge_choice(name, answer, given, list(deltas), "MOST_HURT_CLASS must be one of the classes",
                         given if math.isclose(deltas.get(given, math.inf), worst) else None,
                         "the class whose examples sit closest to the decision boundary loses the most; "
                         "the flip table shows which reviews.",
                         "compare the bars of the class:... slices in the slice chart (the change in "
                         "accuracy, not the accuracy itself).")


# ---- 06 on-device training -------------------------------------------------------------------
def check_trainable_fraction(answer: Any, result: Any) -> Verdict:
    """06: what fraction of the model's parameters trains on the device (within 10%)."""
    name = "trainable fraction"
    art = getattr(result, "artifacts", None)
    if art is None:
        return Verdict(name, NOT_YET, "train on the device first: the answer comes from your own artifacts.")
    if answer is None:
        return Verdict(name, NOT_YET, "set FRACTION to your answer (e.g. 0.05 for 5%) and run this cell again.")
    value = _number(answer)
    if value is None or not 0 < value <= 1:
        return Verdict(name, NOT_QUITE, f"FRACTION must be a number above 0 and at most 1, got {answer!r}.")
    return _judge_number(name, value, art.trainable_parameters / art.total_parameters, 0.10,
                         "only these parameters get gradients, optimizer moments and updates; the "
                         "frozen rest still sits in the checkpoint, which is why it is nearly as large.",
                         "trainable parameters divided by all parameters: both are in the panel's first table")


# ---- 07 embedding model --------------------------------------------------------------------
def check_most_ndcg_kept(answer: Any, result: Any) -> Verdict:
    """07: which quantized variant kept the largest share of the FP32 graph's NDCG@10 on this run."""
    name = "most NDCG@10 kept"
    evaluation = getattr(result, "evaluation", None)
    scored = [v for v in (getattr(evaluation, "variants", None) or []) if getattr(v, "retrieval", None) is not None]
    if not scored:
        return Verdict(name, NOT_YET, "run the panel first: it scores each variant on the retrieval task.")
    if answer is None:
        return Verdict(name, NOT_YET, "set KEPT_MOST to a variant's name and run this cell again.")
    return _judge_choice(name, answer, str(answer).strip(), [v.name for v in scored], "KEPT_MOST must be one of the variants scored",
                         max(scored, key=lambda v: v.retrieval.ndcg_ratio).name,
                         "read from this run's retrieval table; another corpus or CPU can change it.",
                         "look at NDCG@10 as a share of FP32's in the retrieval table, not at the speed.")
