"""Where the workbench keeps what it caches between runs (the workshop's fine-tuned checkpoint, the
machine profile): ``$ORT_WORKBENCH_HOME``, else ``$XDG_CACHE_HOME/ort-workbench``, else
``~/.cache/ort-workbench``."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "ORT_WORKBENCH_HOME"


def workbench_home(home: str | os.PathLike | None = None) -> Path:
    """``home``, else ``$ORT_WORKBENCH_HOME``, else ``$XDG_CACHE_HOME/ort-workbench``, else
    ``~/.cache/ort-workbench``."""
    if home is not None:
        return Path(home).expanduser()
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "ort-workbench"
