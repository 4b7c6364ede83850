"""The run root of any of its folders, and :class:`RunError` (``runs`` imports no stage: ``flow.handoffs`` opens results)."""

from __future__ import annotations

import os
from pathlib import Path

from . import layout


class RunError(FileNotFoundError):
    """The path is not a run folder, a folder of one, or a result file in one (one clear line)."""


def _holds_results(folder: Path) -> bool:
    return folder.is_dir() and (bool(layout.result_files(folder, any_folder=False))
                                or any(folder.glob(f"{layout.TRAIN_DIR}/*/{layout.TRAIN_FILE}")))


def find_root(path: str | os.PathLike) -> Path:
    """The run root of ``path``; :class:`RunError` when it does not exist or lies in no run folder."""
    given = Path(path)
    if not given.exists():
        raise RunError(f"no such file or folder: {str(path)!r}; pass a run folder (see `workbench runs`), one of its "
                       f"stage folders ({', '.join(layout.STAGE_DIRS.values())}) or a result file in it")
    start = Path(os.path.abspath(given if given.is_dir() else given.parent))
    by_name = layout.root_by_name(start)
    if by_name is not None and _holds_results(by_name):
        return by_name
    if _holds_results(start):  # a run root, or an older flat run (results at its root)
        return start
    wanted = ", ".join(p for places in layout.RESULT_PLACES.values() for p in places[:1])
    raise RunError(f"{str(path)!r} holds no saved result and lies in no run folder (looked for {wanted}); pass a "
                   "folder written by `workbench demo`, the Workbench or the CLI (`workbench runs` lists them)")
