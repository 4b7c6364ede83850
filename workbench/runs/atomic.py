"""Atomic writes: to a temporary in the same folder, renamed into place, so a crash or an error never
leaves half a file behind and never clobbers what an earlier step wrote."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ..core import serial


def current_umask() -> int:
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
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the file the usual permissions
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
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dst


class atomic_path:
    """A temporary path renamed to ``path`` on success, for libraries that write a file themselves (``onnx.save``)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.stem}.{os.getpid()}.{time.time_ns()}.tmp{self.path.suffix}")

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and self.tmp.exists():
            os.replace(self.tmp, self.path)
            move_external_data(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


class atomic_dir:
    """A temporary folder that replaces ``path`` once complete (``save_pretrained``); on an error ``path`` stays."""

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
        if self.path.exists() and exchange(self.tmp, self.path):
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


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported. Two
    ``os.replace`` calls would leave no folder at all to a process killed between them."""
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
    import io

    import numpy as np

    arr = np.asarray(array)
    if np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, arr)
    return atomic_write_bytes(path, buf.getvalue())


def move_external_data(tmp: Path, final: Path) -> None:
    """ONNX files over 2 GB keep weights beside them as ``<name>.data``; move that too."""
    side = tmp.with_name(tmp.name + ".data")
    if side.exists():
        os.replace(side, final.with_name(final.name + ".data"))


# ---- a set of files replaced as one unit (the report pair) ----------------------------------------
GENERATION_LINK = ".report"


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _point(link: Path, target: str) -> None:
    """Repoint ``link`` in one rename: a reader sees the old link or the new one."""
    tmp = link.with_name(f"{link.name}.{os.getpid()}.{time.time_ns()}.tmp-link")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _new_generation(folder: Path, link: str, files: dict[str, bytes]) -> str:
    """A fresh hidden generation folder holding ``files``, complete before it gets its name."""
    gen = f"{link}.{os.getpid()}.{time.time_ns()}"
    tmp = folder / f"{gen}.tmp"
    tmp.mkdir()
    try:
        for name, data in files.items():
            with open(tmp / name, "wb") as fh:
                pause_at(f"{name}:write")
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp / name, 0o666 & ~current_umask())
        os.replace(tmp, folder / gen)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return gen


def pause_at(point: str) -> None:
    """Test hook: ``WORKBENCH_PAUSE_AT=<point>=<fifo>`` announces ``point`` on the FIFO and waits there to be killed."""
    spec = os.environ.get("WORKBENCH_PAUSE_AT")
    if not spec:
        return
    where, _, fifo = spec.partition("=")
    if where != point or not fifo:
        return
    with open(fifo, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(3600)


def atomic_write_set(folder: str | os.PathLike, files: dict[str, bytes], link: str = GENERATION_LINK) -> dict[str, Path]:
    """Replace several files of ``folder`` as one unit: a reader sees all of them old or all new.

    Each ``folder/<name>`` is a symlink to ``<link>/<name>``, and ``folder/<link>`` a symlink to a hidden
    generation folder holding the whole set; a new set goes into a new generation, then the one
    ``<link>`` is renamed over, so every name switches at once."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _adopt_regular_files(folder, list(files), link)
    gen = _new_generation(folder, link, files)
    _fsync_dir(folder)
    pause_at("swap")
    _point(folder / link, gen)
    for name in files:
        p = folder / name
        if not (p.is_symlink() and os.readlink(p) == f"{link}/{name}"):
            _point(p, f"{link}/{name}")
    _fsync_dir(folder)
    clean_report_generations(folder, link)
    return {name: folder / name for name in files}


def _adopt_regular_files(folder: Path, names: list[str], link: str) -> None:
    """Plain files of the set (an older writer) become a generation of their own before the first swap."""
    plain = [n for n in names if (folder / n).is_file() and not (folder / n).is_symlink()]
    if not plain:
        return
    gen = _new_generation(folder, link, {n: (folder / n).read_bytes() for n in plain})
    _point(folder / link, gen)
    for n in plain:
        _point(folder / n, f"{link}/{n}")


def clean_report_generations(folder: str | os.PathLike, link: str = GENERATION_LINK, keep: int = 1) -> list[Path]:
    """Remove half-written generations and all but the current and ``keep`` newest (a reader of those can finish)."""
    folder = Path(folder)
    current = os.readlink(folder / link) if (folder / link).is_symlink() else None
    olds = []
    removed = []
    for p in folder.glob(f"{link}.*"):
        if p.name == current:
            continue
        if p.name.endswith(".tmp") or ".tmp-link" in p.name:
            if _writer_alive(p.name, link):
                continue  # another process is writing its set right now (a notebook beside the CLI)
            (shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True))
            removed.append(p)
        elif p.is_dir():
            olds.append(p)
    olds.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    if current is not None and (folder / current).is_dir():
        # a complete generation newer than the current one was never swapped in (its writer was killed): an orphan
        now = (folder / current).stat().st_mtime
        orphans = [p for p in olds if p.stat().st_mtime > now]
        for p in orphans:
            if not _writer_alive(p.name, link):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        olds = [p for p in olds if p not in orphans]
    for p in olds[keep:]:
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def pid_alive(pid) -> bool:
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _writer_alive(name: str, link: str) -> bool:
    """Whether the process that named a temporary ``<link>.<pid>.<ns>...`` is still running (not us)."""
    try:
        pid = int(name[len(link) + 1:].split(".")[0])
    except ValueError:
        return False
    return pid != os.getpid() and pid_alive(pid)
