"""Figures for export and fusion: a ``FusionReport`` in, a ``go.Figure`` out."""

from __future__ import annotations

from collections import defaultdict
from typing import Optional, Union

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..graph import FusedNode, FusionReport, Variant

# each graph variant and PyTorch series the figures draw: its label and its colour
SERIES = {
    "pytorch": ("PyTorch eager", "#9D755D"),
    Variant.UNOPTIMIZED.value: ("ORT unoptimized", "#BAB0AC"),
    Variant.ORT_BASIC.value: ("ORT basic", "#72B7B2"),
    Variant.ORT_EXTENDED.value: ("ORT extended", "#4C78A8"),
    Variant.ORT_ALL.value: ("ORT all", "#54A24B"),
    Variant.TRANSFORMER.value: ("transformer optimizer", "#F58518"),
    Variant.TRANSFORMER_FP16.value: ("transformer optimizer FP16", "#E45756"),
    "sdpa_fp16": ("PyTorch SDPA FP16", "#B279A2"),
    "compile_fp16": ("torch.compile reduce-overhead FP16", "#FF9DA6"),
}
COLORS = {name: color for name, (_, color) in SERIES.items()}
SHARED_COLOR, OWN_COLOR, FUSED_COLOR, TENSOR_COLOR = "#B279A2", "#4C78A8", "#F58518", "#BAB0AC"


def _label(name: str) -> str:
    if name.endswith("+cuda_graph"):
        return _label(name[: -len("+cuda_graph")]) + " + CUDA graph"
    return SERIES[name][0] if name in SERIES else name


def op_counts(report: FusionReport, variant: Union[str, Variant] = Variant.TRANSFORMER, top: Optional[int] = None) -> go.Figure:
    """Horizontal bars: how many nodes of each operator before (the export) and after ``variant``."""
    before = report.variant(Variant.UNOPTIMIZED)
    after = report.variant(variant)
    ops = sorted(set(before.op_histogram) | set(after.op_histogram),
                 key=lambda o: (before.op_histogram.get(o, 0) + after.op_histogram.get(o, 0), o))
    if top is not None:
        ops = ops[-top:]
    fig = go.Figure()
    for v in (before, after):
        counts = [v.op_histogram.get(o, 0) for o in ops]
        fig.add_bar(y=ops, x=counts, orientation="h", name=f"{_label(v.name.value)} ({v.node_count} nodes)",
                    marker_color=COLORS[v.name.value], text=[c or "" for c in counts], textposition="outside",
                    hovertemplate="%{y}: %{x}<extra>" + _label(v.name.value) + "</extra>")
    fig.update_layout(
        title=f"Operators before and after {_label(after.name.value)}: {before.node_count} → {after.node_count} nodes "
              f"({after.nodes_removed} removed, {after.nodes_added} added)",
        barmode="group", xaxis_title="nodes", yaxis_title="operator", height=max(360, 22 * len(ops) + 140),
        legend=dict(orientation="h", y=-0.12),
    )
    return fig


def fused_ops(report: FusionReport) -> go.Figure:
    """Fused operators per optimized variant; diamonds: what a BERT-like model of this depth should get."""
    variants = [v for v in report.variants if v.name is not Variant.UNOPTIMIZED]
    ops = sorted({o for v in variants for o in v.fused_ops})
    expected_x, expected_y = [], []
    for family, n in report.expected_fusions.items():
        name = family.split("/")[0]
        expected_x.append(name)
        expected_y.append(n)
        if name not in ops:
            ops.append(name)
    fig = go.Figure()
    for v in variants:
        fig.add_bar(x=ops, y=[v.fused_ops.get(o, 0) for o in ops], name=_label(v.name.value),
                    marker_color=COLORS[v.name.value], hovertemplate="%{x}: %{y}<extra>" + _label(v.name.value) + "</extra>")
    if expected_x:
        fig.add_scatter(x=expected_x, y=expected_y, mode="markers", name="expected (BERT pattern)",
                        marker=dict(symbol="diamond-open", size=14, color="black", line=dict(width=2)))
    missing = ", ".join(f"{d.fusion} {d.found}/{d.expected}" for d in report.diagnoses)
    title = "Fused operators per variant" + (f" — missing: {missing}" if missing else " — all expected fusions found")
    fig.update_layout(title=title, barmode="group", xaxis_title="fused operator", yaxis_title="nodes",
                      legend=dict(orientation="h", y=-0.2))
    return fig


