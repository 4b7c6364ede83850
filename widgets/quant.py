"""The quantization panel: INT8 presets scored slice by slice against the FP32 graph (drift with
95% intervals, flipped predictions), re-quantization without the nodes that hurt most, and the
accuracy-constrained search.

A view over :class:`workbench.sessions.quant.QuantSession` (:func:`workbench.quant.run_quantization`,
:func:`~workbench.quant.requantize_excluding`, :func:`~workbench.quant.run_search` through the
library, the results kept by name) and :mod:`workbench.plots.quant`.
"""

from __future__ import annotations

import html
from typing import Any, Callable, Optional

import ipywidgets as W
import plotly.graph_objects as go

from workbench.core.options import field_help
from workbench.plots import quant as quant_plots
from workbench.quant import (
    DEFAULT_BUDGET_OVERALL,
    DEFAULT_BUDGET_PER_SLICE,
    DEFAULT_N_BOOT,
    EvalConfig,
    PRESETS,
    QuantConfig,
    QuantResult,
    SearchConfig,
    SearchResult,
    TimingConfig,
)
from workbench.quant.ship import ShippedGraph
from workbench.runtime.device import DeviceError, normalize_device
from workbench.sessions.quant import (  # noqa: F401  (as_quant_result, as_search_result: widgets.quant's names too)
    TIMINGS, GraphLike, QuantSession, as_quant_result, as_search_result, timing_config)

