"""The session every stage's session is built on, held in plain Python so that it runs and is tested without a widget."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Optional

from .. import runs

#: ``progress(done, total, eta_s, detail)``: where a session reports how far its work is.
Progress = Callable[[int, int, Optional[float], str], None]


def no_progress(done: int, total: int, eta_s: Optional[float] = None, detail: str = "") -> None:
    """The progress callback of a session nobody watches."""


class Session:
    """One stage's state. ``run_dir``: a folder, a function returning one (a notebook Workbench shares its
    run folder this way), or None for a new folder under ``runs/`` made on the first write."""

    #: The inputs a caller may set by name (a panel's options of these names are the session's).
    INPUTS: ClassVar[tuple[str, ...]] = ("run_dir",)
    #: The label of a run folder this session makes (``runs/<time>-<label>``).
    LABEL: ClassVar[str] = "run"
    #: What :meth:`writing` names the holder of the run folder's lock as.
    COMMAND: ClassVar[str] = "a notebook session"

    def __init__(self, *, run_dir: Any = None, progress: Optional[Progress] = None) -> None:
        self.run_dir = run_dir
        self.progress: Progress = progress or no_progress
        self.stop_event = threading.Event()
        self.result: Any = None  # the latest (computed here or opened from a saved run)
        self.history: list[Any] = []  # every result kept, oldest first

    def keep(self, result: Any) -> Any:
        if result is not self.result:
            self.result = result
            self.history.append(result)
        return result

    def resolve_run_dir(self) -> Path:
        """Where this session writes: ``run_dir`` (called when a function), else a new run folder, kept."""
        given = self.run_dir() if callable(self.run_dir) else self.run_dir
        if given is None:
            given = self.run_dir = runs.new_run_dir(self.LABEL)
        return Path(given)

    @contextlib.contextmanager
    def writing(self, folder: Optional[Path] = None) -> Iterator[Path]:
        """Hold the run folder's lock while the stage writes: one writer per run folder, across processes."""
        folder = folder if folder is not None else self.resolve_run_dir()
        with runs.run_lock(folder, f"{self.COMMAND} ({self.LABEL})", flag="run_dir"):
            yield folder

    def start(self) -> None:
        self.stop_event.clear()

    def stop(self) -> None:
        """Ask the running work to stop at its next check (the library reads ``stop_event``)."""
        self.stop_event.set()

    def report(self, done: int, total: int, eta_s: Optional[float] = None, detail: str = "") -> None:
        self.progress(done, total, eta_s, detail)

    def close(self) -> None:
        """Stop every server this session started."""

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def as_saved(value: Any, cls: type, load: Callable[[Any], Any], stage: str, file_name: str, what: str) -> Any:
    """A stage result given as itself, its result file or folder, or any folder of a run (its newest ``stage`` result)."""
    import os

    from ..flow import handoffs as flow

    if isinstance(value, cls):
        return value
    if isinstance(value, (str, os.PathLike)):
        path = Path(value)
        if path.is_file() or (path / file_name).is_file():
            return load(path)
        found = getattr(flow.open_run(path), stage)()
        if found is None:
            raise InputError(f"{str(value)!r} holds no {what} ({file_name}): run that step first, or pass a run folder that "
                                    f"has one")
        return found
    raise TypeError(f"expected a {cls.__module__}.{cls.__name__} or the path of a saved {file_name} (or a run folder), "
                    f"got {type(value).__name__}")


class InputError(ValueError):
    """An input a session cannot use; the message names the value, what is allowed and what to do."""


def model_folder(model: Any) -> str:
    """``model`` as the stages read it (a Hub id: its cached folder), else an :class:`InputError`."""
    from ..models.hub import model_source
    from ..models.load import ModelError

    model = str(model).strip()
    if not model:
        raise InputError("model is empty: choose 'tiny', 'minilm' or a checkpoint folder (a training run's checkpoint/)")
    try:
        return model_source(model)
    except ModelError as exc:
        raise InputError(str(exc)) from None


class DataInput:
    """A session input ``data`` (a ``DataConfig`` or a ``DatasetDict``), loaded once until set again."""

    #: what :meth:`dataset` loads when ``data`` is None (None: the library's own default)
    DEFAULT_DATA: Any = None

    _data: Any = None
    _data_cache: Any = None

    @property
    def data(self) -> Any:
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        self._data = check_data(value)
        self._data_cache = None

    def dataset(self) -> Any:
        from ..data.load import DataConfig, load_data

        data = self._data if self._data is not None else self.DEFAULT_DATA
        if isinstance(data, DataConfig):
            if self._data_cache is None:
                self._data_cache = load_data(data)
            return self._data_cache
        return data


def check_data(data: Any) -> Any:
    """``data`` if it is None, a ``DataConfig`` or a ``DatasetDict``, else a ``TypeError`` naming them."""
    from ..data.load import DataConfig

    if data is not None and not isinstance(data, DataConfig) and not hasattr(data, "keys"):
        raise TypeError(f"data must be a workbench.data.load.DataConfig or a datasets.DatasetDict, got {type(data).__name__}")
    return data
