"""Run folders: where every stage writes, atomically, and how a run is opened again from any of its
folders (opening a run with its results is ``workbench.flow.handoffs.open_run``: runs/ imports no stage).

Files:
    atomic.py     atomic writes (file, JSON, array, copy, a path a library writes, a folder, a set of files)
    lock.py       the run folder's exclusive lock; stale temporaries removed when it is taken
    layout.py     the run layout: folders and files of each stage, older places still read
    relpaths.py   paths inside a run saved relative to it, resolved on load
    results.py    save_result / load_result
    open.py       find_root and RunError: the run root from any of its folders
    __init__.py   run folders: create, list, find results
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from . import layout
from .atomic import atomic_copy, atomic_dir, atomic_path, atomic_write_bytes, atomic_write_json, atomic_write_npy, atomic_write_text
from .lock import CREATED, RunLocked, drop_created_if_empty, first_missing, run_lock
from .open import RunError
from .results import load_result, read_result_json, save_result

__all__ = [
    "DEFAULT_ROOT", "default_out", "RunError", "RunInfo", "atomic_copy", "atomic_dir", "atomic_path", "atomic_write_bytes",
    "atomic_write_json", "atomic_write_npy", "atomic_write_text", "find_results", "layout", "list_runs",
    "load_result", "new_run_dir", "read_result_json", "save_result", "RunLocked", "drop_created_if_empty", "run_lock",
]

DEFAULT_ROOT = Path(os.environ.get("WORKBENCH_RUNS", "runs"))


def default_out(stage_dir: str) -> Path:
    """Where a stage writes when no folder is given (``WORKBENCH_RUNS`` moves ``DEFAULT_ROOT``)."""
    return DEFAULT_ROOT / stage_dir


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def new_run_dir(label: str = "run", root: str | os.PathLike | None = None) -> Path:
    """Create and return a fresh run folder ``<root>/<UTC timestamp>-<label>``."""
    root = Path(root) if root is not None else DEFAULT_ROOT
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = f"{stamp}-{_SAFE.sub('-', label).strip('-') or 'run'}"
    for i in range(1000):
        path = root / (base if i == 0 else f"{base}-{i}")
        made = first_missing(path)
        try:
            path.mkdir(parents=True, exist_ok=False)
            CREATED.append(made or path)  # removed again if the command is refused before writing anything
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a new run folder under {root}")


def find_results(run_dir: str | os.PathLike) -> dict[str, Path]:
    """``{stage: path of its newest saved result}`` under the run root ``run_dir`` (:mod:`workbench.runs.layout`)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no run folder at {root}: pass a folder written by the Workbench, `workbench demo` or the CLI "
            "(see `workbench runs` for the list)"
        )
    return layout.result_files(root)


@dataclass(frozen=True)
class RunInfo:
    path: Path
    stages: tuple[str, ...]
    modified: float


def list_runs(root: str | os.PathLike | None = None) -> list[RunInfo]:
    """Run folders under ``root``, newest first, with the stage results each holds."""
    root = Path(root) if root is not None else DEFAULT_ROOT
    if not root.is_dir():
        return []
    out = []
    for child in root.iterdir():
        if child.is_dir() and not child.name.startswith("."):
            stages = {p.stem for p in child.glob("*.json")} | set(find_results(child))
            out.append(RunInfo(child, tuple(sorted(stages)), child.stat().st_mtime))
    return sorted(out, key=lambda r: r.modified, reverse=True)

