"""What every command shares: JSON output, the one-line error (exit code 2), the device check."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

from .. import serial


def _print_json(obj) -> None:
    print(json.dumps(serial.to_dict(obj), indent=2, allow_nan=False))


def _fail(message: str, code: int = 2) -> int:
    print(f"workbench: error: {message}", file=sys.stderr)
    return code


def _device_problem(args) -> Optional[str]:
    """The message when ``--device`` names a device that cannot be used here (checked before any work)."""
    from ..device import DeviceError, require_device

    try:
        require_device(getattr(args, "device", None) or "cpu")
    except DeviceError as exc:
        return str(exc)
    return None


def _run_of(path: Path):
    """The run ``path`` belongs to (its root, a stage folder or a result file), or None outside a run."""
    from ..flow import open_run
    from ..runs import RunError

    try:
        return open_run(path)
    except RunError:
        return None


def _stage_dir(run_dir: Path, stage: str) -> Path:
    """Where ``stage`` writes in the run ``run_dir`` (given as its root or any of its stage folders)."""
    from ..runs import layout

    return (layout.root_by_name(run_dir) or run_dir) / layout.STAGE_DIRS[stage]


def _say(note: str, as_json: bool) -> None:
    """Say which input a command took (on stderr under --json, so stdout stays one JSON document)."""
    print(note, file=sys.stderr if as_json else sys.stdout, flush=True)
