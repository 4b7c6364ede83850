"""Figures for the one-file report (``workbench.report``): results in, ``go.Figure`` out."""

from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from ..quant import QuantResult, SliceDrift

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#FF9DA6", "#9D755D")


def _label(d: SliceDrift) -> str:
    return f"{d.slice} (n={d.n}{', too small' if d.too_small else ''})"


def slice_drift_overview(results: Sequence[QuantResult], budget_per_slice: Optional[float] = None,
                         max_slices: Optional[int] = 40) -> go.Figure:
    """For each slice (the whole set first, then those that lost most under any variant), one point per
    variant at its accuracy change with its 95% paired bootstrap interval. Points, not bars: a bar of
    length zero would show nothing. Slices too small to judge are labelled, not hidden."""
    if not results:
        raise ValueError("no quantization results to draw: quantize with at least one preset first")
    first = results[0].report
    worst_of = {d.slice: min(r.report.drift(d.slice).delta for r in results if d.n) if d.n else 0.0
                for d in first.slices}
    order = sorted((d for d in first.slices if d.n), key=lambda d: (d.too_small, worst_of[d.slice], d.slice))
    if max_slices is not None:
        order = order[:max_slices]
    names = [first.overall.slice] + [d.slice for d in order]
    labels = [_label(first.overall)] + [_label(d) for d in order]
    fig = go.Figure()
    ends = [0.0] + ([-100 * budget_per_slice] if budget_per_slice is not None else [])
    for i, r in enumerate(results):
        rows = [r.report.drift(n) for n in names]
        vals = [100 * d.delta for d in rows]
        ends += [100 * d.ci_low for d in rows] + [100 * d.ci_high for d in rows]
        fig.add_scatter(
            y=labels, x=vals, mode="markers", name=r.name, marker=dict(color=PALETTE[i % len(PALETTE)], size=9),
            error_x=dict(type="data", symmetric=False, array=[100 * (d.ci_high - d.delta) for d in rows],
                         arrayminus=[100 * (d.delta - d.ci_low) for d in rows], color="#333", thickness=1),
            customdata=[[100 * d.ci_low, 100 * d.ci_high, d.flips] for d in rows],
            hovertemplate="%{y}<br>" + r.name + ": %{x:+.2f} points [%{customdata[0]:+.2f}, %{customdata[1]:+.2f}], "
                          "%{customdata[2]} flipped<extra></extra>",
        )
    fig.add_vline(x=0, line_color="#444", line_width=1)
    if budget_per_slice is not None:
        fig.add_vline(x=-100 * budget_per_slice, line_dash="dash", line_color="#E45756",
                      annotation_text=f"per-slice budget -{100 * budget_per_slice:g} pts", annotation_position="bottom left")
    fig.update_layout(
        title=f"Accuracy change by slice against FP32 (points; 95% paired bootstrap, {first.n_boot} replicates)",
        scattermode="group", xaxis=dict(title="accuracy change (points; higher is better)", range=_padded(ends)),
        yaxis=dict(autorange="reversed"),
        height=max(360, 22 * len(labels) * max(1, len(results)) + 160), legend=dict(orientation="h", y=-0.08),
        margin=dict(l=10, r=30, t=60, b=40),
    )
    return fig


def _padded(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    pad = max(0.5, 0.08 * (hi - lo))
    return [lo - pad, hi + pad]
