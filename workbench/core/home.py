"""Where the workbench caches between runs; ``ORT_WORKBENCH_HOME``, the old name of ``WORKBENCH_HOME``, is still read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HOME_ENV = "WORKBENCH_HOME"
OLD_HOME_ENV = "ORT_WORKBENCH_HOME"
_NOTED: list[str] = []


def workbench_home(home: str | os.PathLike | None = None) -> Path:
    if home is not None:
        return Path(home).expanduser()
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    if os.environ.get(OLD_HOME_ENV):
        if not _NOTED:
            _NOTED.append(OLD_HOME_ENV)
            print(f"note: {OLD_HOME_ENV} is the old name of {HOME_ENV}; it is still read, rename it", file=sys.stderr)
        return Path(os.environ[OLD_HOME_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "ort-workbench"
