"""The graph panel: export to ONNX, validate against PyTorch, fuse, and show what fusion did: the
before/after operator counts, every fused node with the exported subgraph it replaced (choose one
to draw it), the diagnoses of missing fusions, and the graph itself in Netron.

A view over :class:`workbench.sessions.graph.GraphSession` (export and fuse through the library, the
Netron server on 127.0.0.1) and :mod:`workbench.plots.graph`.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Callable, Optional

import ipywidgets as W
import plotly.graph_objects as go

from workbench.core.options import field_help
from workbench.graph import BOOKKEEPING_OPS, ExportConfig, ExportResult, FusedNode, FusionConfig, FusionReport, Variant, VariantResult
from workbench.graph import choice_summary
from workbench.plots import graph as graph_plots
from workbench.runtime.device import DeviceError, normalize_device
from workbench.runtime.netron_view import NetronError, NetronServer, iframe_html, unavailable_html
from workbench.sessions.graph import FusionLike, GraphSession, as_fusion_report  # noqa: F401  (as_fusion_report: widgets.graph's name)

from .base import (
    Markup,
    FAIL_COLOUR,
    MUTED_COLOUR,
    OK_COLOUR,
    WARN_COLOUR,
    Panel,
    PanelInputError,
    check_choice,
    coloured,
    config_default,
    fmt,
    html_table,
    replace_figure,
)

EXPORT_PRESETS = ("quick", "default", "strict")
FUSION_PRESETS = ("quick", "default", "inspect_only", "transformer_only", "gpu")
DEVICES = ("cpu", "cuda")
FIGURES: dict[str, Callable[[FusionReport], go.Figure]] = {
    "operator counts": graph_plots.op_counts,
    "fused operators": graph_plots.fused_ops,
    "latency": graph_plots.latency,
    "size on disk": graph_plots.size_on_disk,
}


def fused_nodes(variant: VariantResult) -> list[FusedNode]:
    """The nodes of ``variant`` that replaced something (conversions such as Cast are left out)."""
    return [f for f in variant.provenance if f.replaced and f.op_type not in BOOKKEEPING_OPS]


def node_label(f: FusedNode) -> str:
    ops = ", ".join(f"{k} {v}" for k, v in list(f.replaced_ops.items())[:5])
    return f"{f.op_type} · {f.label} · replaced {len(f.replaced)} nodes ({ops})"


def _timing_cell(report: FusionReport, v) -> Markup:
    """The variant's median at the first shape, its speed-up over the base with the interval from the
    interleaved rounds, and the share of this CPU's floor it reached; a warning when timed under load."""
    if not v.latency:
        return Markup("–")
    lat = v.latency[0]
    text = f"{fmt(lat.median_ms, '.2f')} ms"
    speed = next((sp for sp in report.speed if sp.name == v.name.value and (sp.batch, sp.seq) == (lat.batch, lat.seq)), None)
    if speed is not None:
        text += f", {speed.ratio.text()} vs {speed.base}"
    if lat.of_floor:
        text += f", {fmt(100 * lat.of_floor, '.0f', '%')} of floor"
    if report.load is not None and report.load.contended:
        return Markup(html.escape(text) + " " + coloured("timed under load: not a measured fact", False))
    return Markup(html.escape(text))


def variants_table(report: FusionReport) -> str:
    rows = []
    first = report.variants[0].latency[0] if report.variants and report.variants[0].latency else None
    shape = f" ({first.batch}x{first.seq})" if first is not None else ""
    for v in report.variants:
        fused = ", ".join(f"{k} {n}" for k, n in v.fused_ops.items()) or "–"
        rows.append([
            v.name.value, v.session_optimization, v.node_count, f"-{v.nodes_removed} / +{v.nodes_added}", fused,
            fmt(v.size_mib, ".1f", " MiB"), _timing_cell(report, v),
            coloured(f"{'passed' if v.validation.passed else 'FAILED'} (max |Δ logit| {fmt(v.validation.max_abs_diff, '.1e')}, "
                     f"labels agree {fmt(100 * v.validation.label_agreement, '.1f', '%')})", v.validation.passed),
        ])
    return html_table(["variant", "session level", "nodes", "removed / added", "fused operators", "size",
                       f"latency{shape}, speed-up [95% CI], of this CPU's floor", "validation"],
                      rows, css_class="wb-table wb-variants")


