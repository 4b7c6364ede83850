"""The one stage sequencer: every front runs the registry's :class:`Stage` list (``stages_for``) through :func:`run_stages`.

For every front alike: a stage whose ``needs`` failed, was skipped or returned nothing is skipped with the reason while
the others still run; an exception is recorded (not raised, unless ``fatal``), so what was written survives it;
``fail_fast`` (the ``Workbench``'s Run all) or a set ``stop`` event ends the sequence between stages; ``resume`` keeps
a stage's saved result; ``finally_`` stages (the report) run whatever happened before them.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

Log = Callable[[str], None]
OnStage = Callable[[int, int, str, str], None]

STATUSES = ("ok", "failed", "skipped", "resumed", "stopped")


@dataclass
class StageRecord:
    """What a running stage fills in for the front's summary; ``inputs`` (earlier results by name) is read-only.

    ``partial``: what later stages may still take when the stage then fails (the demo's fine-tune fails when one
    backend did not finish, and export takes a backend that did)."""

    name: str
    inputs: dict[str, Any] = field(default_factory=dict)
    before: list["StageOutcome"] = field(default_factory=list)
    result_path: Optional[str] = None
    figures: list[str] = field(default_factory=list)
    headline: dict[str, str] = field(default_factory=dict)
    partial: Any = None


@dataclass(frozen=True)
class StageOutcome:
    name: str
    status: str  # one of STATUSES
    seconds: float
    message: str = ""
    result_path: Optional[str] = None
    figures: list[str] = field(default_factory=list)
    headline: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "resumed")


@dataclass(frozen=True)
class Stage:
    """One step (built by ``stages_for``, not by hand); ``resume()`` returns an earlier run's saved result, None to run."""

    name: str
    run: Callable[[StageRecord], Any]
    needs: tuple[str, ...] = ()
    resume: Optional[Callable[[], Any]] = None
    finally_: bool = False
    #: why the stage is skipped when a need is missing (default: "needs the <stage> result")
    skip_reason: str = ""


@dataclass(frozen=True)
class SequenceResult:
    outcomes: list[StageOutcome]
    results: dict[str, Any]
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def outcome(self, name: str) -> StageOutcome:
        for o in self.outcomes:
            if o.name == name:
                return o
        raise KeyError(f"no stage {name!r}; stages: {[o.name for o in self.outcomes]}")


def _heading(style: str, index: int, total: int, name: str) -> str:
    return f"[{index}/{total}] {name} ..." if style == "steps" else f"\n== {name} =="


def _indent(style: str) -> str:
    return "      " if style == "steps" else "   "


def _check_order(stages: Sequence[Stage]) -> None:
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"stage names must be unique, got {names}")
    for i, s in enumerate(stages):
        unknown = [n for n in s.needs if n not in names[:i]]
        if unknown:
            raise ValueError(f"stage {s.name!r} needs {unknown}, which do not come before it in {names}")


def _missing_need(stage: Stage, results: dict[str, Any], outcomes: list[StageOutcome]) -> str:
    missing = [n for n in stage.needs if results.get(n) is None]
    if not missing:
        return ""
    why = stage.skip_reason or f"needs the {missing[0]} result"
    before = next((o for o in outcomes if o.name == missing[0]), None)
    if before is not None and before.status != "ok":
        why += f" ({missing[0]} {before.status}{': ' + before.message if before.message else ''})"
    return why


def run_stages(
    stages: Sequence[Stage],
    *,
    log: Log = print,
    on_stage: Optional[OnStage] = None,
    stop: Optional[threading.Event] = None,
    resume: bool = False,
    fail_fast: bool = False,
    fatal: tuple[type[BaseException], ...] = (),
    style: str = "demo",
) -> SequenceResult:
    """Run ``stages`` in order; ``style`` ``"steps"`` gives the audit's ``[i/n] name ...`` headings."""
    _check_order(stages)
    total = len(stages)
    outcomes: list[StageOutcome] = []
    results: dict[str, Any] = {}
    ended_early = False  # stopped on request, or fail_fast after a failure
    stopped = False
    pad = _indent(style)

    def record(outcome: StageOutcome, index: int) -> None:
        outcomes.append(outcome)
        if on_stage is not None:
            on_stage(index, total, outcome.name, outcome.status)

    for i, stage in enumerate(stages, start=1):
        heading = _heading(style, i, total, stage.name)
        if stop is not None and stop.is_set() and not ended_early:
            ended_early = stopped = True
        if ended_early and not stage.finally_:
            why = "stopped on request before it started" if stopped else "an earlier stage failed"
            log(f"{heading}\n{pad}{stage.name}: {'stopped' if stopped else 'skipped'} ({why})")
            record(StageOutcome(stage.name, "stopped" if stopped else "skipped", 0.0, why), i)
            continue
        why = _missing_need(stage, results, outcomes)
        if why:
            log(f"{heading}\n{pad}skipped: {why}")
            record(StageOutcome(stage.name, "skipped", 0.0, why), i)
            continue
        saved = stage.resume() if resume and stage.resume is not None else None
        if saved is not None:
            results[stage.name] = saved
            log(f"{heading}\n{pad}{stage.name}: resumed (its saved result is kept)")
            record(StageOutcome(stage.name, "resumed", 0.0, "the saved result of an earlier run"), i)
            continue
        log(heading)
        if on_stage is not None:
            on_stage(i, total, stage.name, "running")
        rec = StageRecord(stage.name, inputs=results, before=list(outcomes))
        t0 = time.perf_counter()
        try:
            results[stage.name] = stage.run(rec)
        except fatal:
            raise
        except Exception as exc:  # recorded: later stages and what was written survive it
            seconds = time.perf_counter() - t0
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log(f"{pad}{stage.name}: FAILED after {seconds:.1f} s: {message}")
            log("".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3)).rstrip())
            record(StageOutcome(stage.name, "failed", seconds, message, rec.result_path, rec.figures, rec.headline), i)
            if rec.partial is not None:
                results[stage.name] = rec.partial
            ended_early = ended_early or fail_fast
            continue
        seconds = time.perf_counter() - t0
        log(f"{pad}{stage.name}: ok in {seconds:.1f} s")
        record(StageOutcome(stage.name, "ok", seconds, "", rec.result_path, rec.figures, rec.headline), i)
    return SequenceResult(outcomes, results, stopped)
