"""Figures for quantization: a ``SliceReport``, ``QuantResult`` or ``SearchResult`` in, a ``go.Figure`` out."""

from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import plotly.graph_objects as go

from ..quant import METRICS, FlipKind, NodeError, QuantResult, SearchResult, SliceDrift, SliceReport

WORSE, BETTER, NEUTRAL, SMALL = "#E45756", "#54A24B", "#9D9D9D", "#D8D8D8"
FLIP_COLORS = {"same": "#BAB0AC", FlipKind.BROKEN.value: "#E45756", FlipKind.FIXED.value: "#54A24B",
               FlipKind.CHANGED.value: "#F58518"}
PRECISION_COLORS = {"fp32": "#4C78A8", "int8": "#F58518"}

ReportLike = Union[SliceReport, QuantResult]


def _report(obj: ReportLike, golden: bool = False) -> SliceReport:
    if isinstance(obj, QuantResult):
        if golden:
            if obj.golden is None:
                raise ValueError(f"{obj.name} has no golden-set report (the classes are not the built-in reviews')")
            return obj.golden
        return obj.report
    if isinstance(obj, SliceReport):
        return obj
    raise TypeError(f"expected a SliceReport or a QuantResult, got {type(obj).__name__}")


def _color(d: SliceDrift, metric: str) -> str:
    m = d.deltas[metric]
    if d.too_small or d.n == 0:
        return SMALL
    if not m.significant:
        return NEUTRAL
    return WORSE if m.worse else BETTER


