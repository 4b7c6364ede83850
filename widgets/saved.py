"""Finding the results an earlier run saved (the Workbench, ``workbench demo`` or the CLI), so a
panel can open them without recomputing.

The layouts written by the library (see :mod:`workbench.pipeline` and :mod:`workbench.cli`)::

    <run>/compare.json or <run>/train/compare.json        Comparison
    <run>/export/export.json or <run>/export.json          ExportResult
    <run>/fusion/fusion.json or beside export.json         FusionReport
    <run>/quantize/<preset>/quantize.json                  QuantResult (newest is opened)
    <run>/search/search.json                               SearchResult

This only looks for files by those names; reading them is ``workbench``'s ``load_*`` functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

STAGE_FILES = {
    "compare": "compare.json",
    "export": "export.json",
    "fusion": "fusion.json",
    "quantize": "quantize.json",
    "search": "search.json",
}


def _newest(paths: list[Path]) -> Optional[Path]:
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def find_saved(run_dir: str | os.PathLike) -> dict[str, Path]:
    """``{stage: path of its saved result}`` for the stages found under ``run_dir``.

    Raises ``FileNotFoundError`` when ``run_dir`` is not a folder.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no run folder at {root}: pass a folder written by the Workbench, `workbench demo` or the CLI "
            "(see `workbench runs` for the list)"
        )
    found: dict[str, Path] = {}
    for stage, name in STAGE_FILES.items():
        if stage == "quantize":
            # quantize/<preset>/quantize.json (and re-quantizations below them), not the search candidates
            candidates = [p for p in root.glob("quantize/**/quantize.json")] or list(root.glob(name))
        else:
            candidates = list(root.glob(name)) or list(root.glob(f"*/{name}"))
        path = _newest(candidates)
        if path is not None:
            found[stage] = path
    return found
