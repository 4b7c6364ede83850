"""Figures for embedding models: an ``EmbedEvaluation`` or ``speed_summary``'s dict in, ``go.Figure`` out."""

from __future__ import annotations

import plotly.graph_objects as go

from .report import PALETTE


def retrieval_drift(evaluation, metric: str = "ndcg@10") -> go.Figure:
    """Per query slice (all queries first), each variant's change in ``metric`` against FP32, with its interval."""
    scored = [v for v in evaluation.variants if v.retrieval is not None]
    if not scored:
        raise ValueError("no retrieval results to draw: score the variants on a retrieval task (queries with relevant documents)")
    first = scored[0].retrieval.slices
    labels = [f"{s.name} (n={s.n})" for s in first]
    fig = go.Figure()
    for i, v in enumerate(scored):
        rows = v.retrieval.slices
        d = [s.delta[metric] for s in rows]
        fig.add_bar(y=labels, x=[x.value for x in d], orientation="h", name=v.name, marker_color=PALETTE[i % len(PALETTE)],
                    error_x=dict(type="data", symmetric=False, array=[x.hi - x.value for x in d],
                                 arrayminus=[x.value - x.lo for x in d], color="#333", thickness=1),
                    customdata=[[s.fp32[metric], s.variant[metric], x.lo, x.hi] for s, x in zip(rows, d)],
                    hovertemplate="%{y}<br>" + v.name + ": %{x:+.4f} [%{customdata[2]:+.4f}, %{customdata[3]:+.4f}]"
                                  "<br>FP32 %{customdata[0]:.4f} -> %{customdata[1]:.4f}<extra></extra>")
    fig.add_vline(x=0, line_color="#444", line_width=1)
    if metric == "ndcg@10":
        drop = evaluation.budget.max_slice_drop
        fig.add_vline(x=-drop, line_dash="dash", line_color="#E45756", annotation_text=f"per-slice budget -{drop:g}",
                      annotation_position="bottom left")
    fig.update_layout(title=f"{metric.upper()} change by query slice against FP32 (95% paired bootstrap)",
                      barmode="group", xaxis_title=f"{metric} change (higher is better)", yaxis=dict(autorange="reversed"),
                      height=max(320, 24 * len(labels) * max(1, len(scored)) + 160), legend=dict(orientation="h", y=-0.1),
                      margin=dict(l=10, r=30, t=60, b=40))
    return fig


def _agreements(evaluation) -> list:
    scored = [v for v in evaluation.variants if v.agreement is not None]
    if not scored:
        raise ValueError("no agreement results to draw: score the variants on texts first")
    return scored


def cosine_distribution(evaluation) -> go.Figure:
    """Box per variant of every text's cosine between its FP32 and its quantized embedding."""
    scored = _agreements(evaluation)
    fig = go.Figure()
    for i, v in enumerate(scored):
        fig.add_box(x=v.agreement.cosines, name=v.name, marker_color=PALETTE[i % len(PALETTE)], boxpoints="suspectedoutliers",
                    hovertemplate=v.name + ": cosine %{x:.5f}<extra></extra>")
    fig.update_layout(title=f"Cosine between each text's FP32 and quantized embedding ({evaluation.texts} texts; 1 = unchanged)",
                      xaxis_title="cosine to FP32 (higher is better)", showlegend=False,
                      height=max(260, 60 * len(scored) + 140), margin=dict(l=10, r=30, t=60, b=40))
    return fig


def neighbour_overlap(evaluation) -> go.Figure:
    """Per text slice, each variant's mean overlap@10 of nearest neighbours with FP32's, with intervals."""
    scored = _agreements(evaluation)
    labels = [f"{s.name} (n={s.n})" for s in scored[0].agreement.slices]
    fig = go.Figure()
    for i, v in enumerate(scored):
        rows = [s.overlap_at_10 for s in v.agreement.slices]
        fig.add_bar(y=labels, x=[r.value for r in rows], orientation="h", name=v.name, marker_color=PALETTE[i % len(PALETTE)],
                    error_x=dict(type="data", symmetric=False, array=[r.hi - r.value for r in rows],
                                 arrayminus=[r.value - r.lo for r in rows], color="#333", thickness=1),
                    hovertemplate="%{y}<br>" + v.name + ": %{x:.3f}<extra></extra>")
    fig.update_layout(title="Nearest neighbours kept: overlap@10 with the FP32 index (95% bootstrap)", barmode="group",
                      xaxis=dict(title="share of the 10 nearest neighbours unchanged (higher is better)", range=[0, 1.02]),
                      yaxis=dict(autorange="reversed"), height=max(260, 24 * len(labels) * len(scored) + 140),
                      legend=dict(orientation="h", y=-0.15), margin=dict(l=10, r=30, t=60, b=40))
    return fig


def embed_speed(run: dict) -> go.Figure:
    """Milliseconds per text, one group per batch size, labelled with the speed-up and its interval."""
    if not run["speeds"]:
        raise ValueError("no timings to draw")
    fig = go.Figure()
    by = {(s["name"], s["batch"]): s for s in run["speeds"]}
    batches = sorted({b for _, b in by})
    for i, name in enumerate(dict.fromkeys(n for n, _ in by)):
        rows = [by[(name, b)] for b in batches]
        fig.add_bar(x=[f"batch {b} ({r['tokens']} tokens)" for b, r in zip(batches, rows)], y=[r["ms_per_text"] for r in rows],
                    name=name, marker_color=PALETTE[i % len(PALETTE)],
                    text=[f"{r['speedup']:.2f}x" for r in rows], textposition="outside",
                    customdata=[[r["lo"], r["hi"]] for r in rows],
                    hovertemplate=name + ": %{y:.2f} ms/text, %{text} [%{customdata[0]:.2f}-%{customdata[1]:.2f}]<extra></extra>")
    title = f"Encoding time per text ({run['threads']} threads; speed-up over {run['base']})"
    if run["contended"]:
        title += " — CONTENDED: other work ran"
    fig.update_layout(title=title, barmode="group", yaxis_title="ms per text (lower is better)",
                      legend=dict(orientation="h", y=-0.2), height=420, margin=dict(l=10, r=30, t=60, b=40))
    return fig
