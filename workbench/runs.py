"""Run folders: where every stage writes its results, atomically, and where they are found again.

A run folder is ``<root>/<timestamp>-<label>/``; each stage writes ``<stage>.json`` (its result)
plus its artifacts (checkpoints, graphs, figures). Writes go to a temporary file in the same
folder and are renamed into place, so a crash or an error never leaves half a file behind and
never clobbers what an earlier step wrote.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, TypeVar

from . import serial

T = TypeVar("T")

DEFAULT_ROOT = Path(os.environ.get("WORKBENCH_RUNS", "runs"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(serial.to_dict(obj), indent=2, allow_nan=False) + "\n")


def atomic_copy(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Copy a file into place atomically (copy to a temporary name, then rename)."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dst


class atomic_path:
    """Context manager giving a temporary path that is renamed to ``path`` on success.

    For libraries that insist on writing a file themselves (``torch.onnx.export``,
    ``onnx.save``, ``quantize_dynamic``)::

        with atomic_path(run / "model.onnx") as tmp:
            torch.onnx.export(model, args, tmp)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.stem}.{os.getpid()}.{time.time_ns()}.tmp{self.path.suffix}")

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and self.tmp.exists():
            os.replace(self.tmp, self.path)
            _move_external_data(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


class atomic_dir:
    """Context manager giving a temporary folder that replaces ``path`` on success.

    For ``save_pretrained`` and anything else that writes a whole folder::

        with atomic_dir(run / "checkpoint") as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)

    An existing ``path`` is swapped out only after the new folder is complete; on an error the
    temporary folder is removed and ``path`` is left as it was.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        stamp = f"{os.getpid()}.{time.time_ns()}"
        self.tmp = self.path.with_name(f".{self.path.name}.{stamp}.tmp")
        self._old = self.path.with_name(f".{self.path.name}.{stamp}.old")

    def __enter__(self) -> Path:
        self.tmp.mkdir(parents=True)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.path.exists() and _exchange(self.tmp, self.path):
            # one system call swapped them: ``path`` is the new folder, ``tmp`` now holds the old one
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.path.exists():
            # no atomic exchange on this system: between these two renames ``path`` is missing
            # (the old folder waits at ``.<name>.<stamp>.old``)
            os.replace(self.path, self._old)
        os.replace(self.tmp, self.path)
        shutil.rmtree(self._old, ignore_errors=True)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported.

    Replacing a folder with ``os.replace`` needs two renames (old out of the way, new in), and a
    process killed between them leaves no folder at all: a test SIGKILLs a writer there.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # glibc < 2.28, musl
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    errno = ctypes.get_errno()
    import errno as errnos

    if errno in (errnos.EINVAL, errnos.ENOSYS, errnos.ENOTSUP, errnos.EOPNOTSUPP):  # file system without it
        return False
    raise OSError(errno, os.strerror(errno), str(b))


def atomic_write_npy(path: str | os.PathLike, array) -> Path:
    """Save a numpy array (as float32 when it is floating point) atomically."""
    import io

    import numpy as np

    arr = np.asarray(array)
    if np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, arr)
    return atomic_write_bytes(path, buf.getvalue())


def _move_external_data(tmp: Path, final: Path) -> None:
    """ONNX files over 2 GB keep weights beside them as ``<name>.data``; move that too."""
    side = tmp.with_name(tmp.name + ".data")
    if side.exists():
        os.replace(side, final.with_name(final.name + ".data"))


def save_result(result: Any, path: str | os.PathLike) -> Path:
    """Write a result dataclass as JSON (atomically)."""
    return atomic_write_json(path, result)


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
    return serial.from_dict(cls, json.loads(path.read_text()))


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def new_run_dir(label: str = "run", root: str | os.PathLike | None = None) -> Path:
    """Create and return a fresh run folder ``<root>/<UTC timestamp>-<label>``."""
    root = Path(root) if root is not None else DEFAULT_ROOT
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = f"{stamp}-{_SAFE.sub('-', label).strip('-') or 'run'}"
    for i in range(1000):
        path = root / (base if i == 0 else f"{base}-{i}")
        try:
            path.mkdir(parents=True, exist_ok=False)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a new run folder under {root}")


# Where each stage's result lies in a run folder written by the demo, the Workbench or the CLI:
#   <run>/compare.json or <run>/train/compare.json        Comparison
#   <run>/export/export.json or <run>/export.json          ExportResult
#   <run>/fusion/fusion.json or beside export.json         FusionReport
#   <run>/quantize/<preset>/quantize.json                  QuantResult (the newest is taken)
#   <run>/search/search.json                               SearchResult
STAGE_FILES = {
    "compare": "compare.json",
    "export": "export.json",
    "fusion": "fusion.json",
    "quantize": "quantize.json",
    "search": "search.json",
}


def _newest(paths: list[Path]) -> Optional[Path]:
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def find_results(run_dir: str | os.PathLike) -> dict[str, Path]:
    """``{stage: path of its saved result}`` for the stages found under ``run_dir``, so a panel
    or the CLI can open them without recomputing (reading them is each stage's ``load_*``).

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
            candidates = list(root.glob("quantize/**/quantize.json")) or list(root.glob(name))
        else:
            candidates = list(root.glob(name)) or list(root.glob(f"*/{name}"))
        path = _newest(candidates)
        if path is not None:
            found[stage] = path
    return found


@dataclass(frozen=True)
class RunInfo:
    path: Path
    stages: tuple[str, ...]
    modified: float


def list_runs(root: str | os.PathLike | None = None) -> list[RunInfo]:
    """Run folders under ``root``, newest first, with the stage results each holds (top-level
    JSON files and the stage results of :func:`find_results`)."""
    root = Path(root) if root is not None else DEFAULT_ROOT
    if not root.is_dir():
        return []
    out = []
    for child in root.iterdir():
        if child.is_dir() and not child.name.startswith("."):
            stages = {p.stem for p in child.glob("*.json")} | set(find_results(child))
            out.append(RunInfo(child, tuple(sorted(stages)), child.stat().st_mtime))
    return sorted(out, key=lambda r: r.modified, reverse=True)


def iter_files(run: str | os.PathLike, pattern: str) -> Iterator[Path]:
    return iter(sorted(Path(run).glob(pattern)))
