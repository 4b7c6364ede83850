"""Atomic writes: a file, a JSON document, a numpy array, a copy, a path a library writes, a folder.

Writes go to a temporary file in the same folder and are renamed into place, so a crash or an
error never leaves half a file behind and never clobbers what an earlier step wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import serial


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

        with atomic_path(run / layout.EXPORTED_GRAPH) as tmp:
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
