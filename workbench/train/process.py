"""One backend in its own process: :func:`run_training_isolated` starts ``python -m workbench.train``
(``workbench/train/__main__.py`` -> :func:`child_main`), which trains and saves the run; progress
comes back as JSON lines on its stdout.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from .. import runs
from ..core import serial
from ..runs.layout import TRAIN_FILE
from .config import Backend, TrainConfig, check_backend
from .loop import ISOLATED_ENV, StepGate, run_training
from .results import Progress, ProgressFn, TrainRun, load_train_run

PROGRESS_PREFIX = "WORKBENCH_PROGRESS "

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(sig: int = 9) -> bool:
    """Ask Linux to send this process ``sig`` (SIGKILL by default) when its parent dies, so a training
    child or a torchrun worker never outlives a killed ``workbench`` and goes on writing into its run
    folder. Used as ``preexec_fn`` (in the child before it runs Python) and by each torchrun worker.
    Exits at once when the parent is already gone; False where the call does not exist (not Linux)."""
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


def child_process(cfg: TrainConfig, backend: Backend, run_dir: Path, env: Optional[dict[str, str]] = None,
                  lockstep: bool = False):
    """Start ``python -m workbench.train`` for one run; returns ``(process, config_path)``. Its stdout
    carries progress (and with ``lockstep`` its turn requests) as prefixed lines; stdin is a pipe only
    with ``lockstep`` (the turns are granted there)."""
    import subprocess

    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = runs.atomic_write_json(run_dir / f".{backend.value}.config.json", cfg)
    cmd = [sys.executable, "-m", "workbench.train", "--config", str(cfg_path), "--backend", backend.value, "--run-dir", str(run_dir)]
    if lockstep:
        cmd.append("--lockstep")
    # The child runs in the caller's working directory (relative model and data paths in cfg mean
    # the same there) and imports this very copy of workbench: its parent folder goes first on
    # PYTHONPATH (a checkout, or site-packages for an installed wheel). parents[2]: this file is
    # <root>/workbench/train/process.py.
    here = str(Path(__file__).resolve().parents[2])
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (here, child_env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=child_env,
                            stdin=subprocess.PIPE if lockstep else subprocess.DEVNULL, preexec_fn=die_with_parent)
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


def run_training_isolated(
    cfg: TrainConfig,
    backend: Backend | str,
    run_dir: str | os.PathLike,
    progress: Optional[ProgressFn] = None,
    stop: Optional[threading.Event] = None,
    timeout_s: Optional[float] = None,
    env: Optional[dict[str, str]] = None,
) -> TrainRun:
    """:func:`run_training` in a fresh Python process (``python -m workbench.train``).

    Each backend then starts from a clean process: its peak RSS, thread pools and compile caches
    are its own. Progress comes back as JSON lines; ``stop`` sends SIGTERM, which the child turns
    into a clean stop between steps (a first step that is still exporting or compiling finishes
    first). ``env`` adds environment variables for the child (e.g. a fresh
    ``TORCHINDUCTOR_CACHE_DIR`` to measure a cold torch.compile start-up).
    """
    import signal

    backend = check_backend(cfg, backend)
    run_dir = Path(run_dir).resolve()
    proc, cfg_path = child_process(cfg, backend, run_dir, env)
    err_tail: list[str] = []
    t_err = drain_stderr(proc, err_tail)
    if stop is not None:
        def watch():
            while proc.poll() is None:
                if stop.wait(0.2):
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                    return

        threading.Thread(target=watch, daemon=True).start()
    t0 = time.perf_counter()
    for line in proc.stdout:
        if line.startswith(PROGRESS_PREFIX) and progress is not None:
            progress(serial.from_dict(Progress, json.loads(line[len(PROGRESS_PREFIX):])))
        if timeout_s is not None and time.perf_counter() - t0 > timeout_s:
            proc.kill()
            break
    proc.wait()
    t_err.join(timeout=5)
    return child_result(proc, backend, run_dir, cfg_path, err_tail)


GATE_PREFIX = "WORKBENCH_GATE "


class StdioGate(StepGate):
    """The child's side of :mod:`workbench.train.lockstep`: asks for its turn on stdout
    (``WORKBENCH_GATE ready <phase>``), waits for a line on stdin, and says ``WORKBENCH_GATE done``
    when it gives the turn back. End of stdin (the parent stopped, or let every run go) means: run
    freely from now on."""

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

    parser = argparse.ArgumentParser(prog="python -m workbench.train", description="one training run (used by run_training_isolated)")
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