def latency(report: FusionReport) -> go.Figure:
    """Median latency by shape (error bars to the p90), each bar labelled with its speed-up over the first series."""
    series = []
    if report.pytorch_latency:
        series.append(("pytorch", report.pytorch_latency))
    series += list(getattr(report, "pytorch_peers", {}).items())  # GPU runs: PyTorch's own fast paths
    series += [(v.name.value, v.latency) for v in report.variants if v.latency]
    series += [(f"{name}+cuda_graph", lat) for name, lat in getattr(report, "cuda_graph_latency", {}).items()]
    if not series:
        raise ValueError("the report has no timings: run the fusion with measure_latency=True (not FusionConfig.inspect_only())")
    base_name, base = series[0]
    base_ms = {(s.batch, s.seq): s.stats.median_ms for s in base}
    fig = go.Figure()
    for name, lat in series:
        x = [f"{s.batch}×{s.seq}" for s in lat]
        y = [s.stats.median_ms for s in lat]
        ratio = [base_ms.get((s.batch, s.seq), float("nan")) / s.stats.median_ms for s in lat]
        fig.add_bar(
            x=x, y=y, name=_label(name), marker_color=COLORS.get(name),
            error_y=dict(type="data", symmetric=False, array=[s.stats.p90_ms - s.stats.median_ms for s in lat],
                         arrayminus=[0.0] * len(lat)),
            text=[f"{r:.2f}x" for r in ratio], textposition="outside", customdata=ratio,
            hovertemplate="%{x}: %{y:.2f} ms (%{customdata:.2f}x vs " + _label(base_name) + ")<extra>" + _label(name) + "</extra>",
        )
    fig.update_layout(
        title=f"Latency by shape on {getattr(report, 'device', 'cpu')} (median of repeats; error bar to p90; ratio vs {_label(base_name)})",
        barmode="group", xaxis_title="batch × sequence length", yaxis_title="ms per batch (lower is better)",
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def size_on_disk(report: FusionReport) -> go.Figure:
    names = [v.name.value for v in report.variants]
    fig = go.Figure(go.Bar(x=[_label(n) for n in names], y=[v.size_mib for v in report.variants],
                           marker_color=[COLORS[n] for n in names],
                           text=[f"{v.size_mib:.1f}" for v in report.variants], textposition="outside"))
    fig.update_layout(title="Graph size on disk", yaxis_title="MiB (lower is better)", showlegend=False)
    return fig


# ---- one fused node beside what it replaced ----------------------------------------------------
def pick_fused_node(report: FusionReport, variant: Union[str, Variant] = Variant.TRANSFORMER,
                    name: Optional[str] = None) -> FusedNode:
    """The named fused node, or by default the first Attention (else the one that replaced most)."""
    v = report.variant(variant)
    if name is not None:
        return v.fused_node(name)
    candidates = [f for f in v.provenance if f.replaced]
    if not candidates:
        raise ValueError(f"the {v.name.value} variant has no fused nodes to draw")
    for f in candidates:
        if f.op_type == "Attention":
            return f
    return max(candidates, key=lambda f: len(f.replaced))


def _layers(nodes) -> dict[int, int]:
    producer = {o: i for i, n in enumerate(nodes) for o in n.outputs}
    depth: dict[int, int] = {}

    def visit(i: int, stack: frozenset = frozenset()) -> int:
        if i in depth:
            return depth[i]
        preds = [producer[t] for t in nodes[i].inputs if t in producer and producer[t] != i and producer[t] not in stack]
        depth[i] = 1 + max((visit(p, stack | {i}) for p in preds), default=0)
        return depth[i]

    for i in range(len(nodes)):
        visit(i)
    return depth


def _short(name: str, width: int = 28) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1):]


def _draw_fused_node(fig: go.Figure, fused) -> None:
    ins = [t for t in fused.inputs if t]
    outs = [t for t in fused.outputs if t]
    ys_in = [1.0 - 2.0 * k / max(1, len(ins) - 1) if len(ins) > 1 else 0.0 for k in range(len(ins))]
    ys_out = [0.5 - 1.0 * k / max(1, len(outs) - 1) if len(outs) > 1 else 0.0 for k in range(len(outs))]
    ex, ey = [], []
    for y in ys_in:
        ex += [0.0, 1.0, None]
        ey += [y, 0.0, None]
    for y in ys_out:
        ex += [1.0, 2.0, None]
        ey += [0.0, y, None]
    fig.add_scatter(x=ex, y=ey, mode="lines", line=dict(color="#999", width=1), hoverinfo="skip", showlegend=False, row=1, col=1)
    fig.add_scatter(x=[0.0] * len(ins) + [2.0] * len(outs), y=ys_in + ys_out, mode="markers+text",
                    marker=dict(symbol="diamond", size=10, color=TENSOR_COLOR), text=[_short(t, 16) for t in ins + outs],
                    textposition=["middle left"] * len(ins) + ["middle right"] * len(outs), name="tensor",
                    hovertext=ins + outs, hoverinfo="text", showlegend=False, row=1, col=1)
    fig.add_scatter(x=[1.0], y=[0.0], mode="markers+text", marker=dict(symbol="square", size=34, color=FUSED_COLOR),
                    text=[fused.op_type], textposition="top center", name=f"fused {fused.op_type}",
                    hovertext=[f"{fused.label}<br>replaced: {fused.replaced_ops}"], hoverinfo="text", row=1, col=1)