def choice_table(report: FusionReport) -> str:
    """The graph later stages take and why, with each candidate's fused operators and node count beside the full
    fusion's (empty for a fusion result written before the choice existed)."""
    ch = choice_summary(report)
    if ch is None:
        return ""
    shapes = sorted({k for c in ch["candidates"] for k in c["speedup_vs_full"]})
    rows = [[c["name"] + (" (taken)" if c["name"] == ch["chosen"] else ""),
             ", ".join(f"{k} {n}" for k, n in c["fused_ops"].items()) or "–", c["node_count"],
             *[f"{fmt(r['value'], '.2f')}x [{fmt(r['lo'], '.2f')}, {fmt(r['hi'], '.2f')}]" if (r := c["speedup_vs_full"].get(k))
               else "–" for k in shapes]] for c in ch["candidates"]]
    return (f"<div>Graph the later stages take ({html.escape(ch['mode'])}): <b>{html.escape(ch['chosen'])}</b>. "
            f"{html.escape(ch['reason'])}</div>"
            + html_table(["candidate", "fused operators", "nodes", *[f"{k} vs full [95% CI]" for k in shapes]], rows,
                         css_class="wb-table wb-fusion-choice"))


def diagnoses_html(report: FusionReport) -> str:
    if not report.diagnoses:
        if report.expected_fusions:
            return coloured("every expected fusion happened: " + ", ".join(
                f"{k} {v}" for k, v in report.expected_fusions.items()), True)
        return ""
    items = "".join(
        f'<li class="wb-diagnosis"><b>{html.escape(d.fusion)}</b>: expected {d.expected}, found {d.found}. '
        f"Cause: {html.escape(d.cause)} <b>Fix:</b> {html.escape(d.fix)}</li>"
        for d in report.diagnoses
    )
    return f'<div style="border-left:4px solid {WARN_COLOUR};padding:4px 8px"><b>Missing fusions</b><ul>{items}</ul></div>'


def node_detail_html(f: FusedNode) -> str:
    replaced = html_table(["op", "name", "inputs", "outputs"],
                          [[n.op_type, n.name, ", ".join(n.inputs[:4]), ", ".join(n.outputs[:3])] for n in f.replaced[:60]],
                          css_class="wb-table wb-replaced")
    more = f"<div>... and {len(f.replaced) - 60} more</div>" if len(f.replaced) > 60 else ""
    shared = (f'<div style="color:{MUTED_COLOUR}">shared with other fused nodes: {html.escape(", ".join(f.shared[:12]))}</div>'
              if f.shared else "")
    return (
        f"<div><b>{html.escape(f.op_type)}</b> {html.escape(f.label)}: inputs {html.escape(', '.join(f.inputs))}; "
        f"outputs {html.escape(', '.join(f.outputs))}. Starts from exported tensors: "
        f"{html.escape(', '.join(f.boundary_inputs) or '–')}</div>{shared}"
        f"<details><summary>the {len(f.replaced)} exported nodes it replaced</summary>{replaced}{more}</details>"
    )


def placement_html(report: FusionReport) -> str:
    """Device, and on CUDA where each variant's nodes ran, the Memcpy nodes and CUDA-graph capture."""
    if report.device == "cpu":
        return '<div class="wb-device">Device: <b>cpu</b> (ONNX Runtime CPU provider)</div>'
    items = []
    for name, p in report.placement.items():
        line = html.escape(p.summary())
        if p.capture_refusal is not None:
            line += f"<br>fix: {html.escape(p.capture_refusal.fix)}"
        items.append(f"<li><b>{html.escape(name)}</b>: {line}</li>")
    return (f'<div class="wb-device">Device: <b>{html.escape(report.device)}</b> (I/O binding: inputs and outputs on the '
            f'device)</div><ul class="wb-placement">{"".join(items)}</ul>')


