"""Saving and loading a stage's result: a frozen dataclass as JSON, paths inside the run relative."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, TypeVar

from ..core import serial
from .atomic import atomic_write_text
from .open import RunError
from .relpaths import relativize, resolve

T = TypeVar("T")


def save_result(result: Any, path: str | os.PathLike) -> Path:
    """Write a result dataclass as JSON, paths inside the run relative to it (:mod:`workbench.runs.relpaths`)."""
    data = relativize(serial.to_dict(result), path)
    return atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def read_result_json(path: str | os.PathLike) -> Any:
    """The JSON of a saved result with its run-relative paths resolved (absolute again)."""
    path = Path(path)
    try:
        return resolve(json.loads(path.read_text(encoding="utf-8")), path)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise CorruptResult(_corrupt(path, f"not valid JSON: {exc}")) from exc


def load_result(cls: type[T], path: str | os.PathLike, name: Optional[str] = None) -> T:
    """Read a result dataclass back; ``path`` is the JSON file or, with ``name``, the folder holding it."""
    path = Path(path)
    if name is not None and path.is_dir():
        path = path / name
    if not path.is_file():
        raise FileNotFoundError(
            f"no saved result at {path}: run the stage first (or pass the run folder it wrote)"
        )
    data = read_result_json(path)
    try:
        return serial.from_dict(cls, data)
    except serial.OutdatedKey as exc:
        raise CorruptResult(f"{path}: {exc}; run `{_redo(path)}` again to write it afresh, or rename the key in the file") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptResult(_corrupt(path, f"not a saved {cls.__name__} ({type(exc).__name__}: {exc})")) from exc


class CorruptResult(RunError):
    """A result file of a run that cannot be read back (cut short, edited, or from another program)."""


def _redo(path: Path) -> str:
    from . import layout

    stage = next((s for s, name in layout.STAGE_FILES.items() if name == path.name), None)
    redo = {"export": "workbench export --model MODEL --run-dir RUN", "fusion": "workbench fuse RUN",
            "quantize": "workbench quantize RUN", "search": "workbench quantize RUN --search",
            "compare": "workbench compare --run-dir RUN"}.get(stage or "", "the stage that wrote it")
    return redo.replace("RUN", str(layout.root_for_file(path)))


def _corrupt(path: Path, why: str) -> str:
    return (f"{path} is corrupt ({why[:160]}): it was cut short or edited. Restore it from a copy, or delete it and "
            f"run `{_redo(path)}` again to write it afresh")
