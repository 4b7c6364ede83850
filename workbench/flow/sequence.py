"""The one stage sequencer: every front that runs stages in order gets its list of :class:`Stage`
from the stage registry (``workbench.workflows.stages.stages_for``) and calls :func:`run_stages`.

    done = run_stages(stages_for("demo", job), log=print, stop=stop_event, resume=True)
    done.results["fuse"], done.outcomes

What it does for every front alike:

- **hand-offs**: ``needs`` names the earlier stages whose result a stage takes; when one of them
  failed, was skipped or returned nothing, the stage is skipped with the reason and the stages that
  do not need it still run. *What* it takes is :mod:`workbench.flow.handoffs`'s rule.
- **failures recorded, not fatal**: an exception is recorded with its message (the end of its
  traceback in the log), so what was written survives it; ``fatal`` exception types propagate, and
  ``fail_fast`` stops the sequence at the first failure (the ``Workbench``'s Run all).
- **progress**: ``on_stage(index, total, name, status)`` before and after each stage.
- **stop**: a set ``stop`` event ends the sequence between stages; the rest are recorded as stopped.
- **resume**: with ``resume=True`` a stage whose ``resume`` loader finds its saved result is not
  run again (status ``resumed``).
- **the report at the end**: ``finally_`` stages run whatever happened before them, stopped or not.
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
    """What a running stage fills in for the front's summary (``demo.json``, ``summary.md``).

    ``inputs``: the results of the stages before it, by name (what it takes; read, not written);
    ``before``: their outcomes (what a report stage at the end reports).
    ``partial``: what later stages may still take when the stage then fails (the demo's fine-tune
    fails when one backend did not finish, and export takes a backend that did)."""

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
    """One step of a front's list (built by the registry's ``stages_for``, not by hand): ``run(record)``
    returns the stage's result; ``resume()`` the result an earlier run saved (None: run it)."""

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
    """Why ``stage`` cannot run (a need that failed, was skipped or returned nothing), or ""."""
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
    """Run ``stages`` in order (see the module doc). ``style``: ``"demo"`` (``== name ==`` headings)
    or ``"steps"`` (``[i/n] name ...``, the audit's)."""
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
