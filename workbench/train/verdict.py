"""The training verdict: does ORTModule (or torch.compile) train faster than eager here, like for like?

Only steps timed in turns (:mod:`workbench.train.lockstep`) are judged: runs timed one after the other met
different loads, so their figure is labelled, not judged. Where ORTModule does not pay, the verdict says
where it is reported to pay (published figures, labelled as theirs) and what to try next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .. import runs
from .config import Backend

# Published ORTModule figures, quoted as their authors measured them (never on a CPU).
PUBLISHED = (
    "ORTModule's published speed-ups were measured on GPUs, not CPUs: 39% to 130% more throughput on 8 "
    "NVIDIA A100s with DeepSpeed ZeRO-1 and mixed precision, against PyTorch runs that used another "
    "optimizer (AdamW against ONNX Runtime's fused Adam) - Hugging Face and Microsoft, \"Optimum + ONNX "
    "Runtime: easier, faster training for your Hugging Face models\" (2023); 13.8% for BART-large in fp16 "
    "on 8 V100s (microsoft/onnxruntime-training-examples, huggingface/BART.md)"
)
NEXT_STEPS = (
    "a GPU (make setup-gpu): where ORTModule's fused CUDA kernels and mixed precision apply",
    "larger batches or sequences, or a larger encoder (benchmarks/bench_train.py --shapes 32x128 --model ...)",
    "ORTModule's memory optimizer (memory_optimizer_level 1 or 2) when memory, not time, is the limit",
)
BACKEND_NAMES = {Backend.ORTMODULE: "ORTModule", Backend.COMPILE: "torch.compile", Backend.EAGER: "eager PyTorch"}
# how a verdict's sentence starts: which comparison its figure comes from
LIKE_FOR_LIKE = "Like for like (steps taken in turns)"
ONE_AFTER_THE_OTHER = "One after the other, not like for like"


@dataclass(frozen=True)
class TrainVerdict:
    backend: str
    baseline: str
    # gain, loss, no gain, one after the other (timed apart: not judged), unmeasured (busy), not like for like, no ratio
    outcome: str
    text: str
    ratio: Optional[float] = None  # steady-state speed, >1: the backend is faster
    lo: Optional[float] = None  # the 95% interval, when the steps were timed in turns
    hi: Optional[float] = None
    interleaved: bool = False
    settings: str = ""
    machine: str = ""
    load: str = ""
    where_it_pays: str = ""
    next_steps: list[str] = field(default_factory=list)


def training_verdict(comparison, backend: Backend | str = Backend.ORTMODULE, *, machine: str = "",
                     load=None) -> Optional[TrainVerdict]:
    """The verdict on ``backend`` against the baseline; None when not trained. A contended ``load`` makes it
    "unmeasured"."""
    backend = Backend(getattr(backend, "value", backend))
    if backend not in {s.backend for s in comparison.summaries}:
        return None
    name, base_name = BACKEND_NAMES[backend], BACKEND_NAMES.get(comparison.baseline, comparison.baseline.value)
    where = f" on this CPU ({machine})" if machine else " on this CPU"
    load_text = load.text() if load is not None else ""
    try:
        r = comparison.ratio(backend)
    except KeyError:
        s = comparison.summary(backend)
        return TrainVerdict(backend.value, comparison.baseline.value, "no ratio",
                            f"{name}: no speed verdict, its run {s.status.value} ({s.reason or 'no steps'})",
                            machine=machine, load=load_text)
    steady = r.steady
    common = dict(backend=backend.value, baseline=comparison.baseline.value, ratio=r.throughput, lo=steady and steady.lo,
                  hi=steady and steady.hi, interleaved=r.interleaved, settings=r.baseline_settings, machine=machine, load=load_text)
    if not r.like_for_like:
        return TrainVerdict(outcome="not like for like", text=(
            f"{name} against {base_name}: no verdict, the runs differ in {', '.join(r.differs_in)} as well as the "
            "backend; compare them with the same settings"), **common)
    has_interval = steady is not None
    measured = (f"{LIKE_FOR_LIKE if has_interval else ONE_AFTER_THE_OTHER}: {name} "
                f"{'trains' if has_interval else 'trained'} at {r.speed_text()} of {base_name} with the same settings "
                f"({r.baseline_settings}){where}")
    if load is not None and load.contended:
        return TrainVerdict(outcome="unmeasured", text=(
            f"{measured}, but the machine was busy while it trained ({load_text}): not a verdict; run it again on a "
            "quiet machine"), **common)
    if has_interval and steady.is_gain:
        outcome, tail = "gain", f"{(r.throughput - 1) * 100:.0f}% more samples per second here"
    elif has_interval and steady.is_loss:
        outcome, tail = "loss", "no gain here: slower than eager"
    elif has_interval:
        outcome, tail = "no gain", "no gain here (the interval includes 1.00x)"
    else:  # timed apart, minutes apart under whatever load each run met: a point figure, not judged
        outcome, tail = "one after the other", (
            "a point figure without an interval, not a verdict; train with isolate (each backend in its own process, "
            "taking turns step by step) for the like-for-like figure")
    text = f"{measured}: {tail}"
    extra = {}
    if outcome in ("loss", "no gain") and backend is Backend.ORTMODULE:  # judged, and it does not pay: where it does
        extra = {"where_it_pays": PUBLISHED, "next_steps": list(NEXT_STEPS)}
    return TrainVerdict(outcome=outcome, text=text, **common, **extra)


def verdict_lines(v: TrainVerdict) -> list[str]:
    """The verdict as plain lines (CLI, demo log, summary.md)."""
    lines = [f"verdict: {v.text}"]
    if v.load:
        lines.append(f"   machine load: {v.load}")
    if v.where_it_pays:
        lines.append(f"   where it is reported to pay: {v.where_it_pays}")
    if v.next_steps:
        lines.append("   to try next: " + "; ".join(v.next_steps))
    return lines


VERDICT_FILE = "verdict.json"  # beside compare.json: the verdicts and the machine they were reached on


@dataclass(frozen=True)
class TrainVerdicts:
    """Every contender's verdict from one comparison, with the machine and its load at the time."""

    verdicts: list[TrainVerdict]
    machine: str = ""
    load: str = ""
    contended: bool = False

    def get(self, backend: Backend | str) -> Optional[TrainVerdict]:
        value = getattr(backend, "value", backend)
        return next((v for v in self.verdicts if v.backend == value), None)


