"""Training runs side by side: loss parity, speed, memory, start-up cost and accuracy.

Ratios are "times better than the baseline" (eager by default): throughput 2.0x is twice the samples
per second, memory 0.5x twice the peak memory. A run that fell back or failed keeps its reason but never
enters a ratio.

Loss parity tolerances. Backends differ only in the order of fp32 operations. Drift measured with
dropout off: at most 1.2e-7 over 10-24 tiny-model steps and 12 MiniLM steps (16 x 128), 3.9e-7 over
60 MiniLM steps (16 x 64, lr 1e-4), 6e-8 over the tests' runs. Defects measured: twice the learning
rate 1.4e-3 to 1.6e-3 at the second step (5.2e-3 to 6.2e-3 within 6-10 steps), no warm-up or a
constant schedule 0.005, another seed 0.016. So fp32 curves must agree within **1e-4**: 250 times the
largest drift, 14 times below twice the learning rate (a test checks 2x lr fails it); ``tolerance=``
overrides it for long runs. bf16 rounds matmul inputs to 8 mantissa bits: **0.05** (eager bf16 vs fp32
differ by < 0.05 over 3 tiny steps). With dropout on, each backend draws its own masks, so 10-step
moving averages are compared within **0.1**, a coarse check said so in ``parity_basis``.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Optional, Sequence

from .. import runs
from ..runs.layout import COMPARE_FILE
from ..core.latency import Ratio as SpeedRatio, paired_ratio, quantile
from ..core.metrics import Metric
from ..core.options import parse_choice
from .config import (DEFAULT_BACKENDS, Backend, Precision, TrainConfig, TrainConfigError, check_backend,
                     settings_text, shared_differences)
from .lockstep import LockstepJob, interleaved_runs, run_lockstep, run_training_isolated
from .loop import run_training
from .results import ProgressFn, RunStatus, TrainRun

FP32_TOLERANCE = 1e-4
BF16_TOLERANCE = 0.05
DROPOUT_TOLERANCE = 0.1
DROPOUT_WINDOW = 10
SPEED_BASIS = ("steady state, the median step after the start-up steps, as `benchmarks/bench_train.py` measures it")
SPEED_WITH_STARTUP_BASIS = ("every step timed, the first one (ORTModule's export and graph build, torch.compile's "
                            "compilation) included: what this run cost; it approaches the steady-state ratio as runs get longer")


@dataclass(frozen=True)
class BackendSummary:
    """One backend's figures, each with its unit and direction."""

    backend: Backend
    status: RunStatus
    reason: str
    executed_in_onnxruntime: bool
    fell_back: bool
    steps_done: int
    median_step_time: Metric
    p90_step_time: Metric
    throughput: Metric
    peak_memory: Metric
    startup: Metric
    total_time: Metric
    final_val_loss: Metric
    final_accuracy: Metric
    throughput_with_startup: Metric = field(default_factory=lambda: Metric("throughput incl. start-up", float("nan"), "samples/s", True))

    @property
    def comparable(self) -> bool:
        """Whether this run's figures may enter a ratio (it ran, with the backend it names)."""
        return self.status in (RunStatus.OK, RunStatus.STOPPED) and self.steps_done > 0

    def metrics(self) -> list[Metric]:
        return [self.median_step_time, self.p90_step_time, self.throughput, self.throughput_with_startup, self.peak_memory,
                self.startup, self.total_time, self.final_val_loss, self.final_accuracy]


@dataclass(frozen=True)
class Ratio:
    """``backend`` against ``baseline``: >1 is better for every ratio, whatever the metric's direction."""

    backend: Backend
    baseline: Backend
    throughput: float  # steady state: samples/s ratio of the median step after start-up (what the benchmark measures)
    memory: float  # baseline peak / backend peak
    startup: float  # baseline start-up / backend start-up
    max_loss_diff: float  # largest |loss difference| over the steps both ran (moving averages with dropout)
    loss_within_tolerance: bool
    steps_compared: int
    accuracy_diff: float  # backend final accuracy - baseline final accuracy
    throughput_with_startup: float = float("nan")  # over every step, the first one included (SPEED_WITH_STARTUP_BASIS)
    # with its 95% bootstrap interval when the runs took turns (lockstep); None for runs timed apart
    steady: Optional[SpeedRatio] = None
    # differs_in is empty when the ratio compares the backend alone (like for like)
    baseline_settings: str = ""
    differs_in: list[str] = field(default_factory=list)
    MOVED_KEYS: ClassVar[dict[str, str]] = {"throughput_lo": "steady.lo", "throughput_hi": "steady.hi"}

    @property
    def like_for_like(self) -> bool:
        return not self.differs_in

    @property
    def interleaved(self) -> bool:
        return self.steady is not None

    def speed_text(self) -> str:
        """``0.98x (0.95-1.01)``, or without an interval for runs not timed in turns."""
        return self.steady.text() if self.steady is not None else f"{self.throughput:.2f}x"


