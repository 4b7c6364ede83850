"""The quantization session: INT8 presets of one FP32 graph scored slice by slice, the FP32 baseline scored once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from ..data.load import DataConfig
from ..graph import ExportResult, FusionReport
from ..graph.sources import export_of, graph_file
from ..quant import (
    BASELINE_DIR,
    DEFAULT_BUDGET_OVERALL,
    DEFAULT_BUDGET_PER_SLICE,
    DEFAULT_N_BOOT,
    BaselineConfig,
    EvalConfig,
    machine_preset,
    QuantResult,
    SearchConfig,
    SearchResult,
    TimingConfig,
    load_baseline,
    load_quant_result,
    load_search,
    prepare_baseline,
    requantize_excluding,
    run_quantization,
    run_search,
)
from ..quant.ship import ShippedGraph, ship_search
from ..runs import layout
from .base import DataInput, InputError, Session, as_saved

GraphLike = Union[FusionReport, ExportResult, str, os.PathLike]
TIMINGS = ("quick", "default")


def as_quant_result(value: Union[QuantResult, str, os.PathLike]) -> QuantResult:
    return as_saved(value, QuantResult, load_quant_result, "quantization", layout.QUANTIZE_FILE, "quantization")


def as_search_result(value: Union[SearchResult, str, os.PathLike]) -> SearchResult:
    return as_saved(value, SearchResult, load_search, "search", layout.SEARCH_FILE, "search result")


def timing_config(name: str = "quick", device: str = "cpu") -> TimingConfig:
    if name not in TIMINGS:
        raise InputError(f"timing must be one of {list(TIMINGS)}, got {name!r}")
    return TimingConfig.quick(device=device) if name == "quick" else TimingConfig(device=device)


class QuantSession(DataInput, Session):
    """``results``: every quantization by name. ``export``: only where :func:`~workbench.graph.sources.export_of`
    cannot find the graph's export."""

    INPUTS = ("graph", "export", "data", "run_dir")
    LABEL = "quantize"
    DEFAULT_DATA = DataConfig.quick()  # the quick reviews when no data was given

    def __init__(self, *, graph: Optional[GraphLike] = None, export: Any = None, data: Any = None, run_dir: Any = None,
                 progress=None) -> None:
        super().__init__(run_dir=run_dir, progress=progress)
        self.graph = graph
        self._export = None
        self.export = export
        self.data = data
        self.results: dict[str, QuantResult] = {}
        self.search_result: Optional[SearchResult] = None
        self.shipped: Optional[ShippedGraph] = None

    # ---- inputs ------------------------------------------------------------------------------------
    @property
    def export(self) -> Any:
        return self._export

    @export.setter
    def export(self, value: Any) -> None:
        if value is not None and not isinstance(value, (ExportResult, str, os.PathLike)):
            raise TypeError(f"export must be a workbench.graph.export.ExportResult or its folder, got {type(value).__name__}")
        self._export = value

    def set_graph(self, graph: GraphLike, export: Any = None, data: Any = None) -> None:
        self.graph = graph
        if export is not None:
            self.export = export
        if data is not None:
            self.data = data

    def fp32_graph(self) -> GraphLike:
        if self.graph is None:
            raise InputError("no FP32 graph to quantize: export and fuse first (GraphPanel), or pass graph= "
                             "a FusionReport, an ExportResult or an .onnx path")
        return self.graph

    # ---- results -----------------------------------------------------------------------------------
    def keep(self, result: QuantResult) -> QuantResult:
        self.results[result.name] = result
        return super().keep(result)

    def keep_search(self, search: SearchResult) -> SearchResult:
        self.search_result = search
        return search

    def open(self, saved: Any) -> QuantResult:
        """Keep a saved quantization; its FP32 graph becomes the graph when none is set (reusing its baseline)."""
        result = as_quant_result(saved)
        if self.graph is None:
            self.graph = result.source_path
        return self.keep(result)

    def open_search(self, saved: Any) -> SearchResult:
        return self.keep_search(as_search_result(saved))

    def baseline(self) -> Any:
        """The FP32 baseline an earlier quantization of the same graph saved (scored once, reused), or None."""
        try:
            source = graph_file(self.fp32_graph()).resolve()
        except TypeError:
            return None  # run_quantization explains what it needs
        for r in self.results.values():
            if Path(r.source_path).resolve() == source and Path(r.baseline_path).is_file():
                return load_baseline(r.baseline_path)
        return None

    # ---- the stage ---------------------------------------------------------------------------------
    def quantize(self, preset: str, *, n_boot: int = DEFAULT_N_BOOT, timing: Optional[TimingConfig] = None) -> QuantResult:
        """Quantize with ``preset`` and score every slice; the FP32 baseline is scored once, beside the first variant."""
        graph = self.fp32_graph()
        cfg = machine_preset(preset)  # following this CPU, as the audit's and the demo's presets do
        timing = timing if timing is not None else timing_config()
        self.report(0, 1, None, f"quantizing with {preset}, scoring every slice ({n_boot} bootstrap draws), ranking nodes by SQNR")
        with self.writing() as run_dir:
            out = run_dir / layout.quantize_dir(preset)
            baseline = self.baseline()
            if baseline is None:  # the FP32 graph scored once, beside this variant (the next one finds it)
                baseline = prepare_baseline(graph, self.dataset(), out / BASELINE_DIR, BaselineConfig(timing=timing),
                                            export=self.export)
            result = run_quantization(baseline, cfg, out, evaluation=EvalConfig(n_boot=int(n_boot)), timing=timing)
        return self.keep(result)

    def requantize(self, *, worst_k: int = 3, n_boot: int = DEFAULT_N_BOOT) -> QuantResult:
        """The latest quantization again, leaving its ``worst_k`` worst nodes (lowest SQNR) in FP32."""
        if self.result is None:
            raise InputError("nothing to re-quantize yet: press Quantize first")
        with self.writing(Path(self.result.out_dir)):  # written into <out_dir>/exclude-<k>
            result = requantize_excluding(self.result, worst_k=int(worst_k), n_boot=int(n_boot))
        return self.keep(result)

    def search(self, candidates: Sequence[str], *, budget_overall: float = DEFAULT_BUDGET_OVERALL,
               budget_per_slice: float = DEFAULT_BUDGET_PER_SLICE, n_boot: int = DEFAULT_N_BOOT,
               timing: Optional[TimingConfig] = None) -> SearchResult:
        """The fastest candidate within both budgets; presets already quantized here alike are reused, the baseline too."""
        configs = [machine_preset(name) for name in candidates]
        if not configs:
            raise InputError("search candidates is empty: select at least one preset (ctrl/cmd-click for several)")
        graph = self.fp32_graph()
        baseline = self.baseline()  # scored once: not again for the search
        self.report(0, len(configs) + 1, None, "scoring the FP32 graph" if baseline is None else "FP32 graph: the saved baseline")
        cfg = SearchConfig(candidates=tuple(configs), budget_overall=float(budget_overall), budget_per_slice=float(budget_per_slice),
                           evaluation=EvalConfig(n_boot=int(n_boot)),
                           baseline=BaselineConfig(timing=timing if timing is not None else timing_config()))
        with self.writing() as run_dir:
            search = run_search(
                baseline if baseline is not None else graph, cfg, run_dir / layout.SEARCH_DIR,
                data=self.dataset() if baseline is None else None, export=self.export,
                previous=list(self.results.values()),
                progress=lambda done, n, what: self.report(done, n, None, f"scored {what}"),
            )
        return self.keep_search(search)

    def ship(self) -> ShippedGraph:
        """The latest search's choice into the run's ``chosen/``, runnable without PyTorch (:mod:`workbench.quant.ship`)."""
        search = self.search_result
        if search is None:
            raise InputError("nothing chosen yet: press Search within budget first (or open a saved search)")
        run_dir = layout.root_by_name(search.out_dir) or self.resolve_run_dir()
        export = export_of(self.graph, self.export) if self.graph is not None else None
        with self.writing(run_dir):
            self.shipped = ship_search(search, run_dir / layout.CHOSEN_DIR, unfused=export.onnx_path if export is not None else None)
        return self.shipped
