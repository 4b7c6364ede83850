"""Fine-tuning panels: :class:`TrainPanel` (train eager / ORTModule / torch.compile side by side,
live progress and loss curves, Stop) and :class:`ComparePanel` (the comparison figures and the
ratio table). Both are views over their sessions (:mod:`workbench.sessions.train`), which run
:func:`workbench.train.run_comparison` and :func:`workbench.train.compare`.
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Any, Optional

import ipywidgets as W
import plotly.graph_objects as go

from workbench.core.options import field_help
from workbench.data.load import DataConfig
from workbench.plots import train as train_plots
from workbench.sessions.train import ComparisonLike, CompareSession, TrainSession, as_comparison  # noqa: F401  (widgets.train's names too)
from workbench.train import Backend, CompareConfig, Comparison, Progress, RunStatus, TrainConfig, verdicts_for

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

PRESETS = ("quick", "demo", "full")
BACKENDS = tuple(b.value for b in Backend)


def runs_table(c: Comparison) -> str:
    """One row per backend: did it run, and in what (ONNX Runtime or not), with its figures."""
    rows = []
    for r in c.runs:
        ok = r.status is RunStatus.OK
        in_ort = "yes" if r.executed_in_onnxruntime else ("NO" if r.backend is Backend.ORTMODULE else "–")
        rows.append([
            r.backend.value,
            coloured(r.status.value, ok if r.status is not RunStatus.STOPPED else None),
            coloured(in_ort, None if r.backend is not Backend.ORTMODULE else r.executed_in_onnxruntime),
            f"{len(r.steps)}/{r.total_steps}",
            fmt(r.startup_s, ".1f", " s"),
            fmt(r.median_step_s * 1000, ".0f", " ms"),
            fmt(r.samples_per_s, ".1f"),
            fmt(r.peak_memory_mib, ".0f", " MiB"),
            fmt(r.final_accuracy, ".3f"),
            r.reason,
        ])
    return html_table(
        ["backend", "status", "ran in ONNX Runtime", "steps", "start-up", "median step", "samples/s", "peak memory",
         "val accuracy", "cause and fix (when not ok)"],
        rows, css_class="wb-table wb-runs",
    )


def verdict_html(c: Comparison) -> str:
    """The training verdicts (:func:`workbench.train.verdicts_for`): one line per backend compared with the
    baseline, like for like, with its interval; where ORTModule does not pay, where it is reported to."""
    out = []
    for v in verdicts_for(c).verdicts:
        colour = OK_COLOUR if v.outcome == "gain" else (WARN_COLOUR if v.outcome in ("no gain", "loss") else MUTED_COLOUR)
        more = ""
        if v.where_it_pays:
            more = (f'<div style="color:{MUTED_COLOUR}">Where it is reported to pay (their figures): {html.escape(v.where_it_pays)}. '
                    f"To try next: {html.escape('; '.join(v.next_steps))}.</div>")
        out.append(f'<div class="wb-train-verdict" style="border-left:4px solid {colour};padding:4px 10px;margin:6px 0">'
                   f"<b>Verdict:</b> {html.escape(v.text)}{more}</div>")
    return "".join(out)


def graphs_html(c: Comparison) -> str:
    """What ORTModule built for the training step: node counts and fused operators per stage."""
    parts = []
    for r in c.runs:
        if r.graphs is None:
            continue
        rows = [[g.name, g.nodes, ", ".join(f"{k} {v}" for k, v in g.fused_op_counts.items()) or "–",
                 ", ".join(f"+{v} {k}" for k, v in g.added_ops.items()) or "–",
                 ", ".join(f"-{v} {k}" for k, v in g.removed_ops.items()) or "–"] for g in r.graphs.stages]
        parts.append(
            f"<details><summary>{r.backend.value}: the training graphs ONNX Runtime built ({len(rows)} stages, "
            f"in {r.graphs.folder})</summary>"
            + html_table(["stage", "nodes", "fused operators", "added", "removed"], rows, css_class="wb-table wb-graphs")
            + "</details>"
        )
    return "".join(parts)


class TrainPanel(Panel):
    """Fine-tune one model with several backends, same seed, data order and schedule.

    Options: ``model`` ("tiny", "minilm" or a model folder), ``preset`` (quick, demo, full),
    ``backends`` (any of eager, ortmodule, compile), ``max_steps`` (0: the preset's),
    ``data`` ("reviews" or a CSV/JSONL/Parquet file), ``isolate`` (each backend in its own process:
    honest peak memory), ``config`` (a ``TrainConfig`` to start from instead of the preset),
    ``run_dir`` (where the runs are written; default a new folder under ``runs/``), ``saved`` (a
    ``Comparison`` or a saved ``compare.json`` to open without training).

    ``panel.session`` is the :class:`~workbench.sessions.train.TrainSession` holding the work;
    ``panel.result`` is its :class:`~workbench.train.compare.Comparison`.
    """

    SESSION = TrainSession
    OPTIONS = {
        "model": "tiny",
        "preset": "quick",
        "backends": ("eager", "ortmodule"),
        "max_steps": 0,
        "data": "reviews",
        "isolate": False,
        "config": None,
        "run_dir": None,
        "saved": None,
    }
    TITLE = "Fine-tune: eager, ORTModule, torch.compile"
    HELP = ("Same seed, data order, optimizer and schedule for every backend; only the engine differs. "
            "Watch the loss curves overlap and the start-up cost of ORTModule (export + graph build) and torch.compile.")
    RUN_LABEL = "Train"
    STOPPABLE = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.options["config"] is not None and not isinstance(self.options["config"], TrainConfig):
            raise TypeError(f"config must be a workbench.train.TrainConfig, got {type(self.options['config']).__name__}")
        if self.options["saved"] is not None:
            self.show(self.options["saved"])

    # ---- controls ----------------------------------------------------------------------------
    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        backends = tuple(options["backends"])
        for b in backends:
            check_choice("backends", b, BACKENDS)
        check_choice("preset", options["preset"], PRESETS)
        check_range("max_steps", options["max_steps"] or 0, 0, 1_000_000, "0 trains for the preset's steps")
        style = {"description_width": "110px"}
        return {
            "model": W.Combobox(value=str(options["model"]), options=["tiny", "minilm"], ensure_option=False,
                                description="model", placeholder="tiny, minilm or a model folder", style=style,
                                tooltip=field_help(TrainConfig, "model")),
            "preset": W.Dropdown(options=PRESETS, value=options["preset"], description="preset", style=style),
            # the tooltips are the configs' own help (the CLI flags and the docs read it there too)
            "backends": W.SelectMultiple(options=BACKENDS, value=backends, rows=3, description="backends", style=style,
                                         tooltip=field_help(CompareConfig, "backends")),
            "max_steps": W.BoundedIntText(value=int(options["max_steps"] or 0), min=0, max=1_000_000,
                                          description="steps (0: preset)", style=style,
                                          tooltip=field_help(TrainConfig, "max_steps")),
            "data": W.Text(value=str(options["data"]), description="data",
                           placeholder="reviews, or a CSV / JSONL / Parquet file", style=style,
                           tooltip=field_help(DataConfig, "source")),
            "isolate": W.Checkbox(value=bool(options["isolate"]),
                                  description="each backend in its own process, taking turns step by step (own peak memory; speed with an "
                                              "interval)",
                                  indent=False, layout=W.Layout(width="auto"), tooltip=field_help(CompareConfig, "isolate")),
        }

    def _build_views(self) -> list[W.Widget]:
        self.figure = go.FigureWidget(layout=dict(title="Training loss (live)", height=380,
                                                  xaxis_title="optimizer step", yaxis_title="loss"))
        self.figure.layout.template = "plotly_white"
        self.runs_html = W.HTML("")
        self.graphs_html = W.HTML("")
        return [self.figure, self.runs_html, self.graphs_html]

    def config(self, values: Optional[dict[str, Any]] = None) -> TrainConfig:
        """The :class:`TrainConfig` the controls describe (the library validates it)."""
        values = values or self.values()
        base: TrainConfig = self.options["config"] or getattr(TrainConfig, values["preset"])()
        changes: dict[str, Any] = {}
        model = str(values["model"]).strip()
        if not model:
            raise PanelInputError("model is empty: choose 'tiny' (seconds), 'minilm' (minutes) or type a model folder")
        changes["model"] = model
        if values["max_steps"]:
            changes["max_steps"] = int(values["max_steps"])
        source = str(values["data"]).strip() or "reviews"
        if source != base.data.source:
            changes["data"] = dataclasses.replace(base.data, source=source)
        return base.replace(**changes)

    # ---- running -----------------------------------------------------------------------------
    def _compute(self, values: dict[str, Any]) -> Comparison:
        cfg = self.config(values)
        backends = list(values["backends"])
        if not backends:
            raise PanelInputError("backends is empty: select at least one of eager, ortmodule, compile (ctrl/cmd-click for several)")
        self._start_live(backends)
        return self.session.train(cfg, CompareConfig(backends=tuple(backends), isolate=bool(values["isolate"])),
                                  on_step=self._on_progress)

    def _open(self, result: Any) -> Comparison:
        return self.session.open(result)

    def _start_live(self, backends: list[str]) -> None:
        fig = go.Figure(layout=dict(title="Training loss (live)", height=380, template="plotly_white",
                                    xaxis_title="optimizer step", yaxis_title="loss (cross-entropy, nats)"))
        for b in backends:
            fig.add_trace(go.Scatter(x=[], y=[], mode="lines", name=b, line=dict(color=train_plots.COLORS[Backend(b)]),
                                     meta={"backend": b, "kind": "live"}))
        replace_figure(self.figure, fig)
        self._live_index = {b: i for i, b in enumerate(backends)}
        self.runs_html.value = ""
        self.graphs_html.value = ""

    def _on_progress(self, p: Progress) -> None:
        """Progress callback given to the library: the bar, and one point per step on the live curve."""
        backend = p.backend.value if isinstance(p.backend, Backend) else str(p.backend)
        if p.phase == "startup":
            what = {"ortmodule": "exporting and building the ONNX Runtime graph on the first step",
                    "compile": "compiling on the first steps"}.get(backend, "first step")
            self.progress_callback(0, p.total_steps, None, f"{backend}: {what}")
            return
        detail = f"{backend}: loss {fmt(p.loss, '.4f')} · {fmt(p.samples_per_s, '.1f')} samples/s"
        if p.val_accuracy is not None:
            detail += f" · validation accuracy {fmt(p.val_accuracy, '.3f')}"
        eta = p.eta_s if p.eta_s is not None and math.isfinite(p.eta_s) else None
        index = getattr(self, "_live_index", {}).get(backend)
        if index is not None and p.phase in ("train", "eval") and math.isfinite(p.loss):
            trace = self.figure.data[index]
            with self.figure.batch_update():
                trace.x = (*(trace.x or ()), p.step)
                trace.y = (*(trace.y or ()), p.loss)
        # the bar moves last: whoever watches it (progress.bar.observe) sees the curve already drawn
        self.progress_callback(p.step, p.total_steps, eta, detail)

    def _draw(self, c: Comparison) -> None:
        replace_figure(self.figure, train_plots.loss_curves(c))
        self.figure.update_layout(height=420)
        notes = "".join(f"<li>{n}</li>" for n in c.notes)
        where = f'<div style="color:{MUTED_COLOUR}">runs written to {c.run_dir}</div>' if c.run_dir else ""
        self.runs_html.value = verdict_html(c) + runs_table(c) + (f"<ul class=\"wb-notes\">{notes}</ul>" if notes else "") + where
        self.graphs_html.value = graphs_html(c)

    def _summary(self, c: Comparison) -> str:
        return "; ".join(
            f"{r.backend.value} {r.status.value}" + (" (in ONNX Runtime)" if r.executed_in_onnxruntime else "")
            for r in c.runs
        )

    def _summary_colour(self, c: Comparison) -> str:
        statuses = {r.status for r in c.runs}
        if statuses <= {RunStatus.OK}:
            return OK_COLOUR
        return FAIL_COLOUR if statuses & {RunStatus.FAILED, RunStatus.FELL_BACK} else WARN_COLOUR

    # ---- what later steps need ------------------------------------------------------------------
    def checkpoints(self) -> dict[str, str]:
        """Checkpoint folders of the finished runs, labelled by backend, the one the export stage takes
        first (:func:`workbench.flow.handoffs.ordered_checkpoints`: what the graph step can export)."""
        return self.session.checkpoints()


FIGURES = {
    "loss curves": train_plots.loss_curves,
    "step times": train_plots.step_time_distribution,
    "throughput and memory": train_plots.throughput_memory_bars,
}


def ratio_table(c: Comparison) -> str:
    """Each backend against the baseline: >1 is better for every ratio, green when better."""
    rows = []
    for s in c.summaries:
        if s.backend is c.baseline:
            rows.append([s.backend.value + " (baseline)", "1.00x", "1.00x", "1.00x", "–", "–",
                         fmt(s.final_accuracy.value, ".3f"), s.status.value])
            continue
        try:
            r = c.ratio(s.backend)
        except KeyError:
            rows.append([s.backend.value, "–", "–", "–", "–", "–", fmt(s.final_accuracy.value, ".3f"),
                         coloured(f"{s.status.value}: no ratio ({s.reason})" if s.reason else f"{s.status.value}: no ratio", False)])
            continue

        def x(v: float) -> Markup:
            return coloured(fmt(v, ".2f", "x"), None if not math.isfinite(v) else v >= 1.0)

        speed = coloured(r.speed_text() + ("" if r.like_for_like else f" (NOT like for like: {', '.join(r.differs_in)})"),
                         None if not math.isfinite(r.throughput) else (r.steady.is_gain if r.interleaved else r.throughput >= 1.0))
        rows.append([
            s.backend.value, speed, x(r.memory), x(r.startup),
            coloured(f"{fmt(r.max_loss_diff, '.1e')} over {r.steps_compared} steps", r.loss_within_tolerance),
            coloured(fmt(r.accuracy_diff, '+.3f'), None if not math.isfinite(r.accuracy_diff) else r.accuracy_diff >= 0),
            fmt(s.final_accuracy.value, ".3f"), s.status.value,
        ])
    settings = next((r.baseline_settings for r in c.ratios if r.baseline_settings), "")
    return html_table(
        ["backend", "throughput (interval)", "memory", "start-up", "max |Δ loss|", "Δ accuracy", "val accuracy", "status"],
        rows, css_class="wb-table wb-ratios",
    ) + (f'<div style="color:{MUTED_COLOUR}">every backend with the same settings: {html.escape(settings)}</div>' if settings else "")


class ComparePanel(Panel):
    """The comparison of training runs: loss parity, step times, throughput and memory, and the
    ratio table (every ratio is "times better than the baseline": >1 is better).

    Options: ``comparison`` (a ``Comparison`` or a saved ``compare.json``/run folder; the
    TrainPanel's result in the Workbench), ``baseline`` (a backend), ``tolerance`` (loss parity
    tolerance; 0: the library's default for the config), ``figure`` (which figure to show).
    Run recomputes :func:`workbench.train.compare.compare` on the same runs with the chosen baseline and
    tolerance; nothing is retrained. ``panel.session`` is the :class:`~workbench.sessions.train.CompareSession`;
    ``panel.result`` its :class:`~workbench.train.compare.Comparison`.
    """

    SESSION = CompareSession
    OPTIONS = {"comparison": None, "baseline": "eager", "tolerance": 0.0, "figure": "loss curves"}
    TITLE = "Compare the runs"
    HELP = ("Every backend trains with the same settings (optimizer, attention, dropout, precision, batch): only the backend "
            "differs. Throughput and memory 2.00x mean twice as good as the baseline; with isolate, the backends' processes take "
            "turns step by step and the throughput carries an interval. A run that fell back or failed never enters a ratio.")
    RUN_LABEL = "Compare"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("background", False)  # compare() is instant: no thread needed
        super().__init__(**kwargs)
        self.controls["figure"].observe(lambda _change: self._draw_figure(), names="value")
        self.block("a training run: train in the step above, or open a saved run")
        if self.options["comparison"] is not None:
            self.set_input(as_comparison(self.options["comparison"]))

    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        check_choice("figure", options["figure"], list(FIGURES))
        check_choice("baseline", options["baseline"], BACKENDS)
        return {
            "baseline": W.Dropdown(options=BACKENDS, value=options["baseline"], description="baseline"),
            "tolerance": W.BoundedFloatText(value=float(options["tolerance"]), min=0.0, max=10.0, step=0.001,
                                            description="tolerance", tooltip="loss parity tolerance; 0: the default for the config"),
            "figure": W.ToggleButtons(options=list(FIGURES), value=options["figure"], description="figure"),
        }

    def _build_views(self) -> list[W.Widget]:
        self.figure = go.FigureWidget(layout=dict(height=420, template="plotly_white"))
        self.table_html = W.HTML("")
        return [self.table_html, self.figure]

    def set_input(self, comparison: Comparison) -> None:
        """Take the runs to compare (from the TrainPanel or a saved run) and show them as they are."""
        given = self.session.set_input(comparison)
        backends = [r.backend.value for r in given.runs]
        self.controls["baseline"].options = backends
        self.controls["baseline"].value = given.baseline.value if given.baseline.value in backends else backends[0]
        self.block(None)
        self.show(given)

    @property
    def input(self) -> Optional[Comparison]:
        """The runs as trained (the session's)."""
        return self.session.input

    def _compute(self, values: dict[str, Any]) -> Comparison:
        return self.session.compare(values["baseline"], float(values["tolerance"]) or None)

    def _draw(self, c: Comparison) -> None:
        parity = coloured("loss curves agree" if c.loss_parity else "loss curves DIFFER", c.loss_parity)
        notes = "".join(f"<li>{n}</li>" for n in c.notes)
        self.table_html.value = (
            ratio_table(c)
            + f'<div class="wb-parity">{parity}: {c.parity_basis}</div>'
            + (f'<ul class="wb-notes">{notes}</ul>' if notes else "")
        )
        self._draw_figure()

    def _draw_figure(self) -> None:
        if self.result is None:
            return
        try:
            replace_figure(self.figure, FIGURES[self.controls["figure"].value](self.result))
        except Exception as exc:  # shown in the panel like any other failure
            self._show_error(exc, "drawing the figure")
            raise

    def _summary(self, c: Comparison) -> str:
        return f"baseline {c.baseline.value}; loss parity {'yes' if c.loss_parity else 'NO'}"

    def _summary_colour(self, c: Comparison) -> str:
        return OK_COLOUR if c.loss_parity else WARN_COLOUR
