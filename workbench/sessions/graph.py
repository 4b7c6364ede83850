"""The graph session: export to ONNX (validated against PyTorch), fuse, and show a variant in Netron on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

from ..graph import ExportConfig, ExportResult, FusionConfig, FusionReport, Variant, load_export, load_fusion
from ..runs import layout
from ..runtime.device import require_device
from ..runtime.netron_view import NetronServer
from ..workflows.stages import export_and_fuse
from .base import DataInput, InputError, Session, as_saved, model_folder

FusionLike = Union[FusionReport, str, os.PathLike]
STAGE_WORDS = {"export": "exporting {model} (opset {opset}) and validating against PyTorch",
               "fuse": "building, validating and timing the optimized variants"}


def as_fusion_report(value: FusionLike) -> FusionReport:
    return as_saved(value, FusionReport, load_fusion, "fusion", layout.FUSION_FILE, "fusion result")


class GraphSession(DataInput, Session):
    """Export and fuse: ``result`` is the :class:`~workbench.graph.FusionReport`, ``export_result`` the export it
    was built from, ``netron`` the graph viewer's server. Inputs: ``data`` to validate on, ``run_dir``."""

    INPUTS = ("data", "run_dir")
    LABEL = "graph"

    def __init__(self, *, data: Any = None, run_dir: Any = None, progress=None) -> None:
        super().__init__(run_dir=run_dir, progress=progress)
        self.data = data
        self.export_result: Optional[ExportResult] = None
        self.netron = NetronServer()  # 127.0.0.1 only; nothing runs until show_netron

    def export_and_fuse(self, model: str, export_cfg: ExportConfig, fusion_cfg: FusionConfig) -> FusionReport:
        """Export ``model`` ("tiny", "minilm" or a checkpoint folder) and fuse it into the run folder; keeps the fusion report."""
        model = model_folder(model)
        require_device(fusion_cfg.device)  # before exporting anything
        data = self.dataset()

        def on_stage(index: int, total: int, name: str, status: str) -> None:
            running = status == "running"
            self.report(index - 1 if running else index, total, None,
                        STAGE_WORDS[name].format(model=model, opset=export_cfg.opset) if running else f"{name}: {status}")

        with self.writing() as run_dir:
            export, report = export_and_fuse(model, export_cfg, fusion_cfg, run_dir, data=data, on_stage=on_stage)
        self.export_result = export
        return self.keep(report)

    def open(self, saved: FusionLike) -> FusionReport:
        """Keep a saved fusion report and the export it names."""
        report = as_fusion_report(saved)
        if report.export_path is not None and Path(report.export_path).is_file():
            self.export_result = load_export(report.export_path)
        return self.keep(report)

    # ---- Netron ------------------------------------------------------------------------------------
    def graph_path(self, variant: Optional[str] = None) -> Path:
        """The ONNX file of ``variant`` (default the unoptimized graph) of the kept report."""
        if self.result is None:
            raise InputError("export and fuse first: there is no graph to show yet")
        return Path(self.result.variant(variant or Variant.UNOPTIMIZED.value).path)

    def show_netron(self, variant: Optional[str] = None) -> str:
        """Serve ``variant``'s graph with Netron and return its URL (``NetronError`` saying why when Netron cannot start)."""
        return self.netron.start(self.graph_path(variant))

    def stop_netron(self) -> None:
        self.netron.stop()

    close = stop_netron
