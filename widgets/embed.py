"""The quantization panel for an embedding model (a sentence-transformers folder): INT8 presets
scored on retrieval slice by slice (NDCG@10 with paired intervals against FP32, the budget in
NDCG@10 terms), agreement without labels, speed against ``SentenceTransformer.encode``, and the search
for the fastest preset within the budget (worst nodes left in FP32 until no slice is below it).

A view over :class:`workbench.sessions.embed.EmbedSession` (:func:`workbench.embed.audit.run_embed_quantization`,
the search of :mod:`workbench.embed.search`) and :mod:`workbench.plots.embed`.
``QuantPanel(model=FOLDER)`` builds this panel when the folder holds an embedding model.
"""

from __future__ import annotations

import html
from typing import Any, Optional

import ipywidgets as W
import plotly.graph_objects as go

from workbench.core.options import field_help
from workbench.embed.audit import EmbedAuditConfig, EmbedQuantRun
from workbench.embed.encode import speed_of, speed_summary
from workbench.embed.retrieval import QUERY_KINDS
from workbench.quant.choice import left_all_in_fp32
from workbench.plots import embed as embed_plots
from workbench.quant import PRESETS, SearchResult
from workbench.sessions.embed import EmbedSession

from .base import (FAIL_COLOUR, OK_COLOUR, WARN_COLOUR, Panel, check_choice, check_range, coloured, config_default, fmt, html_table,
                   replace_figure)

FIGURES = ("retrieval drift", "cosine", "neighbour overlap", "speed")
# the EmbedAuditConfig field a control stands for, where its name differs
CONFIG_FIELD = {"queries": "builtin_queries"}


