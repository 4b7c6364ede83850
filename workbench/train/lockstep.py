"""Runs that take turns: several training runs, each in its own process, stepped one at a time.

Each ``python -m workbench.train --lockstep`` child asks for its turn before every phase that uses the CPU;
the parent grants one turn at a time, in an order rotated each round. Why: runs trained one after the other
see different machine loads, and runs interleaved in one process share thread pools (an ORT session's
spinning workers take cores from the next eager step). Here every step runs alone, next in time to the
other runs' same step, so steps pair up for an interval, and peak memory and start-up are each run's own.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from ..core import serial
from .config import Backend, TrainConfig, check_backend
from .loop import LOCKSTEP_ENV
from .process import GATE_PREFIX, PROGRESS_PREFIX, child_process, child_result, drain_stderr
from .results import Progress, ProgressFn, TrainRun


@dataclass(frozen=True)
class LockstepJob:
    """One run of a lockstep group; it writes ``<run_dir>/<backend>/`` as :func:`workbench.train.run_training`."""

    cfg: TrainConfig
    backend: Backend
    run_dir: Path
    env: Optional[dict[str, str]] = None


class _Child:
    def __init__(self, job: LockstepJob, group: str, progress: Optional[ProgressFn]) -> None:
        self.job = job
        self.events: queue.Queue = queue.Queue()
        env = {**(job.env or {}), LOCKSTEP_ENV: group}
        self.proc, self.cfg_path = child_process(job.cfg, job.backend, job.run_dir, env)
        self.err_tail: list[str] = []
        self.t_err = drain_stderr(self.proc, self.err_tail)
        self.progress = progress
        self.turns = 0
        self.t_out = threading.Thread(target=self._read, daemon=True)
        self.t_out.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(GATE_PREFIX):
                self.events.put(line[len(GATE_PREFIX):].split(" ", 1)[0].strip())
            elif line.startswith(PROGRESS_PREFIX) and self.progress is not None:
                self.progress(serial.from_dict(Progress, json.loads(line[len(PROGRESS_PREFIX):])))
        self.events.put("eof")

    def wait_for(self, stop: Optional[threading.Event]) -> str:
        """The child's next gate event: "ready", "done" or "eof" (its output ended)."""
        while True:  # stop first: a child that steps fast keeps the queue full, and a stop must still be seen
            if stop is not None and stop.is_set():
                return "stop"
            try:
                return self.events.get(timeout=0.2)
            except queue.Empty:
                pass

    def grant(self) -> None:
        self.turns += 1
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # the child already exited: its "eof" comes next
            pass

    def let_go(self, terminate: bool = False) -> None:
        """No more turns: close stdin (the child runs freely) and, on stop, ask it to stop."""
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
        if terminate and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)


def run_lockstep(
    jobs: Sequence[LockstepJob],
    progress: Optional[ProgressFn] = None,
    stop: Optional[threading.Event] = None,
) -> list[TrainRun]:
    """Train every job in its own process, one phase at a time in rotation; the runs in the order of ``jobs``.
    A child that dies without a result raises, with the end of its stderr, after the others finished."""
    if not jobs:
        raise ValueError("run_lockstep needs at least one job")
    # every job checked before any process starts: a combination that cannot run starts none of them
    jobs = [LockstepJob(j.cfg, check_backend(j.cfg, j.backend), Path(j.run_dir).resolve(), j.env) for j in jobs]
    group = uuid.uuid4().hex[:12] if len(jobs) > 1 else ""  # a run on its own takes turns with nobody
    if progress is not None:  # each child's output is read on its own thread: one report at a time
        lock, report = threading.Lock(), progress

        def progress(p: Progress) -> None:
            with lock:
                report(p)
    children = [_Child(job, group, progress) for job in jobs]
    active = list(range(len(children)))
    stopped = False
    try:
        rnd = 0
        while active and not stopped:
            k = rnd % len(active)
            for i in active[k:] + active[:k]:
                ev = children[i].wait_for(stop)  # "ready" for a turn, "eof" or "stop"
                if ev not in ("stop", "eof"):
                    children[i].grant()
                    ev = children[i].wait_for(stop)  # "done", or "eof" if it exited during its turn
                stopped = ev == "stop"
                if stopped:
                    break
                if ev == "eof":
                    active.remove(i)
            rnd += 1
    finally:
        for child in children:
            child.let_go(terminate=stopped)
    results: list[TrainRun] = []
    errors: list[str] = []
    for child in children:
        child.t_out.join()
        child.t_err.join(timeout=5)
        try:
            results.append(child_result(child.proc, child.job.backend, child.job.run_dir, child.cfg_path, child.err_tail))
        except RuntimeError as exc:
            errors.append(str(exc))
    if errors:
        raise RuntimeError("; ".join(errors))
    return results


def run_training_isolated(cfg: TrainConfig, backend: Backend | str, run_dir: str | os.PathLike,
                          progress: Optional[ProgressFn] = None, stop: Optional[threading.Event] = None,
                          env: Optional[dict[str, str]] = None) -> TrainRun:
    """:func:`workbench.train.run_training` in a fresh Python process; ``stop`` lets a first step still exporting
    or compiling finish first; ``env`` e.g. a fresh ``TORCHINDUCTOR_CACHE_DIR`` for a cold start."""
    (run,) = run_lockstep([LockstepJob(cfg, backend, Path(run_dir), env)], progress=progress, stop=stop)
    return run


def interleaved_runs(a: TrainRun, b: TrainRun) -> bool:
    """Whether two runs took turns in one lockstep group (their steps pair up in time)."""
    ea, eb = a.environment or {}, b.environment or {}
    return bool(ea.get("lockstep")) and ea.get("lockstep") == eb.get("lockstep") and ea.get("pid") != eb.get("pid")


