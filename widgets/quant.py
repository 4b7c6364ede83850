"""The quantization panel: INT8 presets scored slice by slice against the FP32 graph (drift with
95% intervals, flipped predictions), re-quantization without the nodes that hurt most, and the
accuracy-constrained search.

A view over :func:`workbench.quant.run_quantization`, :func:`~workbench.quant.requantize_excluding`,
:func:`~workbench.quant.run_search` and :mod:`workbench.plots.quant`.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Callable, Optional, Union

import ipywidgets as W
import plotly.graph_objects as go

from workbench.runtime.device import DeviceError, normalize_device
from workbench.data.load import DataConfig, load_data
from workbench.graph import ExportResult
from workbench.graph import FusionReport
from workbench.runs import layout
from workbench.plots import quant as quant_plots
from workbench.quant import (
    BASELINE_DIR,
    DEFAULT_BUDGET_OVERALL,
    DEFAULT_BUDGET_PER_SLICE,
    DEFAULT_N_BOOT,
    BaselineConfig,
    EvalConfig,
    QuantConfig,
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

from .base import (
    as_result,
    FAIL_COLOUR,
    MUTED_COLOUR,
    OK_COLOUR,
    WARN_COLOUR,
    Markup,
    Panel,
    PanelInputError,
    check_choice,
    check_range,
    coloured,
    fmt,
    html_table,
    replace_figure,
)

PRESETS = tuple(QuantConfig.presets())
TIMINGS = ("quick", "default")
FIGURES = ("slice drift", "confidence", "thresholds", "node errors", "search trade-off")
FLIP_ROWS = 40
GraphLike = Union[FusionReport, ExportResult, str, os.PathLike]


def as_quant_result(value: Union[QuantResult, str, os.PathLike]) -> QuantResult:
    """A QuantResult, or the one in ``quantize.json`` / the folder holding it / any folder of a run (its newest)."""
    return as_result(value, QuantResult, load_quant_result, "quantization", layout.QUANTIZE_FILE, "quantization")


def as_search_result(value: Union[SearchResult, str, os.PathLike]) -> SearchResult:
    """A SearchResult, or the one in ``search.json`` / the folder holding it / any folder of a run."""
    return as_result(value, SearchResult, load_search, "search", layout.SEARCH_FILE, "search result")


def results_table(results: list[QuantResult]) -> str:
    """Every quantization made in this panel, one row each (the latest last)."""
    rows = []
    for r in results:
        drop = r.report.max_slice_drop()
        worst = r.report.worst_slices(k=1, include_small=False)
        where = f" ({worst[0].slice})" if worst and drop > 0 else ""
        rows.append([
            r.name,
            coloured("passed" if r.validation.passed else "FAILED", r.validation.passed),
            Markup(f"{fmt(100 * r.accuracy, '.1f')}% "
                   + coloured(f"({fmt(100 * r.accuracy_delta, '+.1f')} pts)", r.accuracy_delta >= 0)),
            coloured(f"{fmt(100 * drop, '.1f')} pts{where}", drop <= 0.02),
            len(r.report.flips),
            _speed_cell(r),
            fmt(100 * r.of_floor, ".0f", "%") if r.of_floor else "-",
            f"{fmt(r.size_mib, '.1f')} / {fmt(r.fp32_size_mib, '.1f')} MiB",
            len(r.excluded_nodes),
        ])
    return html_table(
        ["quantization", "validation", "accuracy (Δ vs FP32)", "largest slice drop", "flips", "speed-up vs FP32 (95% CI)",
         "of this CPU's floor", "size INT8 / FP32", "nodes kept FP32"], rows, css_class="wb-table wb-quant-results")


def _speed_cell(r: QuantResult) -> Markup:
    """The speed-up with its interval (green when the whole interval is above 1, red when below),
    or a warning when it was timed while other work used the CPU."""
    ratio = r.speedup_ratio
    if r.contended:
        return Markup(coloured(f"{fmt(r.speedup, '.2f', 'x')} timed under load", None) + " (not a measured fact)")
    if ratio is None:
        return coloured(fmt(r.speedup, ".2f", "x"), r.speedup >= 1.0 if r.speedup == r.speedup else None)
    good = True if ratio.is_gain else (False if ratio.is_loss else None)
    return coloured(f"{ratio.value:.2f}x ({ratio.lo:.2f}-{ratio.hi:.2f})", good)


def flips_table(r: QuantResult, golden: bool = False) -> str:
    """Predictions that changed label, biggest confidence loss first."""
    report = r.golden if golden and r.golden is not None else r.report
    flips = report.sorted_flips("confidence_change")
    if not flips:
        return coloured(f"no prediction changed label on the {report.set_name} set ({report.n} examples)", True)
    rows = [[f.kind.value, f.text if len(f.text) <= 140 else f.text[:139] + "…", f.label_name or f.label,
             f"{f.reference_pred_name or f.reference_pred} ({fmt(f.reference_confidence, '.2f')})",
             f"{f.candidate_pred_name or f.candidate_pred} ({fmt(f.candidate_confidence, '.2f')})",
             ", ".join(f.slices)] for f in flips[:FLIP_ROWS]]
    more = f"<div>showing {FLIP_ROWS} of {len(flips)}</div>" if len(flips) > FLIP_ROWS else ""
    return (f"<b>{len(flips)} flipped prediction(s)</b> on the {html.escape(report.set_name)} set"
            + html_table(["kind", "text", "label", f"{report.reference_name} (confidence)",
                          f"{report.candidate_name} (confidence)", "slices"], rows, css_class="wb-table wb-flips") + more)


class QuantPanel(Panel):
    """Quantize the FP32 graph to INT8 and see what it cost, slice by slice.

    Options: ``graph`` (the FP32 graph: a ``FusionReport`` (its fused graph), an ``ExportResult``
    or an ONNX path; the graph step's result in the Workbench), ``export`` (the ``ExportResult``
    the graph came from, for its tokenizer; found beside the graph when not given), ``data`` (a
    ``DataConfig`` or ``DatasetDict``: test split scored, training split calibrates; default the
    quick reviews), ``preset`` (a name from ``QuantConfig.presets()``), ``timing`` (quick, default),
    ``n_boot`` (bootstrap replicates), ``worst_k`` (nodes left in FP32 by "Re-quantize"),
    ``budget_overall`` / ``budget_per_slice`` (accuracy drops allowed by the search, as fractions),
    ``candidates`` (presets the search tries), ``run_dir``, ``saved`` (a ``QuantResult`` or
    ``quantize.json``), ``saved_search`` (a ``SearchResult`` or ``search.json``), ``figure``.

    ``panel.result`` is the latest :class:`~workbench.quant.QuantResult`, ``panel.results`` all
    of them by name, ``panel.search`` the :class:`~workbench.quant.SearchResult`.
    """

    OPTIONS = {
        "graph": None,
        "export": None,
        "data": None,
        "preset": "dynamic",
        "timing": "quick",
        "device": "cpu",
        "n_boot": DEFAULT_N_BOOT,
        "worst_k": 3,
        "budget_overall": DEFAULT_BUDGET_OVERALL,
        "budget_per_slice": DEFAULT_BUDGET_PER_SLICE,
        "candidates": ("dynamic", "dynamic-per-channel", "static"),
        "run_dir": None,
        "saved": None,
        "saved_search": None,
        "figure": "slice drift",
    }
    TITLE = "Quantize to INT8, slice by slice"
    HELP = ("Each slice's accuracy change comes with a 95% paired-bootstrap interval: red bars got significantly worse. "
            "Slices under 50 examples are shown pale (too small to judge). Flipped predictions are listed below.")
    RUN_LABEL = "Quantize"

    def __new__(cls, *args: Any, **kwargs: Any):
        """``QuantPanel(model=FOLDER, ...)`` with a sentence-transformers folder: the embedding panel
        (:class:`widgets.embed.EmbedQuantPanel`), which scores retrieval instead of accuracy."""
        if cls is QuantPanel and kwargs.get("model") is not None:
            from .embed import EmbedQuantPanel

            return EmbedQuantPanel(**kwargs)
        return super().__new__(cls)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.results: dict[str, QuantResult] = {}
        self.search: Optional[SearchResult] = None
        self.requantize_button = self.add_action("Re-quantize without the worst nodes", self.requantize, icon="filter",
                                                 tooltip="the same preset, leaving the worst_k nodes (lowest SQNR) in FP32")
        self.search_button = self.add_action("Search within budget", self.run_search, icon="search",
                                             tooltip="the fastest candidate whose drop fits both budgets")
        self.controls["figure"].observe(lambda _c: self._draw_figure(), names="value")
        self.controls["golden"].observe(lambda _c: self._redraw_views(), names="value")
        for name in ("data", "export"):
            value = self.options[name]
            if value is not None and name == "data" and not isinstance(value, DataConfig) and not hasattr(value, "keys"):
                raise TypeError(f"data must be a workbench.data.load.DataConfig or a datasets.DatasetDict, got {type(value).__name__}")
            if value is not None and name == "export" and not isinstance(value, (ExportResult, str, os.PathLike)):
                raise TypeError(f"export must be a workbench.graph.export.ExportResult or its folder, got {type(value).__name__}")
        self._data_cache: Any = None
        if self.options["graph"] is None and self.options["saved"] is None:
            self.block("an FP32 graph: export and fuse in the step above, or pass graph=")
        if self.options["saved"] is not None:
            saved = as_quant_result(self.options["saved"])
            if self.options["graph"] is None:  # quantize the same FP32 graph again (its baseline is reused)
                self.options["graph"] = saved.source_path
            self.show(saved)
        if self.options["saved_search"] is not None:
            self.show_search(as_search_result(self.options["saved_search"]))

    # ---- controls ----------------------------------------------------------------------------
    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        check_choice("preset", options["preset"], PRESETS)
        check_choice("timing", options["timing"], TIMINGS)
        check_choice("figure", options["figure"], FIGURES)
        try:
            device = normalize_device(options["device"])
        except DeviceError as exc:
            raise PanelInputError(str(exc)) from None
        for c in options["candidates"]:
            check_choice("candidates", c, PRESETS)
        check_range("n_boot", options["n_boot"], 100, 100_000, "a 95% interval needs at least 100 bootstrap draws")
        check_range("worst_k", options["worst_k"], 1, 10_000)
        for name in ("budget_overall", "budget_per_slice"):
            check_range(name, options[name], 0.0, 0.99, "budgets are fractions of accuracy: 0.02 = 2 points")
        style = {"description_width": "130px"}
        return {
            "preset": W.Dropdown(options=PRESETS, value=options["preset"], description="preset", style=style),
            "timing": W.Dropdown(options=TIMINGS, value=options["timing"], description="timing", style=style),
            # where the FP32 and INT8 graphs are timed; accuracy is scored on the CPU either way
            "device": W.Dropdown(options=sorted({"cpu", "cuda", device}), value=device, description="timing device", style=style),
            "n_boot": W.BoundedIntText(value=int(options["n_boot"]), min=100, max=100_000, description="bootstrap draws", style=style),
            "worst_k": W.BoundedIntText(value=int(options["worst_k"]), min=1, max=10_000, description="nodes to keep FP32", style=style),
            "budget_overall": W.BoundedFloatText(value=float(options["budget_overall"]), min=0.0, max=0.99, step=0.005,
                                                 description="budget overall", style=style),
            "budget_per_slice": W.BoundedFloatText(value=float(options["budget_per_slice"]), min=0.0, max=0.99, step=0.005,
                                                   description="budget per slice", style=style),
            "candidates": W.SelectMultiple(options=PRESETS, value=tuple(options["candidates"]), rows=4,
                                           description="search candidates", style=style),
            "figure": W.ToggleButtons(options=FIGURES, value=options["figure"], description="figure", style=style),
            "golden": W.Checkbox(value=False, description="show the golden edge cases instead of the test split", indent=False,
                                 layout=W.Layout(width="auto")),
        }

    def _controls_box(self) -> W.Widget:
        c = self.controls
        return W.VBox([
            W.HBox([c["preset"], c["timing"], c["n_boot"]]),
            W.HBox([c["device"]]),
            W.HBox([c["worst_k"]]),
            W.HBox([c["budget_overall"], c["budget_per_slice"]]),
            c["candidates"],
        ])

    def _build_views(self) -> list[W.Widget]:
        self.results_html = W.HTML("")
        self.search_html = W.HTML("")
        self.figure = go.FigureWidget(layout=dict(height=460, template="plotly_white"))
        self.flips_html = W.HTML("")
        return [self.results_html, self.search_html, self.controls["figure"], self.controls["golden"], self.figure,
                self.flips_html]

    def set_graph(self, graph: GraphLike, export: Optional[ExportResult] = None, data: Any = None) -> None:
        """The FP32 graph to quantize (and its export and data), e.g. from the graph step."""
        self.options["graph"] = graph
        if export is not None:
            self.options["export"] = export
        if data is not None:
            self.options["data"] = data
            self._data_cache = None
        self.block(None)

    # ---- inputs ------------------------------------------------------------------------------
    def _data(self) -> Any:
        data = self.options["data"]
        if data is None:
            data = DataConfig.quick()
        if isinstance(data, DataConfig):
            if self._data_cache is None:
                self._data_cache = load_data(data)
            return self._data_cache
        return data

    def _timing(self, values: dict[str, Any]) -> TimingConfig:
        device = values.get("device", "cpu")
        return TimingConfig.quick(device=device) if values["timing"] == "quick" else TimingConfig(device=device)

    def _export(self) -> Any:
        """The export the graph came from: given, else the one a FusionReport names (the library
        looks for export.json only beside the graph, which the Workbench layout does not have)."""
        if self.options["export"] is not None:
            return self.options["export"]
        export_path = getattr(self.options["graph"], "export_path", None)
        return export_path if export_path is not None and Path(export_path).is_file() else None

    def _graph(self) -> Any:
        graph = self.options["graph"]
        if graph is None:
            raise PanelInputError("no FP32 graph to quantize: export and fuse first (GraphPanel), or pass graph= "
                                  "a FusionReport, an ExportResult or an .onnx path")
        return graph

    # ---- actions -------------------------------------------------------------------------------
    def _compute(self, values: dict[str, Any]) -> QuantResult:
        graph = self._graph()
        cfg = QuantConfig.preset(values["preset"])
        out = self._resolve_run_dir("quantize") / layout.quantize_dir(values["preset"])
        baseline = self._baseline_for(graph)
        self.progress_callback(0, 1, None, f"quantizing with {values['preset']}, scoring every slice "
                                           f"({values['n_boot']} bootstrap draws), ranking nodes by SQNR")
        if baseline is None:  # the FP32 graph scored once, beside this variant (the next one finds it)
            baseline = prepare_baseline(graph, self._data(), out / BASELINE_DIR, BaselineConfig(timing=self._timing(values)),
                                        export=self._export())
        return run_quantization(baseline, cfg, out, evaluation=EvalConfig(n_boot=int(values["n_boot"])),
                                timing=self._timing(values))

    def _baseline_for(self, graph: Any):
        """The FP32 baseline an earlier quantization of the same graph saved (scored once, reused)."""
        source = getattr(graph, "fused_path", None) or getattr(graph, "onnx_path", None) or graph
        if not isinstance(source, (str, os.PathLike)):
            return None  # run_quantization explains what it needs
        for r in self.results.values():
            if Path(r.source_path).resolve() == Path(source).resolve() and Path(r.baseline_path).is_file():
                return load_baseline(r.baseline_path)
        return None

    def requantize(self) -> QuantResult:
        """The current quantization again, leaving its ``worst_k`` worst nodes (lowest SQNR) in FP32."""
        def compute(values: dict[str, Any]) -> QuantResult:
            if self.result is None:
                raise PanelInputError("nothing to re-quantize yet: press Quantize first")
            return requantize_excluding(self.result, worst_k=int(values["worst_k"]), n_boot=int(values["n_boot"]))
        return self._execute(compute, self._draw, self._summary, self._summary_colour)

    def run_search(self) -> SearchResult:
        """The fastest candidate whose accuracy drop stays within both budgets (FP32 included)."""
        def compute(values: dict[str, Any]) -> SearchResult:
            candidates = [QuantConfig.preset(name) for name in values["candidates"]]
            if not candidates:
                raise PanelInputError("search candidates is empty: select at least one preset (ctrl/cmd-click for several)")
            total = len(candidates) + 1
            graph = self._graph()
            baseline = self._baseline_for(graph)  # scored and timed once: not again for the search
            self.progress_callback(0, total, None, "scoring the FP32 graph" if baseline is None else "FP32 graph: the saved baseline")
            search = SearchConfig(candidates=tuple(candidates), budget_overall=float(values["budget_overall"]),
                                  budget_per_slice=float(values["budget_per_slice"]), n_boot=int(values["n_boot"]),
                                  timing=self._timing(values))
            return run_search(
                baseline if baseline is not None else graph, search, self._resolve_run_dir("quantize") / layout.SEARCH_DIR,
                data=self._data() if baseline is None else None, export=self._export(),
                previous=list(self.results.values()),  # presets quantized here with the same settings are reused
                progress=lambda done, n, what: self.progress_callback(done, n, None, f"scored {what}"),
            )
        return self._execute(compute, self._draw_search, self._search_summary, self._search_colour, store="search")

    def show_search(self, search: SearchResult) -> None:
        """Show a saved search without recomputing."""
        self.search = as_search_result(search)
        self._draw_search(self.search)
        self.status.value = self._status_html(f"opened: {self._search_summary(self.search)}", self._search_colour(self.search))

    # ---- drawing -----------------------------------------------------------------------------
    def _draw(self, r: QuantResult) -> None:
        self.results[r.name] = r
        self.results_html.value = results_table(list(self.results.values())) + "".join(
            f'<div style="color:{MUTED_COLOUR}">note: {html.escape(n)}</div>' for n in r.notes)
        self.flips_html.value = flips_table(r, golden=self._golden())
        if self.controls["figure"].value == "search trade-off":
            self.controls["figure"].value = "slice drift"  # redraws the figure through the observer
        else:
            self._draw_figure()

    def _redraw_views(self) -> None:
        if self.result is not None:
            self.flips_html.value = flips_table(self.result, golden=self._golden())
        self._draw_figure()

    def _golden(self) -> bool:
        return bool(self.controls["golden"].value and self.result is not None and self.result.golden is not None)

    def _draw_figure(self) -> None:
        which = self.controls["figure"].value
        if which == "search trade-off":
            replace_figure(self.figure, quant_plots.tradeoff(self.search) if self.search is not None else go.Figure(
                layout=dict(title="No search yet: set the budgets and press Search within budget", template="plotly_white")))
            return
        r = self.result
        if r is None:
            return
        golden = self._golden()
        builders: dict[str, Callable[[], go.Figure]] = {
            "slice drift": lambda: quant_plots.drift_bars(r, golden=golden),
            "confidence": lambda: quant_plots.confidence_scatter(r, golden=golden),
            "thresholds": lambda: quant_plots.threshold_curves(r, golden=golden),
            "node errors": lambda: quant_plots.node_errors(r),
        }
        replace_figure(self.figure, builders[which]())

    def _draw_search(self, s: SearchResult) -> None:
        rows = [[c.name, coloured("yes" if c.feasible else "no", c.feasible), fmt(c.latency_ms, ".2f", " ms"),
                 fmt(c.size_mib, ".1f", " MiB"), f"{fmt(100 * c.accuracy, '.1f')}%",
                 f"{c.check.worst_slice or '–'} {fmt(-100 * c.check.worst_slice_drop, '+.1f', ' pts')}",
                 "; ".join(c.check.violations[:2])] for c in s.candidates]
        chosen = coloured(s.message, s.chosen is not None)
        self.search_html.value = (
            f"<b>Search</b> (budgets: {fmt(100 * s.budget_overall, '.1f')} pts overall, "
            f"{fmt(100 * s.budget_per_slice, '.1f')} pts per slice; objective {html.escape(s.objective)}): {chosen}"
            + html_table(["candidate", "within budget", "latency", "size", "accuracy", "worst slice", "why not"], rows,
                         css_class="wb-table wb-search")
        )
        if self.controls["figure"].value == "search trade-off":
            self._draw_figure()
        else:
            self.controls["figure"].value = "search trade-off"

    def _summary(self, r: QuantResult) -> str:
        return (f"{r.name}: accuracy {fmt(100 * r.accuracy_delta, '+.1f')} pts, largest slice drop "
                f"{fmt(100 * r.report.max_slice_drop(), '.1f')} pts, {len(r.report.flips)} flips, "
                f"{fmt(r.speedup, '.2f')}x FP32 speed" + (" (timed under load: not a measured fact)" if r.contended else ""))

    def _summary_colour(self, r: QuantResult) -> str:
        if not r.validation.passed:
            return FAIL_COLOUR
        return WARN_COLOUR if r.report.significant_drops() else OK_COLOUR

    def _search_summary(self, s: SearchResult) -> str:
        return f"search: {s.chosen or 'no candidate within budget'}"

    def _search_colour(self, s: SearchResult) -> str:
        return OK_COLOUR if s.chosen else WARN_COLOUR