@dataclass(frozen=True)
class Comparison:
    runs: list[TrainRun]
    baseline: Backend
    summaries: list[BackendSummary]
    ratios: list[Ratio]
    tolerance: float
    parity_basis: str  # how the loss curves were compared, and why that tolerance
    notes: list[str] = field(default_factory=list)  # fallbacks, failures, memory caveats
    run_dir: Optional[str] = None

    def summary(self, backend: Backend | str) -> BackendSummary:
        return _by_backend(self.summaries, backend, "no run for backend {b!r}; compared: " + str([x.backend.value for x in self.summaries]))

    def ratio(self, backend: Backend | str) -> Ratio:
        return _by_backend(self.ratios, backend, "no ratio for {b!r} (it is the baseline, or its run fell back or failed)")

    def run(self, backend: Backend | str) -> TrainRun:
        return _by_backend(self.runs, backend, "no run for backend {b!r}")

    @property
    def loss_parity(self) -> bool:
        return all(r.loss_within_tolerance for r in self.ratios)


def _by_backend(items, backend: Backend | str, missing: str):
    backend = parse_choice(Backend, backend, "backend", TrainConfigError)
    found = next((x for x in items if x.backend is backend), None)
    if found is None:
        raise KeyError(missing.format(b=backend.value))
    return found


def default_tolerance(cfg: TrainConfig) -> tuple[float, str]:
    """The loss-parity tolerance for runs made with ``cfg``, and the sentence that justifies it."""
    if cfg.dropout:
        return DROPOUT_TOLERANCE, (
            f"dropout on: each backend draws its own dropout masks, so {DROPOUT_WINDOW}-step moving averages of the "
            f"loss are compared, within {DROPOUT_TOLERANCE} (a coarse check; turn dropout off for a step-by-step one)"
        )
    if cfg.precision is not Precision.FP32:
        return BF16_TOLERANCE, (
            f"{cfg.precision.value}, dropout off: per-step losses compared within {BF16_TOLERANCE} "
            "(16-bit rounding of every matmul input, ~0.4% relative, compounds over steps)"
        )
    return FP32_TOLERANCE, (
        f"fp32, dropout off: per-step losses compared within {FP32_TOLERANCE:g}: operation-order drift measured "
        "at <= 4e-7 (tiny, 10-24 steps; MiniLM, up to 60 steps); twice the learning rate measured at >= 1.4e-3 from "
        "its second step, no warm-up, another schedule or seed at 0.005 or more"
    )


def _moving_average(xs: list[float], w: int) -> list[float]:
    """Mean of each value and the ``w - 1`` before it (fewer at the start)."""
    import numpy as np

    return (np.convolve(xs, np.ones(w))[:len(xs)] / np.minimum(np.arange(1, len(xs) + 1), w)).tolist()


def loss_difference(a: TrainRun, b: TrainRun, smooth: int = 1) -> tuple[float, int]:
    """Largest absolute difference between two loss curves over the steps both ran, and how many."""
    n = min(len(a.steps), len(b.steps))
    la, lb = a.losses[:n], b.losses[:n]
    if smooth > 1:
        la, lb = _moving_average(la, smooth), _moving_average(lb, smooth)
    diffs = [abs(x - y) for x, y in zip(la, lb)]
    return (max(diffs) if diffs else float("nan")), n


