"""One way to open a run from any of its folders: :func:`open_run`.

``open_run(path)`` takes the run root, any stage folder (``RUN/fusion``, ``RUN/quantize/dynamic``,
``RUN/train/eager``) or a result file (``RUN/fusion/fusion.json``), finds the run root, and gives
the newest result of each stage and the newest upstream input of each stage::

    run = open_run("runs/20261123-demo/export")
    pick = run.graph_to_quantize()      # the fused graph when there is one, else the exported one
    print(pick.note)                    # "quantizing the fused graph .../fusion/model_fused.onnx"
    run.stage_dir("quantize", "dynamic")  # where the next quantization writes
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from . import layout


class RunError(FileNotFoundError):
    """The path is not a run folder, a folder of one, or a result file in one (one clear line)."""


def _holds_results(folder: Path) -> bool:
    """Whether ``folder`` is a run root: a stage result in one of the layout's places (old or new)."""
    return folder.is_dir() and (bool(layout.result_files(folder, any_folder=False))
                                or any(folder.glob(f"{layout.TRAIN_DIR}/*/{layout.TRAIN_FILE}")))


def find_root(path: str | os.PathLike) -> Path:
    """The run root of ``path`` (the root, a stage folder or a result file); :class:`RunError`
    when ``path`` does not exist or lies in no run folder."""
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


@dataclass
class Run:
    """A run folder: where each stage writes, the newest result of each, and what each next stage takes."""

    root: Path
    opened: Path  # what was given to open_run
    _cache: dict = field(default_factory=dict, repr=False)

    # ---- where things are ---------------------------------------------------------------------
    def path(self, rel: str) -> Path:
        """A path of the layout (``layout.EXPORT``, ...) inside this run."""
        return self.root / rel

    def stage_dir(self, stage: str, name: Optional[str] = None) -> Path:
        """The folder ``stage`` writes into (``quantize`` and ``train`` take a preset or backend name)."""
        if stage not in layout.STAGE_DIRS:
            raise ValueError(f"unknown stage {stage!r}; stages: {sorted(layout.STAGE_DIRS)}")
        folder = self.root / layout.STAGE_DIRS[stage]
        return folder / name if name else folder

    def results(self) -> dict[str, Path]:
        """``{stage: newest result file}`` (compare, export, fusion, quantize, search)."""
        return layout.result_files(self.root)

    def result_path(self, stage: str) -> Optional[Path]:
        return self.results().get(stage)

    def _load(self, stage: str, loader) -> Any:
        path = self.result_path(stage)
        if path is None:
            return None
        key = (stage, path, path.stat().st_mtime_ns)
        if key not in self._cache:
            self._cache[key] = loader(path)
        return self._cache[key]

    # ---- the newest result of each stage ------------------------------------------------------
    def comparison(self):
        from ..train import load_comparison

        return self._load("compare", load_comparison)

    def export(self):
        from ..graph import load_export

        return self._load("export", load_export)

    def fusion(self):
        from ..graph import load_fusion

        return self._load("fusion", load_fusion)

    def quantization(self):
        from ..quant import load_quant_result

        return self._load("quantize", load_quant_result)

    def quantizations(self) -> list:
        """Every quantization of the run (``quantize/**/quantize.json``), oldest first."""
        from ..quant import load_quant_result

        files = sorted((p for p in self.root.glob(f"{layout.QUANTIZE_DIR}/**/{layout.QUANTIZE_FILE}") if p.is_file()),
                       key=lambda p: p.stat().st_mtime)
        return [load_quant_result(p) for p in files]

    def search(self):
        from ..quant import load_search

        return self._load("search", load_search)

    # ---- what each next stage takes (the rules are workbench.flow's) --------------------------
    def training_runs(self) -> list:
        """The runs of the newest comparison, else every ``train/<backend>/train.json`` (``workbench
        train`` alone writes no comparison)."""
        comparison = self.comparison()
        if comparison is not None:
            return list(comparison.runs)
        from ..train import load_train_run

        files = sorted(p for p in self.root.glob(f"{layout.TRAIN_DIR}/*/{layout.TRAIN_FILE}") if p.is_file())
        return [load_train_run(p) for p in files]

    def checkpoint_to_export(self):
        """The checkpoint the export stage takes (:func:`workbench.flow.checkpoint_to_export`); None
        when the run has no finished training."""
        from .. import flow

        return flow.checkpoint_to_export(self.training_runs())

    def export_to_fuse(self):
        """The newest export (a :class:`workbench.flow.Pick` naming its ``export.json``); None when
        nothing was exported."""
        from .. import flow

        path = self.result_path("export")
        if path is None:
            return None
        return flow.Pick(path, "export", f"fusing the export {path} (graph {self.export().onnx_path})")

    def graph_to_quantize(self):
        """The FP32 graph the quantize stage takes (:func:`workbench.flow.graph_to_quantize`): the
        fused graph when there is one, else the exported graph; None when there is neither."""
        from .. import flow

        return flow.graph_to_quantize(self.export(), self.fusion())

    def require(self, what: str, pick, hint: str):
        """``pick``, or a :class:`RunError` saying the run lacks ``what`` and which command makes it."""
        if pick is None:
            raise RunError(f"the run folder {self.root} holds no {what}: {hint}")
        return pick


def open_run(path: str | os.PathLike) -> Run:
    """Open the run that ``path`` (its root, a stage folder or a result file) belongs to."""
    return Run(find_root(path), Path(path))
