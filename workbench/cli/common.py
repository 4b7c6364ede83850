"""What every command shares: JSON output, the one-line error (exit code 2), the device check."""

from __future__ import annotations

import json
import sys
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