def summarize_run(run: TrainRun) -> BackendSummary:
    timed = [s.step_s for s in run.timed_steps()]
    p90 = quantile(timed, 0.9) if timed else float("nan")
    return BackendSummary(
        backend=run.backend,
        status=run.status,
        reason=run.reason,
        executed_in_onnxruntime=run.executed_in_onnxruntime,
        fell_back=run.status is RunStatus.FELL_BACK,
        steps_done=len(run.steps),
        median_step_time=Metric("median step time", run.median_step_s, "s", False),
        p90_step_time=Metric("p90 step time", p90, "s", False),
        throughput=Metric("throughput", run.samples_per_s, "samples/s", True),
        throughput_with_startup=Metric("throughput incl. start-up", run.samples_per_s_with_startup, "samples/s", True),
        peak_memory=Metric("peak memory", run.peak_memory_mib, "MiB", False),
        startup=Metric("start-up (first step)", run.startup_s, "s", False),
        total_time=Metric("total time", run.total_s, "s", False),
        final_val_loss=Metric("final validation loss", run.final_val_loss, "", False),
        final_accuracy=Metric("final validation accuracy", run.final_accuracy, "", True),
    )


def comparison_notes(runs_: Sequence[TrainRun], base_run: TrainRun) -> list[str]:
    """What a reader must know besides the figures: fallbacks, graph breaks, unlike settings, how speed was timed."""
    cfg, baseline = base_run.config, base_run.backend
    notes: list[str] = []
    for r in runs_:
        if r.status in (RunStatus.FAILED, RunStatus.FELL_BACK):
            notes.append(f"{r.backend.value}: {r.status.value}, left out of every ratio. {r.reason}")
        elif r.status is RunStatus.STOPPED:
            notes.append(f"{r.backend.value}: stopped after {len(r.steps)} of {r.total_steps} steps; figures cover those steps")
        cs = r.compile_stats
        if cs is not None and cs.compiled:
            breaks = "; ".join(f"{why} (x{n})" for why, n in cs.break_reasons.items())
            notes.append(
                f"{r.backend.value}: Dynamo compiled {cs.frames_compiled} of {cs.frames_total} frame(s) into {cs.graphs} "
                f"graph(s), {cs.graph_breaks} graph break(s)"
                + (f": the code between the graphs ran eagerly ({breaks})" if cs.graph_breaks else "")
            )
            notes.extend(f"{r.backend.value}: {repair}" for repair in cs.repairs)
        diff = shared_differences(r.config, cfg)
        if diff:
            notes.append(f"{r.backend.value}: trained with other shared settings than {baseline.value} ({', '.join(diff)}); "
                         "its ratios compare more than the backend and are not like for like")
    pids = [r.environment.get("pid") for r in runs_]
    turns = len(runs_) > 1 and all(interleaved_runs(base_run, r) for r in runs_ if r is not base_run)
    if turns:
        notes.append("speed: each backend trained in its own process, the processes taking turns step by step (lockstep: "
                     "one step of every backend, then the next), so each step ran alone on the machine next in time to "
                     "the other backends' same step; ratios are medians of the per-step ratios with a bootstrap interval")
    elif len(runs_) > 1 and len(set(pids)) == len(pids):
        loads = ", ".join(f"{r.backend.value} {r.environment.get('load_avg_start') or '?'}" for r in runs_)
        notes.append(
            f"speed: each backend trained in its own process, one after the other (1-minute load average at each start: "
            f"{loads}), so the ratios compare steps measured minutes apart; on a machine whose load changes, the "
            "interleaved steps of `benchmarks/bench_train.py` (every variant stepped in turn in one process) are the "
            "fairer speed figure"
        )
    if len(runs_) > 1 and len(set(pids)) < len(pids):
        notes.append("peak memory: runs shared one process, so a later run's RSS includes memory an earlier one did not "
                     "return to the OS; use run_comparison(cfg, CompareConfig(isolate=True)) for per-backend figures")
    return notes


