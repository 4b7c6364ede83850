"""Paths inside a run folder are saved relative to it, so a moved or copied run can be continued; the JSON records
which values were rewritten and the root relative to the file (``"_run_relative": {"root": "..", "paths": [...]}``),
and only those are resolved again: paths outside the run, and older results without the mark, load unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from .layout import root_for_file

MARK = "_run_relative"


def _inside(value: str, roots: tuple[str, ...], cwd: str) -> Optional[str]:
    """``value`` relative to the run root when inside it; ``roots``: the root as given and resolved (either may prefix)."""
    if not value or len(value) > 4096 or "\n" in value or "://" in value:
        return None
    if os.path.isabs(value):
        full = os.path.normpath(value)
    else:  # a relative path is taken only when it has a folder part and exists (a bare word is no path)
        if "/" not in value and os.sep not in value:
            return None
        full = os.path.normpath(os.path.join(cwd, value))
        if not os.path.exists(full):
            return None
    for root in roots:
        if full == root:
            return "."
        if full.startswith(root.rstrip(os.sep) + os.sep):
            return Path(os.path.relpath(full, root)).as_posix()
    return None


def relativize(data: Any, json_path: str | os.PathLike, root: str | os.PathLike | None = None) -> Any:
    """A copy of ``serial.to_dict`` output with paths inside the run (default root: from ``json_path``) relative."""
    if not isinstance(data, dict):
        return data
    json_path = Path(os.path.abspath(json_path))
    root = Path(os.path.abspath(root)) if root is not None else root_for_file(json_path)
    roots, cwd = tuple(dict.fromkeys((os.path.normpath(root), os.path.realpath(root)))), os.getcwd()
    pointers: list[list] = []

    def walk(obj: Any, where: list) -> Any:
        if isinstance(obj, dict):
            return {k: walk(v, [*where, k]) for k, v in obj.items()}
        if isinstance(obj, list):
            return [walk(v, [*where, i]) for i, v in enumerate(obj)]
        if isinstance(obj, str) and where:
            rel = _inside(obj, roots, cwd)
            if rel is not None:
                pointers.append(where)
                return rel
        return obj

    out = walk({k: v for k, v in data.items() if k != MARK}, [])
    if pointers:
        out[MARK] = {"root": Path(os.path.relpath(root, json_path.parent)).as_posix(), "paths": pointers}
    return out


def resolve(data: Any, json_path: str | os.PathLike) -> Any:
    """``data`` read from ``json_path`` with its run-relative paths made absolute under where the file lies now."""
    if not isinstance(data, dict) or not isinstance(data.get(MARK), dict):
        return data
    mark = data.pop(MARK)
    root = Path(os.path.abspath(Path(json_path).parent / mark.get("root", ".")))
    for pointer in mark.get("paths", []):
        obj = data
        try:
            for key in pointer[:-1]:
                obj = obj[key]
            value = obj[pointer[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # a hand-edited file: the value is gone, nothing to resolve
        if isinstance(value, str):
            obj[pointer[-1]] = os.path.normpath(root / value) if value != "." else str(root)
    return data
