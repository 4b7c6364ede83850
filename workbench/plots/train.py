"""Figures for training runs (a ``Comparison``, or ``TrainRun``s compared on the fly); runs that fell back or
failed are drawn where their data exists, labelled with their status."""

from __future__ import annotations

import math
from typing import Sequence, Union

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..train import Backend, Comparison, RunStatus, TrainRun, compare

COLORS = {Backend.EAGER: "#4C78A8", Backend.ORTMODULE: "#F58518", Backend.COMPILE: "#54A24B"}
RunsLike = Union[Comparison, Sequence[TrainRun]]


def _as_comparison(runs: RunsLike) -> Comparison:
    if isinstance(runs, Comparison):
        return runs
    runs = list(runs)
    if not runs:
        raise ValueError("no runs to plot: pass a Comparison or a non-empty list of TrainRun")
    if isinstance(runs[0], TrainRun) and not any(r.backend is Backend.EAGER for r in runs):
        return compare(runs, baseline=runs[0].backend)
    return compare(runs)


def _label(run: TrainRun) -> str:
    if run.status is RunStatus.OK:
        return run.backend.value
    return f"{run.backend.value} ({run.status.value})"


def _ratio_text(c: Comparison, backend: Backend, attr: str) -> str:
    if backend is c.baseline:
        return "1.00x (baseline)" if c.summary(backend).comparable else "baseline did not run"
    try:
        r = c.ratio(backend)
    except KeyError:
        s = c.summary(backend)
        return f"no ratio: {s.status.value}"
    if attr == "throughput":  # with its interval when the steps were timed in turns; flagged when not like for like
        return r.speed_text() + ("" if r.like_for_like else " (NOT like for like)")
    v = getattr(r, attr)
    return f"{v:.2f}x" if math.isfinite(v) else "n/a"


def loss_curves(runs: RunsLike) -> go.Figure:
    """Training loss per step (lines), validation loss (markers); the title holds the largest difference to the tolerance."""
    c = _as_comparison(runs)
    fig = go.Figure()
    for r in c.runs:
        color = COLORS[r.backend]
        fig.add_trace(go.Scatter(
            x=[s.step for s in r.steps], y=[s.loss for s in r.steps], mode="lines", name=f"{_label(r)} train",
            line=dict(color=color, dash="solid" if r.status is RunStatus.OK else "dot"),
            legendgroup=r.backend.value, meta={"backend": r.backend.value, "kind": "train"},
        ))
        if r.evals:
            fig.add_trace(go.Scatter(
                x=[e.step for e in r.evals], y=[e.val_loss for e in r.evals], mode="markers+lines",
                name=f"{_label(r)} validation", line=dict(color=color, dash="dash"), marker=dict(symbol="diamond", size=8),
                legendgroup=r.backend.value, meta={"backend": r.backend.value, "kind": "validation"},
            ))
    parts = []
    for ratio in c.ratios:
        mark = "within" if ratio.loss_within_tolerance else "OUTSIDE"
        parts.append(f"{ratio.backend.value} vs {ratio.baseline.value}: max |Δloss| {ratio.max_loss_diff:.1e} ({mark} {c.tolerance:g})")
    title = "Training loss" + (f"<br><sup>{'; '.join(parts)}</sup>" if parts else "")
    fig.update_layout(title=title, xaxis_title="optimizer step", yaxis_title="loss (cross-entropy, nats)",
                      hovermode="x unified", legend_title="backend")
    return fig


def step_time_distribution(runs: RunsLike) -> go.Figure:
    """Step times after start-up, one box per backend, with the start-up (first step) cost annotated."""
    c = _as_comparison(runs)
    fig = go.Figure()
    for r in c.runs:
        timed = [s.step_s * 1000 for s in r.timed_steps()]
        if not timed:
            continue
        startup = r.startup_s if math.isfinite(r.startup_s) else float("nan")
        fig.add_trace(go.Box(
            y=timed, name=_label(r), marker_color=COLORS[r.backend], boxpoints="all", jitter=0.3, pointpos=0,
            meta={"backend": r.backend.value, "startup_s": startup},
            hovertemplate="%{y:.1f} ms<extra>" + r.backend.value + "</extra>",
        ))
        fig.add_annotation(x=_label(r), y=max(timed), yshift=18, showarrow=False,
                           text=f"start-up {startup:.1f} s · median {r.median_step_s * 1000:.0f} ms")
    fig.update_layout(title="Step time after start-up (first steps excluded)", yaxis_title="step time (ms, lower is better)",
                      showlegend=False)
    return fig


def throughput_memory_bars(runs: RunsLike) -> go.Figure:
    """Samples per second and peak memory, the ratio against the baseline written on every bar."""
    c = _as_comparison(runs)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("throughput (samples/s, higher is better)",
                                                        "peak memory (MiB, lower is better)"))
    names = [_label(c.run(s.backend)) for s in c.summaries]
    colors = [COLORS[s.backend] for s in c.summaries]
    for col, (metric, name, ratio, unit) in enumerate((("throughput", "throughput", "throughput", "samples/s"),
                                                       ("peak_memory", "peak memory", "memory", "MiB")), start=1):
        fig.add_trace(go.Bar(x=names, y=[getattr(s, metric).value if s.comparable else 0.0 for s in c.summaries],
                             text=[_ratio_text(c, s.backend, ratio) for s in c.summaries], textposition="outside",
                             marker_color=colors, name=name, meta={"metric": metric, "unit": unit}), row=1, col=col)
        fig.update_yaxes(title_text=unit, row=1, col=col)
    settings = next((r.baseline_settings for r in c.ratios if r.baseline_settings), "")
    fig.update_layout(title=f"Throughput and memory vs {c.baseline.value} (ratios: >1 is better)"
                      + (f"<br><sup>every backend with {settings}</sup>" if settings else ""), showlegend=False)
    return fig