def compare(runs_: Sequence[TrainRun], tolerance: Optional[float] = None, baseline: Backend | str = Backend.EAGER) -> Comparison:
    """Compare finished runs. ``tolerance`` overrides :func:`default_tolerance` for the loss parity."""
    if not runs_:
        raise ValueError("compare() needs at least one TrainRun; train some with run_training or run_comparison")
    baseline = parse_choice(Backend, baseline, "baseline", TrainConfigError)
    by_backend: dict[Backend, TrainRun] = {}
    for r in runs_:
        if r.backend in by_backend:
            raise ValueError(f"two runs for backend {r.backend.value!r}: compare one run per backend")
        by_backend[r.backend] = r
    if baseline not in by_backend:
        raise ValueError(f"the baseline backend {baseline.value!r} is not among the runs {[b.value for b in by_backend]}; "
                         f"pass baseline= one of them")
    base_run = by_backend[baseline]
    cfg = base_run.config
    tol, basis = default_tolerance(cfg)
    if tolerance is not None:
        if not tolerance > 0:
            raise ValueError(f"tolerance must be a positive loss difference, got {tolerance}")
        tol, basis = tolerance, f"per-step losses compared within {tolerance} (given by the caller)"
    smooth = DROPOUT_WINDOW if cfg.dropout else 1

    summaries = [summarize_run(r) for r in runs_]
    base_summary = next(s for s in summaries if s.backend is baseline)
    notes = comparison_notes(runs_, base_run)

    ratios: list[Ratio] = []
    if base_summary.comparable:
        for r, s in zip(runs_, summaries):
            if r.backend is baseline or not s.comparable:
                continue
            diff, n = loss_difference(base_run, r, smooth)
            steady = paired_step_ratio(base_run, r) if interleaved_runs(base_run, r) else None
            ratios.append(Ratio(
                backend=r.backend, baseline=baseline, steady=steady,
                throughput=steady.value if steady is not None else s.throughput.ratio_to(base_summary.throughput),
                baseline_settings=settings_text(cfg), differs_in=list(shared_differences(r.config, cfg)),
                throughput_with_startup=s.throughput_with_startup.ratio_to(base_summary.throughput_with_startup),
                memory=s.peak_memory.ratio_to(base_summary.peak_memory),
                startup=s.startup.ratio_to(base_summary.startup),
                max_loss_diff=diff,
                loss_within_tolerance=bool(n > 0 and diff <= tol),
                steps_compared=n,
                accuracy_diff=s.final_accuracy.value - base_summary.final_accuracy.value,
            ))
    else:
        notes.append(f"the baseline {baseline.value} did not run ({base_run.status.value}): no ratios")
    return Comparison(list(runs_), baseline, summaries, ratios, tol, basis, notes)


def paired_step_ratio(base: TrainRun, other: TrainRun) -> Optional[SpeedRatio]:
    """Steady-state speed from the post-start-up steps of runs that took turns (lockstep), paired in time;
    None with fewer than 2 such steps."""
    skip = max(len(base.steps) - len(base.timed_steps()), len(other.steps) - len(other.timed_steps()))
    n = min(len(base.steps), len(other.steps)) - skip
    return paired_ratio([s.step_s for s in base.steps[skip:skip + n]], [s.step_s for s in other.steps[skip:skip + n]]) if n >= 2 else None


@dataclass(frozen=True)
class CompareConfig:
    """What a comparison trains and how it judges them, beside the :class:`TrainConfig` every backend shares."""

    backends: tuple[Backend, ...] = field(default=DEFAULT_BACKENDS, metadata={"help": (
        "backends to train, each with the same config (seed, data order, optimizer)")})
    tolerance: Optional[float] = field(default=None, metadata={"help": (
        "largest final-loss difference in nats still called parity (default: justified per precision and dropout)")})
    isolate: bool = field(default=False, metadata={"help": (
        "train each backend in its own process (honest per-backend peak memory)")})
    interleave: bool = field(default=True, metadata={"help": (
        "with isolate: the processes take turns step by step, so speed ratios pair steps measured close in time")})

    def __post_init__(self) -> None:
        if isinstance(self.backends, (str, Backend)):
            raise TrainConfigError(f"backends is a list of backends, got {self.backends!r}; write ('eager', 'ortmodule')")
        chosen = tuple(parse_choice(Backend, b, "backend", TrainConfigError) for b in self.backends)
        if not chosen:
            raise TrainConfigError(f"backends must name at least one of {', '.join(b.value for b in Backend)}")
        if len(set(chosen)) != len(chosen):
            raise TrainConfigError(f"backends must not repeat, got {[b.value for b in chosen]}")
        object.__setattr__(self, "backends", chosen)
        if self.tolerance is not None and not (isinstance(self.tolerance, (int, float)) and not isinstance(self.tolerance, bool)
                                               and math.isfinite(self.tolerance) and self.tolerance > 0):
            raise TrainConfigError(f"tolerance must be a positive number of nats, got {self.tolerance!r}; "
                                   "leave it unset for the default per precision")
        object.__setattr__(self, "isolate", bool(self.isolate))
        object.__setattr__(self, "interleave", bool(self.interleave))