from .base import (
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

FIGURES = ("slice drift", "confidence", "thresholds", "node errors", "search trade-off")
FLIP_ROWS = 40


def results_table(results: list[QuantResult]) -> str:
    """Every quantization made in this panel, one row each (the latest last)."""
    from workbench.quant.budget import DEFAULT_BUDGET_PER_SLICE
    from workbench.quant.rows import variant_row

    rows = []
    for row in map(variant_row, results):
        where = f" ({row.worst_slice})" if row.worst_slice else ""
        rows.append([
            row.name,
            coloured("passed" if row.validation_passed else "FAILED", row.validation_passed),
            Markup(f"{fmt(100 * row.accuracy, '.1f')}% "
                   + coloured(f"({fmt(100 * row.accuracy_delta, '+.1f')} pts)", row.accuracy_delta >= 0)),
            coloured(f"{fmt(100 * row.max_slice_drop, '.1f')} pts{where}", row.max_slice_drop <= DEFAULT_BUDGET_PER_SLICE),
            row.n_flips,
            _speed_cell(row),
            fmt(100 * row.of_floor, ".0f", "%") if row.of_floor else "-",
            f"{fmt(row.size_mib, '.1f')} / {fmt(row.fp32_size_mib, '.1f')} MiB",
            row.nodes_kept_fp32,
        ])
    return html_table(
        ["quantization", "validation", "accuracy (Δ vs FP32)", "largest slice drop", "flips", "speed-up vs FP32 (95% CI)",
         "of this CPU's floor", "size INT8 / FP32", "nodes kept FP32"], rows, css_class="wb-table wb-quant-results")


def _speed_cell(row) -> Markup:
    """The speed-up of a :class:`~workbench.quant.rows.VariantRow` with its interval (green when the whole
    interval is above 1, red when below), or a warning when it was timed while other work used the CPU."""
    if row.contended:
        return Markup(coloured(f"{fmt(row.speedup, '.2f', 'x')} timed under load", None) + " (not a measured fact)")
    if row.speedup_ci is None:
        return coloured(fmt(row.speedup, ".2f", "x"), row.speedup >= 1.0 if row.speedup == row.speedup else None)
    lo, hi = row.speedup_ci
    return coloured(f"{row.speedup:.2f}x ({lo:.2f}-{hi:.2f})", row.speedup_is_gain)


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
    quick reviews), ``preset`` (a name from ``workbench.quant.PRESETS``), ``timing`` (quick, default),
    ``n_boot`` (bootstrap replicates), ``worst_k`` (nodes left in FP32 by "Re-quantize"),
    ``budget_overall`` / ``budget_per_slice`` (accuracy drops allowed by the search, as fractions),
    ``candidates`` (presets the search tries), ``run_dir``, ``saved`` (a ``QuantResult`` or
    ``quantize.json``), ``saved_search`` (a ``SearchResult`` or ``search.json``), ``figure``.

    ``panel.session`` is the :class:`~workbench.sessions.quant.QuantSession` holding the work;
    ``panel.result`` (the latest :class:`~workbench.quant.QuantResult`), ``panel.results`` (all of
    them by name) and ``panel.search`` (the :class:`~workbench.quant.SearchResult`) are read from it.
    """

    SESSION = QuantSession
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
        self.requantize_button = self.add_action("Re-quantize without the worst nodes", self.requantize, icon="filter",
                                                 tooltip="the same preset, leaving the worst_k nodes (lowest SQNR) in FP32")
        self.search_button = self.add_action("Search within budget", self.run_search, icon="search",
                                             tooltip="the fastest candidate whose drop fits both budgets")
        self.ship_button = self.add_action("Ship the chosen graph", self.ship, icon="archive",
                                           tooltip="the search's choice into chosen/ of the run folder, with its tokenizer, "
                                                   "labels, settings.json and a predict.py that needs no PyTorch")
        self.controls["figure"].observe(lambda _c: self._draw_figure(), names="value")
        self.controls["golden"].observe(lambda _c: self._redraw_views(), names="value")
        if self.session.graph is None and self.options["saved"] is None:
            self.block("an FP32 graph: export and fuse in the step above, or pass graph=")
        if self.options["saved"] is not None:
            self.show(self.options["saved"])  # its FP32 graph becomes the graph: quantizing again reuses its baseline
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
            # the tooltips are the configs' own help (the CLI flags and the docs read it there too)
            "n_boot": W.BoundedIntText(value=int(options["n_boot"]), min=100, max=100_000, description="bootstrap draws", style=style,
                                       tooltip=field_help(EvalConfig, "n_boot")),
            "worst_k": W.BoundedIntText(value=int(options["worst_k"]), min=1, max=10_000, description="nodes to keep FP32", style=style,
                                        tooltip=field_help(QuantConfig, "exclude_worst")),
            "budget_overall": W.BoundedFloatText(value=float(options["budget_overall"]), min=0.0, max=0.99, step=0.005,
                                                 description="budget overall", style=style,
                                                 tooltip=field_help(SearchConfig, "budget_overall")),
            "budget_per_slice": W.BoundedFloatText(value=float(options["budget_per_slice"]), min=0.0, max=0.99, step=0.005,
                                                   description="budget per slice", style=style,
                                                   tooltip=field_help(SearchConfig, "budget_per_slice")),
            "candidates": W.SelectMultiple(options=PRESETS, value=tuple(options["candidates"]), rows=4,
                                           description="search candidates", style=style,
                                           tooltip=field_help(SearchConfig, "candidates")),
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
        self.ship_html = W.HTML("")
        self.figure = go.FigureWidget(layout=dict(height=460, template="plotly_white"))
        self.flips_html = W.HTML("")
        return [self.results_html, self.search_html, self.ship_html, self.controls["figure"], self.controls["golden"], self.figure,
                self.flips_html]

    def set_graph(self, graph: GraphLike, export: Optional[Any] = None, data: Any = None) -> None:
        """The FP32 graph to quantize (and its export and data), e.g. from the graph step."""
        self.session.set_graph(graph, export=export, data=data)
        self.block(None)

    @property
    def results(self) -> dict[str, QuantResult]:
        """Every quantization made or opened here, by name (the session's)."""
        return self.session.results

    @property
    def search(self) -> Optional[SearchResult]:
        """The latest search (the session's)."""
        return self.session.search_result

    def _timing(self, values: dict[str, Any]) -> TimingConfig:
        return timing_config(values["timing"], values.get("device", "cpu"))

    # ---- actions -------------------------------------------------------------------------------
    def _compute(self, values: dict[str, Any]) -> QuantResult:
        return self.session.quantize(values["preset"], n_boot=int(values["n_boot"]), timing=self._timing(values))

    def _open(self, result: Any) -> QuantResult:
        return self.session.open(result)

    def requantize(self) -> QuantResult:
        """The current quantization again, leaving its ``worst_k`` worst nodes (lowest SQNR) in FP32."""
        def compute(values: dict[str, Any]) -> QuantResult:
            return self.session.requantize(worst_k=int(values["worst_k"]), n_boot=int(values["n_boot"]))
        return self._execute(compute, self._draw, self._summary, self._summary_colour)

    def run_search(self) -> SearchResult:
        """The fastest candidate whose accuracy drop stays within both budgets (FP32 included)."""
        def compute(values: dict[str, Any]) -> SearchResult:
            return self.session.search(values["candidates"], budget_overall=float(values["budget_overall"]),
                                       budget_per_slice=float(values["budget_per_slice"]), n_boot=int(values["n_boot"]),
                                       timing=self._timing(values))
        return self._execute(compute, self._draw_search, self._search_summary, self._search_colour, keep=self.session.keep_search)

    def ship(self) -> ShippedGraph:
        """The search's choice into ``chosen/`` of its run folder, ready to run without PyTorch (docs: Ship it)."""
        return self._execute(lambda _values: self.session.ship(), self._draw_ship, lambda s: s.text,
                             lambda s: OK_COLOUR if s.precision == "int8" else WARN_COLOUR, keep=lambda s: s)

    def _draw_ship(self, s: ShippedGraph) -> None:
        ops = ", ".join(s.contrib_ops) or "none"
        self.ship_html.value = (f"<b>Shipped</b> {html.escape(s.variant)} ({html.escape(s.precision.upper())}) into "
                                f"<code>{html.escape(str(s.out_dir))}</code>: run <code>python predict.py TEXT</code> there "
                                f"(onnxruntime, tokenizers, numpy). ONNX Runtime's own operators: {html.escape(ops)}.")

    def show_search(self, search: Any) -> None:
        """Show a saved search without recomputing."""
        shown = self.session.open_search(search)
        self._draw_search(shown)
        self.status.value = self._status_html(f"opened: {self._search_summary(shown)}", self._search_colour(shown))

    # ---- drawing -----------------------------------------------------------------------------
    def _draw(self, r: QuantResult) -> None:
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
