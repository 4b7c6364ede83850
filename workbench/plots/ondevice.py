"""Figures for on-device training: result in, ``plotly.graph_objects.Figure`` out."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..ondevice import OnDeviceResult

ONDEVICE_COLOR = "#F58518"  # ONNX Runtime's colour in the training figures
PYTORCH_COLOR = "#4C78A8"


def loss_curves(result: OnDeviceResult) -> go.Figure:
    """Both loss curves on top, their per-step difference against the tolerance below: the agreement is
    visible, not claimed."""
    if not isinstance(result, OnDeviceResult):
        raise TypeError(f"expected a workbench.ondevice.OnDeviceResult, got {type(result).__name__}")
    steps = list(range(1, len(result.ondevice_losses) + 1))
    diff = [abs(a - b) for a, b in zip(result.ondevice_losses, result.pytorch_losses)]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.08)
    fig.add_trace(go.Scatter(x=steps, y=result.pytorch_losses, name="PyTorch eager", mode="lines+markers",
                             line=dict(color=PYTORCH_COLOR, width=4)), row=1, col=1)
    fig.add_trace(go.Scatter(x=steps, y=result.ondevice_losses, name="onnxruntime.training.api", mode="lines+markers",
                             line=dict(color=ONDEVICE_COLOR, width=2, dash="dot")), row=1, col=1)
    # a zero difference cannot be drawn on a log axis: show it at a floor below float32 rounding
    fig.add_trace(go.Scatter(x=steps, y=[max(d, 1e-10) for d in diff], name="|difference|", mode="lines+markers",
                             line=dict(color="#444")), row=2, col=1)
    fig.add_trace(go.Scatter(x=[steps[0], steps[-1]], y=[result.tolerance] * 2, name=f"tolerance {result.tolerance:g}",
                             mode="lines", line=dict(color="#b42318", dash="dash")), row=2, col=1)
    verdict = "agree" if result.loss_parity else "DIFFER"
    a = result.artifacts
    fig.update_layout(
        title=f"On-device vs PyTorch eager ({a.trainable.value}, {a.trainable_parameters:,} trainable parameters): "
              f"curves {verdict}, largest |Δ loss| {result.max_loss_diff:.2g}",
        template="plotly_white", height=460, legend=dict(orientation="h", y=-0.15))
    fig.update_yaxes(title_text="loss", row=1, col=1)
    fig.update_yaxes(title_text="|Δ loss|", type="log", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    return fig


def cost_bars(result: OnDeviceResult) -> go.Figure:
    """Median step time and peak memory of both sides (lower is better), ratios on the bars."""
    sides = [result.ondevice, result.pytorch]
    names = [s.name for s in sides]
    colors = [ONDEVICE_COLOR, PYTORCH_COLOR]
    with_memory = all(s.peak_rss_mib is not None for s in sides)
    fig = make_subplots(rows=1, cols=2 if with_memory else 1,
                        subplot_titles=["median step (ms, lower is better)"] + (["peak RSS (MiB, lower is better)"] if with_memory else []))
    fig.add_trace(go.Bar(x=names, y=[s.median_step_ms for s in sides], marker_color=colors, showlegend=False,
                         text=[f"{s.median_step_ms:.1f} ms" for s in sides], textposition="auto"), row=1, col=1)
    if with_memory:
        fig.add_trace(go.Bar(x=names, y=[s.peak_rss_mib for s in sides], marker_color=colors, showlegend=False,
                             text=[f"{s.peak_rss_mib:.0f} MiB" for s in sides], textposition="auto"), row=1, col=2)
    mem = f", memory {result.memory_ratio:.2f}x" if result.memory_ratio else ""
    fig.update_layout(title=f"Same trainable set: on-device step time {result.step_time_ratio:.2f}x PyTorch eager{mem} (>1: better)",
                      template="plotly_white", height=340)
    return fig
