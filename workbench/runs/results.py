"""Saving and loading a stage's result: a frozen dataclass as JSON, paths inside the run relative."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, TypeVar

from .. import serial
from .atomic import atomic_write_text
from .relpaths import relativize, resolve

T = TypeVar("T")


def save_result(result: Any, path: str | os.PathLike) -> Path:
    """Write a result dataclass as JSON (atomically). Paths inside the run folder are stored
    relative to it (:mod:`workbench.runs.relpaths`), so the folder can be moved and continued."""
    data = relativize(serial.to_dict(result), path)
    return atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def read_result_json(path: str | os.PathLike) -> Any:
    """The JSON of a saved result with its run-relative paths resolved (absolute again)."""
    path = Path(path)
    return resolve(json.loads(path.read_text()), path)


def load_result(cls: type[T], path: str | os.PathLike, name: Optional[str] = None) -> T:
    """Read a result dataclass back from the JSON written by :func:`save_result`.

    ``path`` is the JSON file or, when ``name`` is given, the folder holding ``name``."""
    path = Path(path)
    if name is not None and path.is_dir():
        path = path / name
    if not path.is_file():
        raise FileNotFoundError(
            f"no saved result at {path}: run the stage first (or pass the run folder it wrote)"
        )
    return serial.from_dict(cls, read_result_json(path))