class EmbedQuantPanel(Panel):
    """Quantize an embedding model and see what it does to search, slice by slice.

    Options: ``model`` (a sentence-transformers folder), ``presets`` (names from
    ``workbench.quant.PRESETS``), ``queries`` (the built-in task's queries: plots or reviews),
    ``max_queries`` / ``max_docs`` (0: all), ``n_boot``, ``min_ndcg_ratio`` / ``max_slice_drop`` (the
    budget, of the scores and of the search), ``exclude_worst`` (also re-quantize with that many worst
    nodes left in FP32), ``max_excluded`` (the search: most nodes a preset may leave in FP32),
    ``time_speed``, ``run_dir`` (where the graphs go), ``figure``.

    ``panel.session`` is the :class:`~workbench.sessions.embed.EmbedSession`, ``panel.result`` its
    :class:`~workbench.embed.audit.EmbedQuantRun` and ``panel.search`` its latest
    :class:`~workbench.quant.SearchResult` ("Search within budget").
    """

    SESSION = EmbedSession
    OPTIONS = {
        "model": None,
        "presets": ("dynamic", "dynamic-per-channel"),
        # the audit's defaults are EmbedAuditConfig's (one place); 0 queries/documents: all of them
        "queries": config_default(EmbedAuditConfig, "builtin_queries"),
        "max_queries": 0,
        "max_docs": 0,
        "n_boot": config_default(EmbedAuditConfig, "n_boot"),
        "min_ndcg_ratio": config_default(EmbedAuditConfig, "min_ndcg_ratio"),
        "max_slice_drop": config_default(EmbedAuditConfig, "max_slice_drop"),
        "exclude_worst": config_default(EmbedAuditConfig, "exclude_worst"),
        "max_excluded": config_default(EmbedAuditConfig, "max_excluded"),
        "time_speed": True,
        "run_dir": None,
        "figure": "retrieval drift",
    }
    TITLE = "Quantize an embedding model, slice by slice"
    HELP = ("Each query slice's NDCG@10 change comes with a 95% paired-bootstrap interval; the dashed line is the per-slice "
            "budget. Agreement needs no labels: cosine to FP32 and how many of each text's 10 nearest neighbours stay.")
    RUN_LABEL = "Quantize and score"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.search_button = self.add_action("Search within budget", self.run_search, icon="search",
                                             tooltip=field_help(EmbedAuditConfig, "search"))
        self.controls["figure"].observe(lambda _c: self._draw_figure(), names="value")
        if self.options["model"] is None:
            self.block("an embedding model: pass model= a sentence-transformers folder")

    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        for p in options["presets"]:
            check_choice("presets", p, PRESETS)
        check_choice("queries", options["queries"], QUERY_KINDS)
        check_choice("figure", options["figure"], FIGURES)
        check_range("n_boot", options["n_boot"], 100, 100_000, "a 95% interval needs at least 100 bootstrap draws")
        check_range("min_ndcg_ratio", options["min_ndcg_ratio"], 0.5, 1.0, "0.997 keeps 99.7% of FP32's NDCG@10")
        check_range("max_slice_drop", options["max_slice_drop"], 0.0, 1.0, "an NDCG@10 difference: 0.01")
        for name in ("max_queries", "max_docs", "exclude_worst", "max_excluded"):
            check_range(name, options[name], 0, 1_000_000)
        style = {"description_width": "130px"}
        controls = {
            "presets": W.SelectMultiple(options=PRESETS, value=tuple(options["presets"]), rows=4, description="presets", style=style),
            "queries": W.Dropdown(options=QUERY_KINDS, value=options["queries"], description="queries", style=style),
            "max_queries": W.BoundedIntText(value=int(options["max_queries"]), min=0, max=1_000_000, description="queries (0: all)",
                                            style=style),
            "max_docs": W.BoundedIntText(value=int(options["max_docs"]), min=0, max=1_000_000, description="documents (0: all)",
                                         style=style),
            "n_boot": W.BoundedIntText(value=int(options["n_boot"]), min=100, max=100_000, description="bootstrap draws", style=style),
            "min_ndcg_ratio": W.BoundedFloatText(value=float(options["min_ndcg_ratio"]), min=0.5, max=1.0, step=0.001,
                                                 description="NDCG@10 kept", style=style),
            "max_slice_drop": W.BoundedFloatText(value=float(options["max_slice_drop"]), min=0.0, max=1.0, step=0.005,
                                                 description="slice drop allowed", style=style),
            "exclude_worst": W.BoundedIntText(value=int(options["exclude_worst"]), min=0, max=1000, description="nodes kept FP32",
                                              style=style),
            "max_excluded": W.BoundedIntText(value=int(options["max_excluded"]), min=0, max=1_000_000,
                                             description="search: most FP32", style=style),
            "time_speed": W.Checkbox(value=bool(options["time_speed"]), description="time against SentenceTransformer.encode",
                                     indent=False, layout=W.Layout(width="auto")),
            "figure": W.ToggleButtons(options=FIGURES, value=options["figure"], description="figure", style=style),
        }
        for name, widget in controls.items():  # the config's own help (the CLI flags and the docs read it there too)
            if name != "figure":
                widget.tooltip = field_help(EmbedAuditConfig, CONFIG_FIELD.get(name, name))
        return controls

    def _controls_box(self) -> W.Widget:
        c = self.controls
        return W.VBox([W.HBox([c["presets"], W.VBox([c["queries"], c["max_queries"], c["max_docs"]])]),
                       W.HBox([c["n_boot"], c["min_ndcg_ratio"], c["max_slice_drop"]]),
                       W.HBox([c["exclude_worst"], c["max_excluded"], c["time_speed"]]), c["figure"]])

    def _build_views(self) -> list[W.Widget]:
        self.table_html = W.HTML("")
        self.changed_html = W.HTML("")
        self.search_html = W.HTML("")
        self.figure = go.FigureWidget(layout=dict(template="plotly_white", height=360))
        return [self.table_html, self.search_html, self.figure, self.changed_html]

    @property
    def search(self) -> Optional[SearchResult]:
        """The latest search (the session's)."""
        return self.session.search_result

    @staticmethod
    def _config(values: dict[str, Any]) -> EmbedAuditConfig:
        return EmbedAuditConfig(builtin_queries=values["queries"], presets=tuple(values["presets"]),
                                max_queries=values["max_queries"] or None, max_docs=values["max_docs"] or None,
                                n_boot=int(values["n_boot"]), min_ndcg_ratio=float(values["min_ndcg_ratio"]),
                                max_slice_drop=float(values["max_slice_drop"]), exclude_worst=int(values["exclude_worst"]),
                                time_speed=bool(values["time_speed"]))

    def _compute(self, values: dict[str, Any]) -> EmbedQuantRun:
        return self.session.quantize(self._config(values))

    def run_search(self) -> SearchResult:
        """The fastest preset within the NDCG@10 budget (FP32 included), each preset that misses it quantized
        again with up to ``max_excluded`` of its worst nodes left in FP32; the presets are scored as by the
        Run button on the way."""
        def compute(values: dict[str, Any]) -> SearchResult:
            return self.session.search(self._config(values), max_excluded=int(values["max_excluded"]))
        return self._execute(compute, self._draw_search, self._search_summary, self._search_colour, keep=self.session.keep_search)

    def _draw(self, r: EmbedQuantRun) -> None:
        ev = r.evaluation
        if ev is None:
            self.table_html.value = coloured(r.export.validation.text(), False)
            return
        rows = []
        for v in ev.variants:
            all_ = v.retrieval.overall() if v.retrieval else None
            sp = speed_of(r.speed, v.name, 1) if r.speed is not None else None
            rows.append([v.name, fmt(all_.variant["ndcg@10"] if all_ else None, ".4f"),
                         fmt(100 * v.retrieval.ndcg_ratio if v.retrieval else None, ".2f", "%"),
                         fmt(v.agreement.overall().cosine.value, ".5f"), fmt(v.agreement.overall().overlap_at_10.value, ".3f"),
                         fmt(sp["speedup"] if sp else None, ".2f", "x"),
                         coloured("yes" if v.meets_budget else "no: " + "; ".join(v.budget_reasons), bool(v.meets_budget))])
        head = (f"<div>{html.escape(ev.task_description)}; FP32 graph NDCG@10 {fmt(ev.fp32_metrics.get('ndcg@10'), '.4f')}"
                + (f", SentenceTransformer.encode {fmt(ev.reference_metrics['ndcg@10'], '.4f')}" if ev.reference_metrics else "")
                + "</div>")
        self.table_html.value = head + html_table(["variant", "NDCG@10", "of FP32", "cosine to FP32", "top-10 kept",
                                                   "vs encode (batch 1)", "meets budget"], rows)
        changed = [c for v in ev.variants if v.retrieval for c in v.retrieval.changed[:3]]
        self.changed_html.value = ("<b>Queries whose results changed most</b>" + html_table(
            ["query", "NDCG@10 FP32", "NDCG@10 quantized", "top-10 kept"],
            [[c.query[:120], fmt(c.ndcg_fp32, ".3f"), fmt(c.ndcg_variant, ".3f"), fmt(c.overlap, ".0%")] for c in changed])
            if changed else "")
        self._draw_figure()

    def _draw_figure(self) -> None:
        r = self.result
        if r is None or r.evaluation is None:
            return
        which = self.controls["figure"].value
        if which == "speed" and r.speed is None:
            replace_figure(self.figure, go.Figure(layout=dict(title="Not timed: tick 'time against SentenceTransformer.encode'",
                                                              template="plotly_white")))
            return
        builders = {"retrieval drift": lambda: embed_plots.retrieval_drift(r.evaluation),
                    "cosine": lambda: embed_plots.cosine_distribution(r.evaluation),
                    "neighbour overlap": lambda: embed_plots.neighbour_overlap(r.evaluation),
                    "speed": lambda: embed_plots.embed_speed(speed_summary(r.speed))}
        replace_figure(self.figure, builders[which]())

    def _draw_search(self, s: SearchResult) -> None:
        if self.result is not None:  # the quantization the search ran on
            self._draw(self.result)
        fp32 = next((c.accuracy for c in s.candidates if c.precision == "fp32" and c.config is None), None)
        rows = [[c.name, len(c.config.nodes_to_exclude) if c.config is not None else "-",
                 fmt(100 * c.accuracy / fp32 if fp32 else None, ".2f", "%"),
                 f"{c.check.worst_slice or '-'} {fmt(-c.check.worst_slice_drop, '+.4f')}",
                 coloured("yes" if c.check.feasible else "no: " + "; ".join(c.check.violations[:2]), c.check.feasible),
                 _speed_cell(c), "chosen" if c.name == s.chosen else ""] for c in s.candidates]
        self.search_html.value = (
            f"<b>Search</b> (NDCG@10 kept {fmt(100 * (1 - s.budget_overall), '.1f')}%, slice drop allowed "
            f"{s.budget_per_slice:g}): {coloured(s.message, s.best is not None and s.best.precision == 'int8')}"
            + html_table(["variant", "nodes in FP32", "NDCG@10 of FP32's", "worst slice (NDCG@10 change)", "within budget",
                          "speed vs FP32 graph (95% CI)", ""], rows, css_class="wb-table wb-search"))

    def _search_summary(self, s: SearchResult) -> str:
        best = s.best
        if best is not None and best.precision == "int8":
            return (f"search: {best.name}, within the NDCG@10 budget at {best.speedup:.2f}x the FP32 graph"
                    + (" (timed under load: not a measured fact)" if best.contended else ""))
        whole = [c for c in s.candidates if left_all_in_fp32(c)]
        if whole:
            return f"search: no INT8 variant fits the budget ({whole[0].name} is {whole[0].too_slow}); keep the FP32 graph"
        return "search: keep the FP32 graph (no INT8 variant within the budget and past the speed guard)"

    def _search_colour(self, s: SearchResult) -> str:
        return OK_COLOUR if s.best is not None and s.best.precision == "int8" else WARN_COLOUR

    def _summary(self, r: EmbedQuantRun) -> str:
        if r.evaluation is None:
            return "the exported graph failed validation"
        ok = [v.name for v in r.evaluation.variants if v.meets_budget and v.name != "fused"]
        return f"within budget: {', '.join(ok)}" if ok else "no quantized variant meets the budget"

    def _summary_colour(self, r: EmbedQuantRun) -> str:
        ok = r.evaluation is not None and any(v.meets_budget and v.name != "fused" for v in r.evaluation.variants)
        return OK_COLOUR if ok else FAIL_COLOUR


def _speed_cell(c) -> str:
    """A search candidate's speed-up over the FP32 graph with its interval, or the guard's word (or why it was
    not timed)."""
    if c.precision == "fp32":
        return coloured(c.too_slow, False) if left_all_in_fp32(c) else "reference"
    if c.too_slow:
        return coloured(c.too_slow, False)
    text = f"{c.speedup:.2f}x ({c.speedup_lo:.2f}-{c.speedup_hi:.2f})"
    return coloured(text + " timed under load", None) if c.contended else coloured(text, c.speedup_lo > 1.0)
