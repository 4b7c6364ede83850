"""One training run in its own process (``python -m workbench.train`` -> :func:`child_main`): progress and turn
requests go out as prefixed lines on stdout, turns come in on stdin (the parent: :mod:`workbench.train.lockstep`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Optional

from .. import runs
from ..core import serial
from ..runs.layout import TRAIN_FILE
from .config import Backend, TrainConfig
from .loop import ISOLATED_ENV, StepGate, run_training
from .results import Progress, TrainRun, load_train_run

PROGRESS_PREFIX = "WORKBENCH_PROGRESS "

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(sig: int = 9) -> bool:
    """Ask Linux for ``sig`` when the parent dies, so a child never outlives a killed ``workbench`` writing into
    its run folder. Exits at once when the parent is already gone; False off Linux."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent == 1 or os.getppid() != parent:  # the parent died before the call took effect
        os._exit(1)
    return True


def child_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The environment of a child ``python -m workbench...``: it imports this very copy of workbench (its
    parent folder first on PYTHONPATH) and runs in the caller's directory, so relative paths mean the same."""
    here = str(Path(__file__).resolve().parents[2])  # this file is <root>/workbench/train/process.py
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return env


def child_process(cfg: TrainConfig, backend: Backend, run_dir: Path, env: Optional[dict[str, str]] = None):
    """Start ``python -m workbench.train --lockstep`` for one run; ``(process, config_path)``."""
    import subprocess

    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = runs.atomic_write_json(run_dir / f".{backend.value}.config.json", cfg)
    cmd = [sys.executable, "-m", "workbench.train", "--config", str(cfg_path), "--backend", backend.value, "--run-dir", str(run_dir),
           "--lockstep"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=child_env(env),
                            stdin=subprocess.PIPE, preexec_fn=die_with_parent)
    return proc, cfg_path


def drain_stderr(proc, tail: list[str], keep: int = 60) -> threading.Thread:
    """Read ``proc``'s stderr on a thread, keeping its last ``keep`` lines in ``tail``."""
    def drain():
        for line in proc.stderr:
            tail.append(line)
            del tail[:-keep]

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    return t


def child_result(proc, backend: Backend, run_dir: Path, cfg_path: Path, err_tail: list[str]) -> TrainRun:
    """The run a finished child saved, or an error carrying the end of its stderr."""
    rc = proc.wait()
    cfg_path.unlink(missing_ok=True)
    result = run_dir / backend.value / TRAIN_FILE
    if rc != 0 or not result.is_file():
        raise RuntimeError(
            f"the {backend.value} training process exited with code {rc} without a result at {result}; "
            f"its last output:\n{''.join(err_tail[-25:])}"
        )
    return load_train_run(result)


GATE_PREFIX = "WORKBENCH_GATE "


class StdioGate(StepGate):
    """The child's side of :mod:`workbench.train.lockstep`: asks for its turn on stdout, waits for a line on
    stdin; end of stdin means run freely from now on."""

    def __init__(self, stdin=None, stdout=None) -> None:
        self._in = stdin if stdin is not None else sys.stdin
        self._out = stdout if stdout is not None else sys.stdout
        self._held = False
        self._free = False

    def next(self, phase: str) -> None:
        self.release()
        if self._free:
            return
        print(f"{GATE_PREFIX}ready {phase}", file=self._out, flush=True)
        if not self._in.readline():
            self._free = True
            return
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            print(f"{GATE_PREFIX}done", file=self._out, flush=True)


def child_main(argv: Optional[list[str]] = None) -> int:
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="python -m workbench.train", description="one training run (used by run_lockstep)")
    parser.add_argument("--config", required=True, help="TrainConfig as JSON (workbench.core.serial.to_dict)")
    parser.add_argument("--backend", required=True, choices=[b.value for b in Backend])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--lockstep", action="store_true", help="take turns: ask for each phase on stdout, wait for a line on stdin")
    args = parser.parse_args(argv)
    cfg = serial.from_dict(TrainConfig, json.loads(Path(args.config).read_text()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    os.environ[ISOLATED_ENV] = "1"

    def emit(p: Progress) -> None:
        print(PROGRESS_PREFIX + json.dumps(serial.to_dict(p), allow_nan=False), flush=True)

    run_training(cfg, args.backend, args.run_dir, progress=emit, stop=stop, gate=StdioGate() if args.lockstep else None)
    return 0  # a failed run is a result too (saved with its reason); the parent reads train.json