def _subgraph_layout(replaced: list, boundary: list[str]) -> tuple[dict[int, int], dict[int, tuple[float, float]],
                                                                  dict[str, tuple[float, float]]]:
    depth = _layers(replaced)
    by_layer: dict[int, list[int]] = defaultdict(list)
    for i, d in sorted(depth.items(), key=lambda kv: (kv[1], kv[0])):
        by_layer[d].append(i)
    pos: dict[int, tuple[float, float]] = {}
    for d, idxs in by_layer.items():
        for k, i in enumerate(idxs):
            pos[i] = (k - (len(idxs) - 1) / 2, -float(d))
    bpos = {t: (2.0 * k - (len(boundary) - 1), 0.0) for k, t in enumerate(boundary)}  # 2 apart: room for labels
    return depth, pos, bpos


def _draw_subgraph_edges(fig: go.Figure, replaced: list, pos: dict, bpos: dict) -> None:
    producer = {o: i for i, n in enumerate(replaced) for o in n.outputs}
    ex, ey = [], []
    for i, n in enumerate(replaced):
        for t in n.inputs:
            if t in producer and producer[t] != i:
                src = pos[producer[t]]
            elif t in bpos:
                src = bpos[t]
            else:
                continue
            ex += [src[0], pos[i][0], None]
            ey += [src[1], pos[i][1], None]
    fig.add_scatter(x=ex, y=ey, mode="lines", line=dict(color="#999", width=1), hoverinfo="skip", showlegend=False, row=1, col=2)
    if bpos:
        fig.add_scatter(x=[p[0] for p in bpos.values()], y=[p[1] for p in bpos.values()], mode="markers+text",
                        marker=dict(symbol="diamond", size=10, color=TENSOR_COLOR), text=[_short(t) for t in bpos],
                        textposition="top center", name="subgraph input", hovertext=list(bpos), hoverinfo="text",
                        row=1, col=2)


def fused_node_drawing(report: FusionReport, node: Optional[str] = None,
                       variant: Union[str, Variant] = Variant.TRANSFORMER, hide_constants: bool = True) -> go.Figure:
    """Left: the fused node with its inputs and outputs. Right: the exported subgraph it replaced, layered.
    Nodes shared with other fused nodes (the attention-mask preparation) are drawn in another colour."""
    fused = pick_fused_node(report, variant, node)
    replaced = [n for n in fused.replaced if not (hide_constants and n.op_type == "Constant")]
    shared = set(fused.shared)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.34, 0.66], horizontal_spacing=0.04,
                        subplot_titles=(f"fused: {fused.op_type}", f"replaced: {len(fused.replaced)} nodes "
                                        f"({len(fused.replaced) - len(replaced)} Constant hidden)" if hide_constants
                                        and len(replaced) != len(fused.replaced) else f"replaced: {len(fused.replaced)} nodes"))

    _draw_fused_node(fig, fused)  # left panel
    depth, pos, bpos = _subgraph_layout(replaced, list(fused.boundary_inputs))
    _draw_subgraph_edges(fig, replaced, pos, bpos)
    for label, color, members in (("replaced node", OWN_COLOR, [i for i, n in enumerate(replaced) if n.name not in shared]),
                                  ("shared with other fused nodes", SHARED_COLOR, [i for i, n in enumerate(replaced) if n.name in shared])):
        if not members:
            continue
        fig.add_scatter(
            x=[pos[i][0] for i in members], y=[pos[i][1] for i in members], mode="markers+text",
            marker=dict(symbol="square", size=16, color=color), text=[replaced[i].op_type for i in members],
            textposition="middle right", name=label,
            hovertext=[f"{replaced[i].name}<br>{replaced[i].op_type}<br>in: {', '.join(replaced[i].inputs)}"
                       f"<br>out: {', '.join(replaced[i].outputs)}" for i in members],
            hoverinfo="text", customdata=[replaced[i].name for i in members], row=1, col=2,
        )
    for col in (1, 2):
        fig.update_xaxes(visible=False, row=1, col=col)
        fig.update_yaxes(visible=False, row=1, col=col)
    fig.update_xaxes(range=[-2.8, 4.6], row=1, col=1)
    fig.update_yaxes(range=[-1.3, 1.3], row=1, col=1)
    xs = [p[0] for p in pos.values()] + [p[0] for p in bpos.values()] or [0.0]
    fig.update_xaxes(range=[min(xs) - 0.6, max(xs) + 1.0], row=1, col=2)  # room for the labels on the right
    fig.update_yaxes(range=[-float(max(depth.values(), default=1)) - 0.6, 0.7], row=1, col=2)
    fig.update_layout(
        title=f"{fused.label}: one {fused.op_type} node replaced {len(fused.replaced)} exported nodes "
              f"({', '.join(f'{k} {v}' for k, v in list(fused.replaced_ops.items())[:4])}, ...)",
        height=max(420, 38 * (max(depth.values(), default=1) + 2)), legend=dict(orientation="h", y=-0.05),
    )
    return fig
