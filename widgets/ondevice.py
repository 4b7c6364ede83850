"""The on-device training panel: write ONNX Runtime's training artifacts for a chosen trainable
set, train with ``onnxruntime.training.api`` beside PyTorch eager on the same batches, and show
both loss curves with their difference against the tolerance, step time and peak memory, the
artifact sizes and the inference graph's validation.

A view over :class:`workbench.sessions.ondevice.OnDeviceSession` (:func:`workbench.ondevice.run_ondevice`,
the page server on 127.0.0.1) and :mod:`workbench.plots.ondevice`.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, Optional

import ipywidgets as W
import plotly.graph_objects as go

from workbench.core.options import field_help
from workbench.ondevice import OnDeviceConfig, OnDeviceResult, Trainable
from workbench.plots import ondevice as ondevice_plots
from workbench.sessions.ondevice import OnDeviceSession

from .base import FAIL_COLOUR, OK_COLOUR, Panel, check_choice, check_range, coloured, fmt, html_table, replace_figure

TRAINABLE = tuple(t.value for t in Trainable)


def result_html(r: OnDeviceResult) -> str:
    """Artifacts, agreement, cost and the inference graph as tables."""
    a = r.artifacts
    files = html_table(["artifact", "size", "IR as written"],
                       [[f.name, fmt(f.size_mib, ".2f", " MiB"), f.ir_version if f.ir_version is not None else "–"] for f in a.files])
    facts = html_table(["", ""], [
        ["trainable", f"{a.trainable.value}{f' (last {a.last_n_layers})' if a.trainable is Trainable.LAST else ''}: "
                      f"{a.trainable_parameters:,} of {a.total_parameters:,} parameters ({len(a.trainable_tensors)} tensors)"],
        ["loss, optimizer, opset", f"{a.loss}, {a.optimizer}, {a.opset}"],
        ["loss curves", coloured(f"{'agree' if r.loss_parity else 'DIFFER'}: largest |Δ| {r.max_loss_diff:.2g} vs "
                                 f"tolerance {r.tolerance:g} over {len(r.ondevice_losses)} steps", r.loss_parity)],
        ["inference graph", coloured(r.validation.message, r.validation.passed)],
        ["vs the PyTorch-trained model", f"largest |Δ logit| {r.agreement_with_pytorch_training.max_abs_diff:.2g}; "
                                         f"weights differ by {r.weights_max_abs_diff:.2g}"],
        ["next", f"workbench fuse {r.inference_dir}"],
    ])
    cost = html_table(["side", "median step", "peak RSS", "growth during steps"], [
        [s.name, fmt(s.median_step_ms, ".2f", " ms"), fmt(s.peak_rss_mib, ".0f", " MiB"), fmt(s.rss_growth_mib, ".0f", " MiB")]
        for s in (r.ondevice, r.pytorch)])
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes)
    return facts + files + cost + (f"<ul>{notes}</ul>" if notes else "")


class OnDevicePanel(Panel):
    """Train on the device (``onnxruntime.training.api``) beside PyTorch eager; ``panel.session`` is the
    :class:`~workbench.sessions.ondevice.OnDeviceSession`, ``panel.result`` its :class:`~workbench.ondevice.OnDeviceResult`.

    Options: ``model`` ("tiny", "minilm" or a checkpoint folder; a TrainPanel's checkpoint works),
    ``trainable``, ``last_n_layers``, ``steps``, ``lr``, ``batch_size``, ``threads``,
    ``measure_memory``, ``data`` (a DatasetDict; default the reviews), ``run_dir``, ``serve_page``
    (after a run, serve its web page on 127.0.0.1 and link it: the artifacts trained in this browser
    by onnxruntime-web; ``stop_page()`` ends the server).
    """

    SESSION = OnDeviceSession
    # the training settings' defaults are OnDeviceConfig's quick preset (one place), the rest the panel's own
    OPTIONS = {"model": "tiny",
               **{k: (v.value if hasattr(v, "value") else v) for k, v in dataclasses.asdict(OnDeviceConfig.quick()).items()
                  if k in ("trainable", "last_n_layers", "steps", "lr", "batch_size", "threads", "measure_memory")},
               "data": None, "run_dir": None, "serve_page": True}
    TITLE = "On-device training"
    HELP = ("ONNX Runtime's training artifacts for the chosen parameters, trained with onnxruntime.training.api "
            "beside PyTorch eager on the same batches; exported back to an inference graph.")
    RUN_LABEL = "Train on device"
    STOPPABLE = True

    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        check_choice("trainable", options["trainable"], TRAINABLE)
        check_range("steps", options["steps"], 1, 10_000)
        check_range("last_n_layers", options["last_n_layers"], 1, 100)
        check_range("lr", options["lr"], 1e-8, 0.5, "a learning rate such as 1e-4")
        check_range("batch_size", options["batch_size"], 1, 1024)
        style = {"description_width": "110px"}
        controls = {
            "model": W.Text(value=str(options["model"]), description="model", style=style),
            "trainable": W.ToggleButtons(options=TRAINABLE, value=options["trainable"], description="trainable", style=style),
            "last_n_layers": W.BoundedIntText(value=int(options["last_n_layers"]), min=1, max=100, description="last N layers",
                                              style=style),
            "steps": W.BoundedIntText(value=int(options["steps"]), min=1, max=10_000, description="steps", style=style),
            "lr": W.BoundedFloatText(value=float(options["lr"]), min=1e-8, max=0.5, step=1e-4, description="learning rate",
                                     style=style),
            "batch_size": W.BoundedIntText(value=int(options["batch_size"]), min=1, max=1024, description="batch size",
                                           style=style),
        }
        for name, widget in controls.items():  # the config's own help (the CLI flags and the docs read it there too)
            if name != "model":
                widget.tooltip = field_help(OnDeviceConfig, name)
        return controls

    def _controls_box(self) -> W.Widget:
        c = self.controls
        return W.VBox([W.HBox([c["model"], c["trainable"]]), W.HBox([c["last_n_layers"], c["steps"]]),
                       W.HBox([c["lr"], c["batch_size"]])])

    def _build_views(self) -> list[W.Widget]:
        self.figure = go.FigureWidget(layout=dict(height=460, template="plotly_white"))
        self.cost_figure = go.FigureWidget(layout=dict(height=340, template="plotly_white"))
        self.results_html = W.HTML("")
        self.page_html = W.HTML("")
        return [self.figure, self.page_html, self.results_html, self.cost_figure]

    def config(self, values: Optional[dict[str, Any]] = None) -> OnDeviceConfig:
        """The OnDeviceConfig the controls describe (OnDeviceError, one line, for a bad value); the model
        is the stage's input, ``values["model"]``."""
        v = values or self.values()
        base = OnDeviceConfig.quick if v["model"] == "tiny" else OnDeviceConfig.default
        return base(trainable=v["trainable"], last_n_layers=int(v["last_n_layers"]), steps=int(v["steps"]),
                    lr=float(v["lr"]), batch_size=int(v["batch_size"]), threads=self.options["threads"],
                    measure_memory=bool(self.options["measure_memory"]))

    def _compute(self, values: dict[str, Any]) -> OnDeviceResult:
        return self.session.train(values["model"], self.config(values))

    @property
    def page_server(self) -> Any:
        """The run's web page served on 127.0.0.1 (``workbench.ondevice.web.PageServer``) after a run (the session's)."""
        return self.session.page_server

    def _draw(self, result: OnDeviceResult) -> None:
        replace_figure(self.figure, ondevice_plots.loss_curves(result))
        replace_figure(self.cost_figure, ondevice_plots.cost_bars(result))
        self.results_html.value = result_html(result)
        self.page_html.value = self._page_link(result)

    def _page_link(self, result: OnDeviceResult) -> str:
        """A link to the run's web page (served on 127.0.0.1 by the session), or why there is none."""
        run_dir = self.session.page_dir() if result is self.session.result else None
        if run_dir is None:
            return f"<p>{html.escape(result.web_note)}</p>"
        importing = (f"then bring the weights back: <code>workbench ondevice import {html.escape(str(run_dir))} "
                     "trained_parameters.bin</code>")
        if not self.options["serve_page"]:
            return (f"<p>Web page: <code>{html.escape(str(result.web_page))}</code>; serve it with <code>workbench ondevice "
                    f"serve {html.escape(str(run_dir))}</code>, {importing}</p>")
        url = html.escape(self.session.serve_page())
        return (f"<p><a href='{url}' target='_blank'>Open the on-device page</a> ({url}, 127.0.0.1 only): these artifacts "
                f"trained in your browser by onnxruntime-web at learning rate {result.config.lr:g}; {importing}</p>")

    def stop_page(self) -> None:
        """Stop serving the web page (a new run replaces it)."""
        self.session.stop_page()

    def _summary(self, result: OnDeviceResult) -> str:
        return (f"curves {'agree' if result.loss_parity else 'DIFFER'} (|Δ| {result.max_loss_diff:.2g}); "
                f"inference graph {'validated' if result.validation.passed else 'FAILED validation'}; "
                f"step time {result.step_time_ratio:.2f}x PyTorch eager")

    def _summary_colour(self, result: OnDeviceResult) -> str:
        return OK_COLOUR if result.ok else FAIL_COLOUR
