"""What every command shares: JSON output, the one-line error (exit code 2), the device check."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

from .. import runs
from ..core import serial
from .flags import cli_only, in_flag_terms


def print_json(obj) -> None:
    print(json.dumps(serial.to_dict(obj), indent=2, allow_nan=False))


# the parsed command line of the running command (set by app.main): fail speaks in its flags
_ARGS: list = []


def fail(message: str, code: int = 2) -> int:
    print(f"workbench: error: {_in_flags(message)}", file=sys.stderr)
    return code


def _in_flags(message: str) -> str:
    """A library message with each config field this command sets by a flag named as that flag (``--text-column``)."""
    if not _ARGS or message.startswith("--config "):  # a --config file's problem names the file's keys
        return message
    entries = [e for key, value in vars(_ARGS[-1]).items() if key.startswith("_config_flags_") for e in (value or [])]
    return in_flag_terms(message, entries)


def output_flags(p, run_dir: Optional[str] = "write into this folder instead of a new one", *, new_runs: bool = True,
                 json: Optional[str] = "print the result as JSON") -> None:
    """``--runs``, ``--run-dir`` (where a command writes) and ``--json``; None leaves one out."""
    if new_runs:
        cli_only(p, "--runs", default=str(runs.DEFAULT_ROOT), help="folder for new run folders (default: $WORKBENCH_RUNS or runs)")
    if run_dir is not None:
        cli_only(p, "--run-dir", help=run_dir)
    if json is not None:
        cli_only(p, "--json", action="store_true", help=json)


def run_of(path: Path):
    """The run ``path`` belongs to (its root, a stage folder or a result file), or None outside a run."""
    from ..flow.handoffs import open_run
    from ..runs import RunError

    try:
        return open_run(path)
    except RunError:
        return None


def stage_dir(run_dir: Path, stage: str) -> Path:
    """Where ``stage`` writes in the run ``run_dir`` (given as its root or any of its stage folders)."""
    from ..runs import layout

    return (layout.root_by_name(run_dir) or run_dir) / layout.STAGE_DIRS[stage]


def say(note: str, as_json: bool) -> None:
    """Say which input a command took (on stderr under --json, so stdout stays one JSON document)."""
    print(note, file=sys.stderr if as_json else sys.stdout, flush=True)


def os_error_line(exc: OSError, args) -> Optional[str]:
    """One line for an OS error met while reading or writing files, or None for one that is not about files."""
    import errno

    folder = next((getattr(args, a) for a in ("out", "run_dir", "runs") if getattr(args, a, None)), None)
    name = exc.filename if exc.filename is not None else (f"into {folder}" if folder else "a file")
    reason = exc.strerror or str(exc)
    where = " or ".join(f for f, attr in (("--out", "out"), ("--run-dir", "run_dir"), ("--runs", "runs"))
                        if hasattr(args, attr)) or "another folder"  # the flags that choose where a command writes
    if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return (f"cannot write {name}: {reason} (the disk is full or a file-size limit was reached); nothing already "
                f"written was replaced: free some space, or pass {where} a folder on another disk")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write {name}: {reason}; pass {where} a folder you can write to"
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"cannot use {name}: {reason} (a file stands where a folder is needed); pass {where} a folder"
    if exc.errno == errno.EISDIR:
        return f"{name} is a folder where a file is needed; give a file"
    if exc.errno == errno.ENOENT:
        return f"{name}: no such file or folder; check the path"
    return None


def locked(folder, args, command: str):
    """Hold the lock of the run ``folder`` lies in (``folder`` itself outside a run's layout): one writer per run folder;
    ``RunLocked`` (the holder's PID) while a live process holds it, a note on stderr when a dead writer's is taken over.
    A refusal (exit 2) removes the part of ``folder``'s path it created when nothing was written there."""
    import time

    from ..runs import layout, run_lock
    from ..runs.lock import CREATED, first_missing

    if (made := first_missing(folder)) is not None:
        CREATED.append(made)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    lock = run_lock(layout.root_by_name(folder) or folder, f"workbench {command} (started {started})",
                    flag="--out" if hasattr(args, "out") else "--run-dir")
    lock.acquire()
    if lock.note:
        print(f"note: {lock.note}", file=sys.stderr, flush=True)
    return lock
