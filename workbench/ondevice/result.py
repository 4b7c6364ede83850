"""On-device training: what the stage returns, how to read it back, and its text table."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .. import runs
from ..graph import ExportResult, Validation
from ..runs.layout import ONDEVICE_FILE
from .config import OnDeviceConfig, Trainable


@dataclass(frozen=True)
class ArtifactFile:
    name: str
    size_mib: float
    ir_version: Optional[int] = None  # as written (before any fix); None for the checkpoint


@dataclass(frozen=True)
class Artifacts:
    """The four on-device training artifacts and what they hold."""

    folder: Path
    files: list[ArtifactFile]
    trainable: Trainable
    last_n_layers: int
    trainable_parameters: int  # number of scalars that train
    total_parameters: int
    trainable_tensors: list[str]
    frozen_tensors: int
    loss: str
    optimizer: str
    opset: int
    training_graph_nodes: int
    export_seconds: float
    generate_seconds: float
    ir_version_fixed: list[str]  # artifacts rewritten with MAX_IR_VERSION
    notes: list[str] = field(default_factory=list)

    @property
    def total_size_mib(self) -> float:
        return sum(f.size_mib for f in self.files)


@dataclass(frozen=True)
class SideCost:
    """Step time and memory of one side (on-device or PyTorch eager) for the same trainable set."""

    name: str  # "onnxruntime.training.api" or "pytorch eager"
    median_step_ms: float  # steps after the first, interleaved with the other side in one process
    step_ms: list[float]
    peak_rss_mib: Optional[float] = None  # whole process, measured in a fresh process of its own
    rss_growth_mib: Optional[float] = None  # peak during the steps minus RSS just before the first
    setup_s: Optional[float] = None  # in that process: load the model / create the session
    isolated_median_step_ms: Optional[float] = None


@dataclass(frozen=True)
class OnDeviceResult:
    config: OnDeviceConfig
    model_source: str
    class_names: list[str]
    artifacts: Artifacts
    ondevice_losses: list[float]
    pytorch_losses: list[float]
    max_loss_diff: float
    tolerance: float
    loss_parity: bool
    parity_basis: str
    ondevice: SideCost
    pytorch: SideCost
    weights_max_abs_diff: float  # on-device vs PyTorch trained weights (trainable set)
    weights_moved: float  # largest change of a trainable weight during training (on-device)
    frozen_unchanged: bool
    inference_path: Path
    inference_dir: Path  # holds export.json: give it to workbench fuse / quantize
    validation: Validation  # inference graph vs PyTorch holding the on-device-trained weights
    agreement_with_pytorch_training: Validation  # inference graph vs the PyTorch-trained model
    trained_checkpoint: Path
    trained_model_dir: Path
    stopped: bool
    seconds: float
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    web_page: Optional[Path] = None  # <run>/web/index.html: the artifacts trained by onnxruntime-web (None: not written)
    web_note: str = ""  # where the page is, or why it was not written and how to get it
    model: str = ""  # the stage's input as given ("tiny", "minilm" or a folder): what `ondevice import` loads again

    @property
    def ok(self) -> bool:
        return self.loss_parity and self.validation.passed and self.frozen_unchanged

    @property
    def step_time_ratio(self) -> float:
        """PyTorch eager step time / on-device step time (>1: on-device is faster)."""
        return self.pytorch.median_step_ms / self.ondevice.median_step_ms if self.ondevice.median_step_ms else float("nan")

    @property
    def memory_ratio(self) -> Optional[float]:
        """PyTorch eager peak RSS / on-device peak RSS (>1: on-device needs less)."""
        a, b = self.ondevice.peak_rss_mib, self.pytorch.peak_rss_mib
        return b / a if a and b else None

    def load_export(self) -> ExportResult:
        from ..graph import load_export

        return load_export(self.inference_dir)


def load_ondevice(path: str | os.PathLike) -> OnDeviceResult:
    """Read an ``ondevice.json`` (or the folder holding it)."""
    return runs.load_result(OnDeviceResult, path, ONDEVICE_FILE)


def table(result: OnDeviceResult) -> str:
    """The result as a few lines of text (what the CLI prints)."""
    a, o, p = result.artifacts, result.ondevice, result.pytorch
    sizes = ", ".join(f"{f.name} {f.size_mib:.2f} MiB" for f in a.files)
    lines = [
        f"artifacts: {a.folder} ({a.total_size_mib:.2f} MiB: {sizes})",
        f"  trainable: {a.trainable.value}{f' (last {a.last_n_layers})' if a.trainable is Trainable.LAST else ''}, "
        f"{a.trainable_parameters:,} of {a.total_parameters:,} parameters in {len(a.trainable_tensors)} tensors; "
        f"loss {a.loss}, optimizer {a.optimizer}, opset {a.opset}",
        f"loss curves ({len(result.ondevice_losses)} steps): largest |difference| {result.max_loss_diff:.3g} "
        f"{'<=' if result.loss_parity else '>'} tolerance {result.tolerance:g}: {'agree' if result.loss_parity else 'DIFFER'}",
        f"  on-device {' '.join(f'{x:.4f}' for x in result.ondevice_losses)}",
        f"  PyTorch   {' '.join(f'{x:.4f}' for x in result.pytorch_losses)}",
        f"{'':<26}{'median step ms':>15}{'peak RSS MiB':>14}{'growth MiB':>12}",
    ]
    for side in (o, p):
        peak = f"{side.peak_rss_mib:.0f}" if side.peak_rss_mib is not None else "-"
        growth = f"{side.rss_growth_mib:.0f}" if side.rss_growth_mib is not None else "-"
        lines.append(f"{side.name:<26}{side.median_step_ms:>15.2f}{peak:>14}{growth:>12}")
    mem = f", memory {result.memory_ratio:.2f}x" if result.memory_ratio else ""
    lines.append(f"on-device vs PyTorch eager: step time {result.step_time_ratio:.2f}x{mem} (>1: on-device better)")
    lines.append(f"inference graph: {result.inference_path}")
    lines.append(f"  {result.validation.message}")
    lines.append(f"  vs PyTorch-trained model: largest |Δ logit| {result.agreement_with_pytorch_training.max_abs_diff:.3g}; "
                 f"trained weights differ by {result.weights_max_abs_diff:.3g} (moved {result.weights_moved:.3g})")
    if result.web_note:
        lines.append(result.web_note)
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)
