"""One writer per run folder: ``flock(LOCK_EX | LOCK_NB)`` on ``.workbench.lock``, which names the holder.

The kernel releases a flock when its process dies (even under SIGKILL), so a dead holder's lock is simply taken;
a second writer does not wait (:class:`RunLocked` names the holder); child processes (torchrun workers) write under
their parent's lock. With the lock held nobody else can be writing, so taking it removes a killed writer's temporaries.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Optional

from .atomic import pid_alive
from .open import RunError

LOCK_FILE = ".workbench.lock"


# folders whose lock this process holds (real path -> how many holders inside it): taking it again
# nests instead of deadlocking against itself (flock locks of two opens of one file conflict)
_HELD: dict[str, int] = {}


class RunLocked(RunError):
    """Another live process holds the run folder's lock."""


def _holder(path: Path) -> tuple[Optional[int], str]:
    try:
        text = path.read_text()
    except OSError:
        return None, ""
    first, _, rest = text.partition("\n")
    try:
        return int(first.strip()), rest.strip()
    except ValueError:
        return None, rest.strip()


class run_lock:
    """Hold ``folder``'s lock while writing; ``command`` names the holder, ``flag`` (``--run-dir``) the refusal's fix."""

    def __init__(self, folder: str | os.PathLike, command: str = "workbench", flag: str = "--run-dir",
                 clean: bool = True):
        self.folder = Path(folder)
        self.command = command
        self.flag = flag
        self.clean = clean
        self.note: Optional[str] = None
        self._fd: Optional[int] = None
        self._key = ""
        self._nested: Optional[str] = None

    @property
    def path(self) -> Path:
        return self.folder / LOCK_FILE

    def acquire(self) -> "run_lock":
        import fcntl

        key = os.path.realpath(self.folder)
        if key in _HELD:  # this process holds it already (a stage inside a command): nested, a no-op
            _HELD[key] += 1
            self._nested = key
            return self
        made = first_missing(self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        if made is not None:
            CREATED.append(made)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            pid, what = _holder(self.path)
            who = f"PID {pid}" if pid is not None else "another process"
            raise RunLocked(
                f"{self.folder} is being written by {who}{f' ({what})' if what else ''}; two writers in one folder "
                f"spoil each other's results and timings: wait for it to finish, or pass another {self.flag}") from None
        old_pid, old_what = _holder(self.path)
        if old_pid is not None and old_pid != os.getpid() and not pid_alive(old_pid):
            self.note = (f"took over the lock of {self.folder} left by PID {old_pid}"
                         f"{f' ({old_what})' if old_what else ''}, which is no longer running")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{self.command}\n".encode(), 0)
        self._fd = fd
        _HELD[key] = 1
        self._key = key
        from .atomic import pause_at

        try:
            if self.clean:
                clean_stale(self.folder)
            pause_at("locked")  # test hook: hold the lock at a moment the test controls (WORKBENCH_PAUSE_AT)
        except BaseException:  # Ctrl-C or a failure before the with block starts: its __exit__ would never run
            self.release()
            raise
        return self

    def release(self) -> None:
        if self._nested is not None:
            _HELD[self._nested] -= 1
            self._nested = None
            return
        if self._fd is None:
            return
        _HELD.pop(self._key, None)
        import fcntl

        try:
            os.ftruncate(self._fd, 0)  # the file stays (removing it would race a waiting locker); it names nobody
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "run_lock":
        return self if (self._fd is not None or self._nested is not None) else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


# folders this process created for a run (new run folders, a --run-dir that did not exist): a command
# refused as bad input removes those still empty, so a refusal leaves nothing behind (drop_if_empty)
CREATED: list[Path] = []


def first_missing(folder: str | os.PathLike) -> Optional[Path]:
    """The outermost folder of ``folder``'s path that does not exist yet (what mkdir -p would create)."""
    folder = Path(os.path.abspath(folder))
    missing = None
    for p in (folder, *folder.parents):
        if p.exists() or p.is_symlink():
            break
        missing = p
    return missing


def drop_if_empty(folder: str | os.PathLike) -> bool:
    """Remove ``folder`` when it holds nothing but its lock file, temporaries and empty folders; True if removed."""
    folder = Path(folder)
    if not folder.is_dir() or folder.is_symlink():
        return False
    for _dir, _dirs, files in os.walk(folder):
        if any(f != LOCK_FILE and not _is_temporary(f) for f in files):
            return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def drop_created_if_empty() -> list[Path]:
    """After a refusal: remove the run folders this process created that are still empty; returns them."""
    dropped = [p for p in reversed(CREATED) if drop_if_empty(p)]
    CREATED.clear()
    return dropped


def _is_temporary(name: str) -> bool:
    return name.startswith(".") and (".tmp" in name or name.endswith(".old"))


def clean_stale(folder: str | os.PathLike, max_depth: int = 4) -> list[Path]:
    """Remove temporaries a killed writer left under ``folder`` (call with its lock held); returns them."""
    from .atomic import clean_report_generations

    folder = Path(folder)
    removed = clean_report_generations(folder)

    def walk(d: Path, depth: int) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            p = Path(e.path)
            if _is_temporary(e.name):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
                removed.append(p)
            elif depth < max_depth and e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
                walk(p, depth + 1)

    walk(folder, 0)
    return removed
