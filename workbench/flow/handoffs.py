"""The hand-offs every front (stage registry, panels, CLI) follows, each choice with a one-line note why,
and :class:`Run`, the typed run folder (:func:`open_run` takes its root, a stage folder or a result file).

    fine-tune -> export:   the ORTModule checkpoint when ORTModule really trained in ONNX Runtime, else the eager one's
    export -> fuse:        the newest export
    fuse -> quantize:      the fused graph when it passed validation, else the exported graph
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from ..runs import layout
from ..runs.open import RunError, find_root

if TYPE_CHECKING:
    from ..graph import ExportResult, FusionReport
    from ..quant import QuantResult, SearchResult
    from ..train import Comparison, TrainRun

    Training = Union[Comparison, Sequence[TrainRun], None]

# the order in which a checkpoint is chosen for export (ORTModule only when it ran in ONNX Runtime)
CHECKPOINT_PREFERENCE = ("ortmodule", "eager")


@dataclass(frozen=True)
class Pick:
    """What the next stage takes: ``path``, what it is (``kind``) and a one-line ``note`` why."""

    path: Path
    kind: str
    note: str

    def __str__(self) -> str:
        return self.note


def _runs_of(training: "Training") -> list["TrainRun"]:
    from ..train import Comparison  # the stage's own types (imported when a hand-off is decided: torch loads lazily)

    if training is None:
        return []
    return list(training.runs) if isinstance(training, Comparison) else list(training)


def _finished(run: "TrainRun") -> bool:
    from ..train import RunStatus

    return run.status is RunStatus.OK and bool(run.checkpoint_dir)


def checkpoint_to_export(training: "Training") -> Optional[Pick]:
    """The checkpoint to export (the rule above, else any finished run's); None when none finished."""
    ok = [r for r in _runs_of(training) if _finished(r)]
    for want in CHECKPOINT_PREFERENCE:
        for r in ok:
            if r.backend.value == want and (want != "ortmodule" or r.executed_in_onnxruntime):
                why = ("ORTModule trained it in ONNX Runtime" if want == "ortmodule" else
                       "no ORTModule run trained in ONNX Runtime" if any(x.backend.value == "ortmodule" for x in ok)
                       else "the eager run (no finished ORTModule run)")
                return Pick(Path(r.checkpoint_dir), f"{want} checkpoint", f"exporting the {want} checkpoint {r.checkpoint_dir} ({why})")
    if ok:
        r = ok[0]
        return Pick(Path(r.checkpoint_dir), f"{r.backend.value} checkpoint",
                    f"exporting the {r.backend.value} checkpoint {r.checkpoint_dir} (the only finished run)")
    return None


def ordered_checkpoints(training: "Training") -> dict[str, str]:
    """``{label: checkpoint folder}`` of the finished runs, :func:`checkpoint_to_export`'s pick first (preselected)."""
    pick = checkpoint_to_export(training)
    from ..train import RunStatus

    done = {f"{r.backend.value} checkpoint": str(r.checkpoint_dir) for r in _runs_of(training)
            if r.checkpoint_dir and r.status in (RunStatus.OK, RunStatus.STOPPED)}
    if pick is None:
        return done
    first = {pick.kind: str(pick.path)}
    return {**first, **{k: v for k, v in done.items() if k != pick.kind}}


def fused_problem(fusion: Optional["FusionReport"]) -> Optional[str]:
    """Why ``fusion``'s fused graph cannot be quantized (None when it can)."""
    if fusion is None:
        return "no fusion result"
    if not fusion.chosen_path:
        return "the fusion run built no fused graph"
    if not Path(fusion.chosen_path).is_file():
        return f"the fused graph {fusion.chosen_path} is missing"
    try:
        validation = fusion.fused.validation
    except (KeyError, ValueError, LookupError):
        return None  # no transformer variant to judge by: the fused file is what there is
    if not validation.passed:
        return f"the fused graph failed validation ({validation.message})"
    return None


GRAPH_CHOICES = ("auto", "fused", "exported")


class FlowError(FileNotFoundError):
    """The stage asked for an input the run does not have (one line, with the command that makes it)."""


def graph_to_quantize(export: Optional["ExportResult"] = None, fusion: Optional["FusionReport"] = None,
                      which: str = "auto") -> Optional[Pick]:
    """The FP32 graph to quantize: ``auto`` follows the rule above (None when neither exists); ``fused`` /
    ``exported`` insist on that graph, else a :class:`FlowError` naming what to run."""
    if which not in GRAPH_CHOICES:
        raise ValueError(f"which graph to quantize must be one of {list(GRAPH_CHOICES)}, got {which!r}")
    problem = fused_problem(fusion)
    if which == "fused":
        if problem is not None:
            raise FlowError(f"no fused graph to quantize: {problem}; run `workbench fuse` first, or use --graph exported")
        return Pick(Path(fusion.chosen_path), "fused", f"quantizing the fused graph {fusion.chosen_path} (--graph fused)")
    if which == "exported":
        if export is None:
            raise FlowError("no exported graph to quantize: run `workbench export --model MODEL` first")
        return Pick(Path(export.onnx_path), "exported", f"quantizing the exported graph {export.onnx_path} (--graph exported)")
    if problem is None:
        return Pick(Path(fusion.chosen_path), "fused", f"quantizing the fused graph {fusion.chosen_path}")
    if export is not None:
        why = "fuse first to quantize the fused graph" if fusion is None else problem
        return Pick(Path(export.onnx_path), "exported", f"quantizing the exported graph {export.onnx_path} ({why})")
    return None


@dataclass
class Run:
    """A run folder: where each stage writes, the newest result of each, and what each next stage takes."""

    root: Path
    opened: Path  # what was given to open_run
    _cache: dict = field(default_factory=dict, repr=False)

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
    def comparison(self) -> Optional["Comparison"]:
        from ..train import load_comparison

        return self._load("compare", load_comparison)

    def export(self) -> Optional["ExportResult"]:
        from ..graph import load_export

        return self._load("export", load_export)

    def fusion(self) -> Optional["FusionReport"]:
        from ..graph import load_fusion

        return self._load("fusion", load_fusion)

    def quantization(self) -> Optional["QuantResult"]:
        from ..quant import load_quant_result

        return self._load("quantize", load_quant_result)

    def quantizations(self) -> list["QuantResult"]:
        """Every quantization of the run (``quantize/**/quantize.json``), oldest first."""
        from ..quant import load_quant_result

        files = sorted((p for p in self.root.glob(f"{layout.QUANTIZE_DIR}/**/{layout.QUANTIZE_FILE}") if p.is_file()),
                       key=lambda p: p.stat().st_mtime)
        return [load_quant_result(p) for p in files]

    def search(self) -> Optional["SearchResult"]:
        from ..quant import load_search

        return self._load("search", load_search)

    # ---- what each next stage takes (the rules above) ------------------------------------------
    def training_runs(self) -> list["TrainRun"]:
        """The newest comparison's runs, else each ``train/<backend>/train.json`` (``train`` alone writes no comparison)."""
        comparison = self.comparison()
        if comparison is not None:
            return list(comparison.runs)
        from ..train import load_train_run

        files = sorted(p for p in self.root.glob(f"{layout.TRAIN_DIR}/*/{layout.TRAIN_FILE}") if p.is_file())
        return [load_train_run(p) for p in files]

    def checkpoint_to_export(self) -> Optional[Pick]:
        return checkpoint_to_export(self.training_runs())

    def export_to_fuse(self) -> Optional[Pick]:
        path = self.result_path("export")
        if path is None:
            return None
        return Pick(path, "export", f"fusing the export {path} (graph {self.export().onnx_path})")

    def graph_to_quantize(self, which: str = "auto") -> Optional[Pick]:
        try:
            return graph_to_quantize(self.export(), self.fusion(), which)
        except FlowError as exc:
            raise FlowError(f"{exc} (run folder {self.root})") from None

    def require(self, what: str, pick: Optional[Pick], hint: str) -> Pick:
        """``pick``, or a :class:`RunError` saying the run lacks ``what`` and which command makes it."""
        if pick is None:
            raise RunError(f"the run folder {self.root} holds no {what}: {hint}")
        return pick


def open_run(path: str | os.PathLike) -> Run:
    """Open the run that ``path`` (its root, a stage folder or a result file) belongs to."""
    return Run(find_root(path), Path(path))