def run_comparison(
    cfg: TrainConfig,
    compare_cfg: Optional[CompareConfig] = None,
    run_dir: str | os.PathLike | None = None,
    *,
    progress: Optional[ProgressFn] = None,
    stop: Optional[threading.Event] = None,
) -> Comparison:
    """Train each backend with ``cfg``, compare them, save ``<run_dir>/compare.json``. Every backend is checked
    first, so a combination that cannot run is rejected before any training; one backend's failure is recorded."""
    compare_cfg = compare_cfg if compare_cfg is not None else CompareConfig()
    if not isinstance(compare_cfg, CompareConfig):
        raise TrainConfigError(f"compare_cfg must be a CompareConfig (e.g. CompareConfig(backends=('eager', 'ortmodule'))), "
                               f"got {type(compare_cfg).__name__}")
    chosen = [check_backend(cfg, b) for b in compare_cfg.backends]
    baseline = Backend.EAGER if Backend.EAGER in chosen else chosen[0]
    run_dir = Path(run_dir) if run_dir is not None else runs.new_run_dir("compare")
    done: list[TrainRun] = []
    if compare_cfg.isolate and compare_cfg.interleave and len(chosen) > 1:
        done = run_lockstep([LockstepJob(cfg, b, run_dir) for b in chosen], progress=progress, stop=stop)
        chosen = []
    train = run_training_isolated if compare_cfg.isolate else run_training
    for b in chosen:
        if stop is not None and stop.is_set():
            break
        done.append(train(cfg, b, run_dir, progress=progress, stop=stop))
    if not done:
        raise TrainConfigError("stopped before any backend ran: nothing to compare")
    if baseline not in {r.backend for r in done}:
        baseline = done[0].backend
    result = replace(compare(done, tolerance=compare_cfg.tolerance, baseline=baseline), run_dir=str(run_dir))
    runs.save_result(result, run_dir / COMPARE_FILE)
    return result


def load_comparison(path: str | os.PathLike) -> Comparison:
    """Read a Comparison back from ``compare.json`` or the run folder holding it."""
    return runs.load_result(Comparison, path, COMPARE_FILE)


def comparison_table(c: Comparison) -> str:
    """A plain-text table of the comparison (CLI, benchmark, logs)."""
    head = f"{'backend':<10} {'status':<9} {'in ORT':<6} {'median step':>11} {'samples/s':>10} {'x (interval)':>18} " \
           f"{'x w/ start-up':>13} " \
           f"{'peak MiB':>9} {'x':>6} {'start-up s':>10} {'val acc':>7} {'max dloss':>9}"
    lines = [head, "-" * len(head)]
    for s in c.summaries:
        r = next((x for x in c.ratios if x.backend is s.backend), None)
        fx = lambda v: "" if v is None or not math.isfinite(v) else f"{v:.2f}x"  # noqa: E731
        fv = lambda v, f: "-" if not math.isfinite(v) else format(v, f)  # noqa: E731
        base = s.backend is c.baseline
        lines.append(
            f"{s.backend.value:<10} {s.status.value:<9} {'yes' if s.executed_in_onnxruntime else 'no':<6} "
            f"{fv(s.median_step_time.value * 1000, '.0f') + ' ms':>11} {fv(s.throughput.value, '.1f'):>10} "
            f"{('1.00x' if base and s.comparable else (r.speed_text() if r else '')):>18} "
            f"{('1.00x' if base and s.comparable else fx(r.throughput_with_startup if r else None)):>13} "
            f"{fv(s.peak_memory.value, '.0f'):>9} "
            f"{('1.00x' if base and s.comparable else fx(r.memory if r else None)):>6} {fv(s.startup.value, '.1f'):>10} "
            f"{fv(s.final_accuracy.value, '.3f'):>7} {(fv(r.max_loss_diff, '.1e') if r else ''):>9}"
        )
    lines.append(f"speed: x = {SPEED_BASIS}; x w/ start-up = {SPEED_WITH_STARTUP_BASIS}")
    settings = {r.baseline_settings for r in c.ratios if r.like_for_like}
    if settings:
        lines.append(f"like for like: every backend trained with {', '.join(sorted(settings))}; only the backend differs")
    lines += [f"NOT like for like: {r.backend.value} differs from {c.baseline.value} in {', '.join(r.differs_in)}"
              for r in c.ratios if not r.like_for_like]
    lines.append(f"loss parity: {'yes' if c.loss_parity else 'NO'} ({c.parity_basis})")
    lines.extend(f"note: {n}" for n in c.notes)
    return "\n".join(lines)