def drift_bars(obj: ReportLike, metric: str = "accuracy", include_overall: bool = True, golden: bool = False,
               max_slices: Optional[int] = None) -> go.Figure:
    """Horizontal bars: candidate minus reference per slice, in points, with the 95% interval, worst first."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}, got {metric!r}")
    rep = _report(obj, golden)
    rows = rep.worst_slices(metric)
    if max_slices is not None:
        rows = rows[:max_slices]
    if include_overall:
        rows = [rep.overall, *rows]
    k, unit = 100.0, "points"  # every metric (accuracy-like, ECE too) in points
    rows = [d for d in rows if d.n > 0] + [d for d in rows if d.n == 0]
    names = [f"{d.slice} (n={d.n}{', too small' if d.too_small else ''})" for d in rows]
    vals = [k * d.deltas[metric].delta if d.n else 0.0 for d in rows]
    hi = [k * (d.deltas[metric].ci_high - d.deltas[metric].delta) if d.n else 0.0 for d in rows]
    lo = [k * (d.deltas[metric].delta - d.deltas[metric].ci_low) if d.n else 0.0 for d in rows]
    colors = [_color(d, metric) for d in rows]
    hover = [
        f"{d.slice}<br>n={d.n}, flips={d.flips}<br>{rep.reference_name}: {d.deltas[metric].reference:.3f}"
        f"<br>{rep.candidate_name}: {d.deltas[metric].candidate:.3f}<br>change: {k * d.deltas[metric].delta:+.2f} {unit} "
        f"[{k * d.deltas[metric].ci_low:+.2f}, {k * d.deltas[metric].ci_high:+.2f}]"
        f"{'<br>significant' if d.deltas[metric].significant else ''}{'<br>too small to judge' if d.too_small else ''}"
        if d.n else f"{d.slice}: no examples"
        for d in rows
    ]
    fig = go.Figure(
        go.Bar(
            y=names, x=vals, orientation="h", marker_color=colors, name=f"{metric} change",
            error_x=dict(type="data", symmetric=False, array=hi, arrayminus=lo, color="#444", thickness=1.2),
            hovertext=hover, hoverinfo="text",
            text=[f"{v:+.1f}" if d.n else "empty" for v, d in zip(vals, rows)], textposition="outside",
        )
    )
    fig.add_vline(x=0, line_color="#444", line_width=1)
    better = "higher is better" if METRICS[metric][1] else "lower is better"
    fig.update_layout(
        title=f"{metric} change by slice: {rep.candidate_name} vs {rep.reference_name} ({rep.set_name}, "
              f"{int(rep.confidence_level * 100)}% paired bootstrap)",
        xaxis_title=f"{metric} change ({unit}; {better})",
        yaxis=dict(autorange="reversed"), height=max(300, 28 * len(rows) + 120), showlegend=False,
        margin=dict(l=10, r=30, t=60, b=40),
    )
    return fig


def confidence_scatter(obj: ReportLike, golden: bool = False) -> go.Figure:
    """Each example at (FP32 confidence, INT8 confidence); flips coloured by kind, on top."""
    rep = _report(obj, golden)
    flips = {f.index: f for f in rep.flips}
    groups: dict[str, list[int]] = {"same": [], FlipKind.BROKEN.value: [], FlipKind.FIXED.value: [], FlipKind.CHANGED.value: []}
    for i in range(rep.n):
        groups[flips[i].kind.value if i in flips else "same"].append(i)
    fig = go.Figure()
    names = rep.class_names
    for key, idx in groups.items():
        if not idx and key != "same":
            continue
        if key == "same":
            label = f"same prediction ({len(idx)})"
            hover = [f"#{i}: {names[rep.reference_pred[i]]} ({rep.reference_confidence[i]:.3f} -> "
                     f"{rep.candidate_confidence[i]:.3f})" for i in idx]
        else:
            label = f"flip: {key} ({len(idx)})"
            hover = [f"#{i}: {_clip(flips[i].text)}<br>label {flips[i].label_name}; {flips[i].reference_pred_name} "
                     f"{flips[i].reference_confidence:.3f} -> {flips[i].candidate_pred_name} {flips[i].candidate_confidence:.3f}"
                     f"<br>slices: {', '.join(flips[i].slices) or '-'}" for i in idx]
        fig.add_scatter(
            x=[rep.reference_confidence[i] for i in idx], y=[rep.candidate_confidence[i] for i in idx], mode="markers",
            name=label, marker=dict(color=FLIP_COLORS[key], size=6 if key == "same" else 10,
                                    opacity=0.5 if key == "same" else 0.95, line=dict(width=0 if key == "same" else 1, color="#222")),
            hovertext=hover, hoverinfo="text", customdata=idx,
        )
    lo = 1.0 / max(len(names), 2)
    fig.add_scatter(x=[lo, 1.0], y=[lo, 1.0], mode="lines", name="no change", line=dict(color="#888", dash="dot"), hoverinfo="skip")
    fig.update_layout(
        title=f"Confidence per example: {rep.reference_name} vs {rep.candidate_name} ({rep.set_name}, {len(rep.flips)} flips of {rep.n})",
        xaxis_title=f"{rep.reference_name} confidence (top class probability)",
        yaxis_title=f"{rep.candidate_name} confidence", height=480,
    )
    return fig


def _clip(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def threshold_curves(obj: ReportLike, golden: bool = False) -> go.Figure:
    """Coverage (share accepted) and accuracy on the accepted examples, against the threshold."""
    rep = _report(obj, golden)
    t = [p.threshold for p in rep.thresholds]
    fig = go.Figure()
    for who, color in ((rep.reference_name, PRECISION_COLORS["fp32"]), (rep.candidate_name, PRECISION_COLORS["int8"])):
        pref = "reference" if who == rep.reference_name else "candidate"
        fig.add_scatter(x=t, y=[100 * getattr(p, f"{pref}_coverage") for p in rep.thresholds], mode="lines+markers",
                        name=f"{who} coverage", line=dict(color=color, dash="dot"))
        fig.add_scatter(x=t, y=[_pct(getattr(p, f"{pref}_accuracy")) for p in rep.thresholds], mode="lines+markers",
                        name=f"{who} accuracy on accepted", line=dict(color=color))
    fig.add_bar(x=t, y=[p.decisions_changed for p in rep.thresholds], name="decisions changed", yaxis="y2",
                marker_color="#BAB0AC", opacity=0.5, width=0.02)
    fig.update_layout(
        title=f"Accept only predictions with confidence >= threshold ({rep.set_name})",
        xaxis_title="confidence threshold", yaxis=dict(title="%", range=[0, 101]),
        yaxis2=dict(title="examples accepted by one model only", overlaying="y", side="right", rangemode="tozero"),
        height=420, legend=dict(orientation="h", y=-0.2),
    )
    return fig


def _pct(v: float) -> Optional[float]:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else 100.0 * v


def tradeoff(search: SearchResult, x: str = "latency") -> go.Figure:
    """Feasible candidates filled, the chosen ringed; a dashed line per FP32 graph at its accuracy minus the budget."""
    if x not in ("latency", "size"):
        raise ValueError(f"x must be 'latency' or 'size', got {x!r}")
    if not isinstance(search, SearchResult):
        raise TypeError(f"expected a SearchResult, got {type(search).__name__}")
    fig = go.Figure()
    xval = (lambda c: c.latency_ms) if x == "latency" else (lambda c: c.size_mib)
    for precision in ("fp32", "int8"):
        for feasible in (True, False):
            cs = [c for c in search.candidates if c.precision == precision and c.feasible == feasible]
            if not cs:
                continue
            fig.add_scatter(
                x=[xval(c) for c in cs], y=[100 * c.accuracy for c in cs], mode="markers+text",
                text=[c.name for c in cs], textposition="top center",
                name=f"{precision} {'within budget' if feasible else 'over budget'}",
                marker=dict(size=12, color=PRECISION_COLORS[precision] if feasible else "white",
                            line=dict(width=2, color=PRECISION_COLORS[precision]),
                            symbol="circle" if precision == "int8" else "diamond"),
                hovertext=[_candidate_hover(c) for c in cs], hoverinfo="text",
            )
    best = search.best
    if best is not None:
        fig.add_scatter(x=[xval(best)], y=[100 * best.accuracy], mode="markers", name=f"chosen: {best.name}",
                        marker=dict(size=24, color="rgba(0,0,0,0)", line=dict(width=3, color="#222")), hoverinfo="skip")
    for c in search.candidates:
        if c.precision == "fp32":
            fig.add_hline(y=100 * (c.accuracy - search.budget_overall), line_dash="dash", line_color="#888",
                          annotation_text=f"{c.graph}: FP32 - {100 * search.budget_overall:.1f} pts", annotation_position="bottom right")
    unit = "median latency (ms)" if x == "latency" else "size on disk (MiB)"
    fig.update_layout(
        title=f"Candidates: {unit.split(' (')[0]} vs accuracy (budget {100 * search.budget_overall:.1f} pts overall, "
              f"{100 * search.budget_per_slice:.1f} per slice)",
        xaxis_title=f"{unit}; lower is better", yaxis_title="accuracy (%); higher is better", height=480,
    )
    return fig


def _candidate_hover(c) -> str:
    lines = [c.name, f"{c.latency_ms:.2f} ms, {c.size_mib:.1f} MiB",
             f"accuracy {100 * c.accuracy:.1f}% ({100 * c.accuracy_delta:+.2f} pts)",
             f"worst slice {c.check.worst_slice or '-'} {-100 * c.check.worst_slice_drop:+.2f} pts"]
    lines += c.check.violations[:3]
    return "<br>".join(lines)


def node_errors(obj: Union[QuantResult, Sequence[NodeError]], top: Optional[int] = 20, rank_by: str = "local") -> go.Figure:
    """Per quantized node, its SQNR (dB), lowest ``rank_by`` first: about 6 dB per bit."""
    keys = {"local": "local_sqnr_db", "output": "output_sqnr_db", "weight": "weight_sqnr_db", "activation": "activation_sqnr_db"}
    if rank_by not in keys:
        raise ValueError(f"rank_by must be one of {list(keys)}, got {rank_by!r}")
    errors = list(obj.node_errors if isinstance(obj, QuantResult) else obj)
    title_name = obj.name if isinstance(obj, QuantResult) else "quantized graph"
    if not errors:
        raise ValueError("no per-node errors to plot: run the quantization with node_error_samples > 0")
    usable = [e for e in errors if not math.isnan(getattr(e, keys[rank_by]))]
    rows = sorted(usable, key=lambda e: getattr(e, keys[rank_by]))[: top or None]
    names = [e.node for e in rows]
    fig = go.Figure()
    for attr, label, color in (("weight_sqnr_db", "weight", "#4C78A8"), ("activation_sqnr_db", "activation input", "#72B7B2"),
                               ("output_sqnr_db", "output vs FP32 graph", "#F58518")):
        vals = [_finite(getattr(e, attr)) for e in rows]
        fig.add_bar(y=names, x=vals, orientation="h", name=label, marker_color=color,
                    hovertemplate="%{y}<br>" + label + ": %{x:.1f} dB<extra></extra>")
    fig.update_layout(
        barmode="group", title=f"Quantization error per node ({title_name}), worst {rank_by} SQNR first",
        xaxis_title="SQNR (dB); higher is better", yaxis=dict(autorange="reversed"),
        height=max(320, 26 * len(rows) * 2 + 120), legend=dict(orientation="h", y=-0.1),
    )
    return fig


def _finite(v: float) -> Optional[float]:
    return None if v is None or math.isnan(v) else min(v, 120.0)  # >120 dB: bit-identical, capped for the axis
