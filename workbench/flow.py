"""The orchestrator: which output of one stage the next stage takes.

    fine-tune -> export:   the ORTModule checkpoint when ORTModule really trained in ONNX Runtime,
                           else the eager run's, else any finished run's (:func:`checkpoint_to_export`)
    export -> fuse:        the newest export (:func:`workbench.runs.Run.export_to_fuse`)
    fuse -> quantize:      the fused graph when there is one and it passed validation, else the
                           exported graph (:func:`graph_to_quantize`)

The demo (``workbench.pipeline``), the notebook ``Workbench``, the CLI and ``workbench.runs.Run``
all call these, so every front hands the same thing on. Each choice comes with a one-line note
saying what was taken and why, for the front to print.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

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


def _runs_of(training: Any) -> list:
    if training is None:
        return []
    return list(getattr(training, "runs", training))


def _finished(run) -> bool:
    status = getattr(run.status, "value", run.status)
    return status == "ok" and bool(run.checkpoint_dir)


def checkpoint_to_export(training: Any) -> Optional[Pick]:
    """The checkpoint to export from a ``Comparison`` (or a list of ``TrainRun``): what ORTModule
    trained when it ran in ONNX Runtime, else the eager run's, else any finished run's; None when
    no backend finished with a checkpoint."""
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


def ordered_checkpoints(training: Any) -> dict[str, str]:
    """``{label: checkpoint folder}`` of the finished runs, the one :func:`checkpoint_to_export`
    picks first (what a front offers, preselected)."""
    pick = checkpoint_to_export(training)
    done = {f"{r.backend.value} checkpoint": str(r.checkpoint_dir) for r in _runs_of(training)
            if r.checkpoint_dir and getattr(r.status, "value", r.status) in ("ok", "stopped")}
    if pick is None:
        return done
    first = {pick.kind: str(pick.path)}
    return {**first, **{k: v for k, v in done.items() if k != pick.kind}}


def fused_problem(fusion: Any) -> Optional[str]:
    """Why ``fusion``'s fused graph cannot be quantized (None when it can)."""
    if fusion is None:
        return "no fusion result"
    if not fusion.fused_path:
        return "the fusion run built no fused graph"
    if not Path(fusion.fused_path).is_file():
        return f"the fused graph {fusion.fused_path} is missing"
    try:
        validation = fusion.fused.validation
    except (KeyError, ValueError, LookupError):
        return None  # no transformer variant to judge by: the fused file is what there is
    if not validation.passed:
        return f"the fused graph failed validation ({validation.message})"
    return None


def graph_to_quantize(export: Any = None, fusion: Any = None) -> Optional[Pick]:
    """The FP32 graph to quantize: the fused graph when there is one that passed validation, else
    the exported graph; None when there is neither."""
    problem = fused_problem(fusion)
    if problem is None:
        return Pick(Path(fusion.fused_path), "fused", f"quantizing the fused graph {fusion.fused_path}")
    if export is not None:
        why = "fuse first to quantize the fused graph" if fusion is None else problem
        return Pick(Path(export.onnx_path), "exported", f"quantizing the exported graph {export.onnx_path} ({why})")
    return None