def verdicts_for(comparison, *, profile=None, load=None) -> TrainVerdicts:
    """:func:`training_verdict` for every backend compared with the baseline."""
    machine = f"{profile.cpu_model}, {profile.isa_text()}" if profile is not None else ""  # the CPU model and its extensions
    found = [training_verdict(comparison, s.backend, machine=machine, load=load)
             for s in comparison.summaries if s.backend is not comparison.baseline]
    return TrainVerdicts([v for v in found if v is not None], machine=machine,
                         load=load.text() if load is not None else "", contended=bool(load is not None and load.contended))


def save_verdicts(verdicts: TrainVerdicts, run_dir) -> str:
    return str(runs.save_result(verdicts, Path(run_dir) / VERDICT_FILE))


def load_verdicts(run_dir) -> Optional[TrainVerdicts]:
    """The verdicts saved beside ``compare.json`` in ``run_dir``; None when there are none."""
    path = Path(run_dir) / VERDICT_FILE
    return runs.load_result(TrainVerdicts, path) if path.is_file() else None


def load_check(profile=None, before=None):
    """``(profile, check)``, the profile cached; with ``before`` the check is combined with it, so a verdict
    says whether the machine was busy before or after the training it judges."""
    from ..perf.machine_profile import check_load, combine_checks, machine_profile

    profile = profile or machine_profile()
    now = check_load(profile)
    return profile, (combine_checks(before, now) if before is not None else now)