class GraphPanel(Panel):
    """Export a model to ONNX (validated against PyTorch on real examples), then build and compare
    the fused variants.

    Options: ``model`` ("tiny", "minilm", a checkpoint folder), ``models`` (extra ``{label: folder}``
    choices, e.g. the training step's checkpoints), ``export_preset`` (quick, default, strict),
    ``fusion_preset`` (quick, default, inspect_only, transformer_only), ``opset``,
    ``attn_implementation`` (eager, sdpa: try sdpa to see the Attention fusion go missing),
    ``device`` (cpu, cuda, cuda:N: where ONNX Runtime validates and times; cuda needs the inference GPU
    environment, and says so when it is absent), ``fp16`` (also build the fused graph in float16,
    validated against FP32 with FP16's tolerance),
    ``data`` (a ``DataConfig`` or ``DatasetDict`` to validate on; default the quick reviews),
    ``run_dir`` (export goes to ``<run_dir>/export``, fusion to ``<run_dir>/fusion``), ``saved``
    (a ``FusionReport``, ``fusion.json`` or run folder to open without recomputing), ``figure``.

    ``panel.session`` is the :class:`~workbench.sessions.graph.GraphSession` holding the work:
    ``panel.result`` (its :class:`~workbench.graph.fusion.FusionReport`), ``panel.export_result`` (the
    :class:`~workbench.graph.export.ExportResult` it was built from) and ``panel.netron`` are read from it.
    """

    SESSION = GraphSession
    OPTIONS = {
        "model": "tiny",
        "models": None,
        "export_preset": "quick",
        "fusion_preset": "quick",
        "opset": config_default(ExportConfig, "opset"),  # the config's own defaults (one place)
        "attn_implementation": config_default(ExportConfig, "attn_implementation"),
        "device": "cpu",
        "fp16": False,
        "data": None,
        "run_dir": None,
        "saved": None,
        "figure": "operator counts",
    }
    TITLE = "Export, validate, fuse"
    HELP = ("The exported graph is checked against PyTorch's logits on real reviews; each optimized variant is checked again. "
            "Pick a fused node to see the exported subgraph it replaced.")
    RUN_LABEL = "Export and fuse"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.controls["figure"].observe(lambda _c: self._draw_figure(), names="value")
        self.node_select.observe(lambda _c: self._draw_node(), names="value")
        self.variant_select.observe(lambda _c: self._fill_nodes(), names="value")
        self.netron_button.on_click(lambda _b: self.show_netron())
        self.netron_stop_button.on_click(lambda _b: self.stop_netron())
        if self.options["models"]:
            self.set_models(self.options["models"])
        if self.options["saved"] is not None:
            self.show(as_fusion_report(self.options["saved"]))

    # ---- controls ----------------------------------------------------------------------------
    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        check_choice("export_preset", options["export_preset"], EXPORT_PRESETS)
        check_choice("fusion_preset", options["fusion_preset"], FUSION_PRESETS)
        check_choice("attn_implementation", options["attn_implementation"], ("eager", "sdpa"))
        check_choice("figure", options["figure"], list(FIGURES))
        try:
            device = normalize_device(options["device"])
        except DeviceError as exc:
            raise PanelInputError(str(exc)) from None
        style = {"description_width": "110px"}
        return {
            "model": W.Combobox(value=str(options["model"]), options=["tiny", "minilm"], ensure_option=False,
                                description="model", placeholder="tiny, minilm or a checkpoint folder", style=style),
            "export_preset": W.Dropdown(options=EXPORT_PRESETS, value=options["export_preset"], description="export preset", style=style),
            "fusion_preset": W.Dropdown(options=FUSION_PRESETS, value=options["fusion_preset"], description="fusion preset", style=style),
            # the tooltips are the configs' own help (the CLI flags and the docs read it there too)
            "opset": W.BoundedIntText(value=int(options["opset"]), min=1, max=99, description="opset", style=style,
                                      tooltip=field_help(ExportConfig, "opset")),
            "attn_implementation": W.ToggleButtons(options=["eager", "sdpa"], value=options["attn_implementation"],
                                                   description="attention", style=style,
                                                   tooltip=field_help(ExportConfig, "attn_implementation")),
            "figure": W.ToggleButtons(options=list(FIGURES), value=options["figure"], description="figure", style=style),
            # cuda is always offered: where it is absent, running says what to install (workbench.runtime.device)
            "device": W.Dropdown(options=sorted({*DEVICES, device}), value=device, description="device", style=style,
                                 tooltip=field_help(ExportConfig, "device")),
            "fp16": W.Checkbox(value=bool(options["fp16"]), description="FP16 variant (validated against FP32)", indent=False),
        }

    def _controls_box(self) -> W.Widget:
        c = self.controls
        return W.VBox([c["model"], W.HBox([c["export_preset"], c["fusion_preset"]]), W.HBox([c["opset"], c["attn_implementation"]]),
                       W.HBox([c["device"], c["fp16"]])])

    def _build_views(self) -> list[W.Widget]:
        self.summary_html = W.HTML("")
        self.figure = go.FigureWidget(layout=dict(height=420, template="plotly_white"))
        self.variant_select = W.Dropdown(options=[], description="variant")
        self.node_select = W.Select(options=[], rows=8, layout=W.Layout(width="100%"), description="fused node")
        self.node_html = W.HTML("")
        self.node_figure = go.FigureWidget(layout=dict(height=520, template="plotly_white"))
        self.netron_button = W.Button(description="Show in Netron", icon="sitemap")
        self.netron_stop_button = W.Button(description="Stop Netron", disabled=True)
        self.netron_html = W.HTML("")
        return [
            self.summary_html,
            self.controls["figure"],
            self.figure,
            W.HTML("<b>Provenance</b>: what each fused node replaced"),
            self.variant_select,
            self.node_select,
            self.node_html,
            self.node_figure,
            W.HBox([self.netron_button, self.netron_stop_button]),
            self.netron_html,
        ]

    def set_models(self, models: dict[str, str]) -> None:
        """Offer extra models (``{label: folder}``, e.g. training checkpoints) and select the first."""
        combo = self.controls["model"]
        folders = [str(p) for p in models.values()]
        combo.options = [*folders, "tiny", "minilm"]
        if folders:
            combo.value = folders[0]

    def set_data(self, data: Any) -> None:
        """The data to validate on (a ``DataConfig`` or ``DatasetDict``): the training step's data."""
        self.session.data = data

    @property
    def export_result(self) -> Optional[ExportResult]:
        """The export the shown fusion report was built from (the session's)."""
        return self.session.export_result

    @property
    def netron(self) -> NetronServer:
        """The session's Netron server (127.0.0.1)."""
        return self.session.netron

    # ---- running -----------------------------------------------------------------------------
    def _compute(self, values: dict[str, Any]) -> FusionReport:
        return self.session.export_and_fuse(values["model"], *self.configs(values))

    def configs(self, values: Optional[dict[str, Any]] = None) -> tuple[ExportConfig, FusionConfig]:
        """The export and fusion configs the controls describe."""
        values = values or self.values()
        device = values["device"]
        # the gpu preset is CUDA whatever the dropdown says: asking for it where CUDA is absent is the clear error
        fusion_kw = {"device": device} if values["fusion_preset"] != "gpu" or device != "cpu" else {}
        if values["fp16"]:
            fusion_kw["fp16"] = True
        fusion_cfg = getattr(FusionConfig, values["fusion_preset"])(**fusion_kw)
        export_cfg = getattr(ExportConfig, values["export_preset"])(
            opset=int(values["opset"]), attn_implementation=values["attn_implementation"], device=fusion_cfg.device)
        return export_cfg, fusion_cfg

    def _open(self, result: Any) -> FusionReport:
        return self.session.open(result)

    def _draw(self, report: FusionReport) -> None:
        export_line = ""
        e = self.export_result
        if e is not None and Path(e.onnx_path) == Path(report.source_path):
            v = e.validation
            export_line = (
                f"<div>Exported <b>{html.escape(e.model_name)}</b> ({html.escape(e.model_info.model_type or 'model')}, "
                f"opset {e.opset}, {e.attn_implementation} attention): graph inputs "
                f"<code>{html.escape(', '.join(e.input_names))}</code>, "
                f"{e.node_count} nodes, {fmt(e.size_mib, '.1f')} MiB. Validation: "
                + coloured(v.message, v.passed)
                + "</div>"
            )
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in report.notes)
        self.summary_html.value = (
            export_line + variants_table(report) + choice_table(report) + placement_html(report) + diagnoses_html(report)
            + (f'<ul class="wb-notes">{notes}</ul>' if notes else "")
        )
        self._draw_figure()
        names = [v.name.value for v in report.variants if v.name is not Variant.UNOPTIMIZED] or [report.variants[0].name.value]
        current = self.variant_select.value
        self.variant_select.options = names
        self.variant_select.value = current if current in names else (
            Variant.TRANSFORMER.value if Variant.TRANSFORMER.value in names else names[-1])
        self._fill_nodes()

    def _draw_figure(self) -> None:
        if self.result is None:
            return
        replace_figure(self.figure, FIGURES[self.controls["figure"].value](self.result))

    def _fill_nodes(self) -> None:
        if self.result is None or not self.variant_select.value:
            return
        nodes = fused_nodes(self.result.variant(self.variant_select.value))
        options = [(node_label(f), f.name) for f in nodes]
        self.node_select.options = options
        if not options:
            self.node_html.value = coloured(f"the {self.variant_select.value} variant fused nothing", None)
            replace_figure(self.node_figure, go.Figure())
            return
        default = graph_plots.pick_fused_node(self.result, self.variant_select.value)
        if self.node_select.value == default.name:
            self._draw_node()
        else:
            self.node_select.value = default.name

    def _draw_node(self) -> None:
        """Draw the chosen fused node beside the exported subgraph it replaced."""
        name = self.node_select.value
        if self.result is None or not name:
            return
        variant = self.variant_select.value
        node = self.result.variant(variant).fused_node(name)
        self.node_html.value = node_detail_html(node)
        replace_figure(self.node_figure, graph_plots.fused_node_drawing(self.result, node=name, variant=variant))

    def _summary(self, report: FusionReport) -> str:
        fused = ", ".join(f"{k} {v}" for k, v in report.fused_op_counts.items()) if report.fused_path else ""
        state = "all variants validated" if report.all_passed else "a variant FAILED validation"
        missing = f"; {len(report.diagnoses)} expected fusion(s) missing" if report.diagnoses else ""
        taken = f"; later stages take: {report.choice.chosen}" if report.choice is not None else ""
        return f"{state}; fused: {fused or 'nothing'}{missing}{taken}"

    def _summary_colour(self, report: FusionReport) -> str:
        if not report.all_passed:
            return FAIL_COLOUR
        return WARN_COLOUR if report.diagnoses else OK_COLOUR

    # ---- Netron ------------------------------------------------------------------------------
    def show_netron(self) -> Optional[str]:
        """Serve the selected variant's graph with Netron on 127.0.0.1 and show it in an iframe.

        Returns the URL, or None when Netron cannot start (the reason is shown in its place)."""
        if self.result is None:
            self.netron_html.value = unavailable_html("export and fuse first: there is no graph to show yet")
            return None
        name = self.variant_select.value or Variant.UNOPTIMIZED.value
        path = self.session.graph_path(name)
        try:
            url = self.session.show_netron(name)
        except NetronError as exc:
            self.netron_html.value = unavailable_html(str(exc))
            return None
        self.netron_html.value = (
            f'<div style="color:{MUTED_COLOUR}">{html.escape(name)}: {html.escape(str(path))} at {html.escape(url)}</div>'
            + iframe_html(url, height=640, title=f"Netron: {name}")
        )
        self.netron_stop_button.disabled = False
        return url

    def stop_netron(self) -> None:
        self.session.stop_netron()
        self.netron_html.value = ""
        self.netron_stop_button.disabled = True
