"""GraphPanel without a browser: a real export and fusion of the tiny model, the provenance
drawing, Netron, a missing-fusion diagnosis, errors, and opening a saved report."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

import widgets.graph as graph_module
import workbench.graph as workbench_graph
from widgets import GraphPanel, PanelInputError
from widgets.graph import fused_nodes
from workbench.graph import FusionReport, Variant
from workbench.plots import graph as graph_plots


@pytest.fixture(scope="module")
def graph_panel(tmp_path_factory, quick_data) -> GraphPanel:
    panel = GraphPanel(model="tiny", data=quick_data, run_dir=tmp_path_factory.mktemp("graph-panel"))
    panel.run()
    yield panel
    panel.close()


def test_result_is_the_fusion_report_of_the_export(graph_panel: GraphPanel) -> None:
    report = graph_panel.result
    assert isinstance(report, FusionReport)
    export = graph_panel.export_result
    assert export.validation.passed, export.validation.message
    assert Path(report.source_path) == Path(export.onnx_path)
    run_dir = Path(graph_panel.options["run_dir"])
    assert (run_dir / "export" / "export.json").is_file() and (run_dir / "fusion" / "fusion.json").is_file()
    assert graph_panel.progress.bar.value == graph_panel.progress.bar.max == 2


def test_summary_lists_every_variant_and_the_fusions(graph_panel: GraphPanel) -> None:
    report = graph_panel.result
    html = graph_panel.summary_html.value
    # the variants' table, then the fusion choice's (the graph later stages take, beside the full fusion)
    assert html.count("<tr>") == 1 + len(report.variants) + 1 + len(report.choice.candidates)
    assert f"later stages take: {report.choice.chosen}" in graph_panel.status.value
    for c in report.choice.candidates:
        assert ", ".join(f"{k} {n}" for k, n in c.fused_ops.items()) in html
    for v in report.variants:
        assert f"<td style=\"padding:2px 8px\">{v.name.value}</td>" in html
    for op, n in report.fused_op_counts.items():
        assert f"{op} {n}" in graph_panel.status.value
    # the tiny BERT exported with eager attention gets every fusion (the SDPA case is tested below)
    assert report.diagnoses == [] and "every expected fusion happened" in html
    assert {"Attention", "SkipLayerNormalization"} <= set(report.fused_op_counts)


def test_figures_are_the_library_figures(graph_panel: GraphPanel) -> None:
    for name, builder in graph_module.FIGURES.items():
        graph_panel.controls["figure"].value = name
        expected = builder(graph_panel.result)
        assert [(t.type, t.name) for t in graph_panel.figure.data] == [(t.type, t.name) for t in expected.data]
    graph_panel.controls["figure"].value = "operator counts"
    # and, counted here from the graphs themselves, not through the library's figure code: the
    # bars hold each operator's node count in the export and in the transformer-optimized graph
    import collections

    import onnx

    r = graph_panel.result
    for trace, v in zip(graph_panel.figure.data, (r.variant(Variant.UNOPTIMIZED), r.variant(Variant.TRANSFORMER))):
        counted = collections.Counter(n.op_type for n in onnx.load(v.path, load_external_data=False).graph.node)
        assert dict(zip(trace.y, trace.x)) == {op: counted.get(op, 0) for op in trace.y}
        assert set(trace.y) >= set(counted), v.name


def test_choosing_a_fused_node_draws_it_beside_what_it_replaced(graph_panel: GraphPanel) -> None:
    report = graph_panel.result
    assert graph_panel.variant_select.value == Variant.TRANSFORMER.value
    nodes = fused_nodes(report.fused)
    assert [v for _, v in graph_panel.node_select.options] == [f.name for f in nodes]
    assert graph_panel.node_select.value == graph_plots.pick_fused_node(report).name
    other = next(f for f in nodes if f.name != graph_panel.node_select.value)
    graph_panel.node_select.value = other.name
    expected = graph_plots.fused_node_drawing(report, node=other.name)
    assert graph_panel.node_figure.layout.title.text == expected.layout.title.text
    assert len(graph_panel.node_figure.data) == len(expected.data)
    assert other.op_type in graph_panel.node_html.value
    assert f"the {len(other.replaced)} exported nodes it replaced" in graph_panel.node_html.value


def test_switching_variant_refills_the_provenance(graph_panel: GraphPanel) -> None:
    graph_panel.variant_select.value = Variant.ORT_EXTENDED.value
    expected = [f.name for f in fused_nodes(graph_panel.result.variant(Variant.ORT_EXTENDED))]
    assert [v for _, v in graph_panel.node_select.options] == expected
    graph_panel.variant_select.value = Variant.TRANSFORMER.value


def test_netron_serves_the_selected_graph_on_localhost(graph_panel: GraphPanel, listening) -> None:
    import os

    before = listening(os.getpid())
    url = graph_panel.show_netron()
    assert url is not None and url.startswith("http://127.0.0.1:")
    assert listening(os.getpid()) - before == {("127.0.0.1", graph_panel.netron.address[1])}
    assert f'src="{url}"' in graph_panel.netron_html.value
    assert str(graph_panel.result.fused.path) in graph_panel.netron_html.value
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
    graph_panel.stop_netron()
    assert not graph_panel.netron.running and graph_panel.netron_html.value == ""


def test_sdpa_export_shows_the_missing_attention_diagnosis(tmp_path: Path, quick_data) -> None:
    panel = GraphPanel(model="tiny", attn_implementation="sdpa", fusion_preset="inspect_only", data=quick_data, run_dir=tmp_path)
    report = panel.run()
    assert report.diagnoses, "an SDPA export should miss the Attention fusion"
    html = panel.summary_html.value
    assert "Missing fusions" in html
    for d in report.diagnoses:
        assert d.fusion in html
    assert "expected fusion(s) missing" in panel.status.value


def test_bad_model_is_shown_with_the_fix_and_the_panel_recovers(tmp_path: Path, quick_data) -> None:
    panel = GraphPanel(model=str(tmp_path / "missing"), fusion_preset="inspect_only", data=quick_data, run_dir=tmp_path)
    with pytest.raises(ValueError):
        panel.run()
    assert "missing" in panel.error_box.value and "nothing is downloaded" in panel.error_box.value
    panel.set_values(model="")
    with pytest.raises(PanelInputError, match="model is empty"):
        panel.run()
    panel.set_values(model="tiny")
    assert isinstance(panel.run(), FusionReport) and panel.error is None


def test_bad_options_are_refused() -> None:
    with pytest.raises(PanelInputError, match="fusion_preset must be one of"):
        GraphPanel(fusion_preset="O5")
    with pytest.raises(TypeError, match="DataConfig"):
        GraphPanel(data=[1, 2])
    with pytest.raises(TypeError, match="did you mean 'opset'"):
        GraphPanel(opsett=17)


def test_opens_a_saved_report_without_recomputing(fused_tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    def no(*a, **k):
        raise AssertionError("opening a saved report must not export or fuse")

    monkeypatch.setattr(workbench_graph, "run_export", no)  # what the panel's Run calls (through workflows.stages.export_and_fuse)
    monkeypatch.setattr(workbench_graph, "run_fusion", no)
    folder = Path(fused_tiny.fused_path).parent
    panel = GraphPanel(saved=folder)
    assert panel.result.fused_op_counts == fused_tiny.fused_op_counts
    assert panel.export_result is not None
    assert "opened" in panel.status.value
    assert len(panel.node_select.options) == len(fused_nodes(fused_tiny.fused))


# ---- device and FP16 -----------------------------------------------------------------
def test_device_and_fp16_controls(tmp_path, quick_data) -> None:
    with pytest.raises(PanelInputError, match="device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"):
        GraphPanel(device="gpu")
    panel = GraphPanel(model="tiny", data=quick_data, run_dir=tmp_path, fusion_preset="inspect_only", fp16=True)
    try:
        assert panel.controls["device"].options == ("cpu", "cuda") and panel.controls["device"].value == "cpu"
        report = panel.run()
        assert report.variant("transformer_fp16").validation.passed
        assert "transformer_fp16" in panel.summary_html.value and "Device: <b>cpu</b>" in panel.summary_html.value
    finally:
        panel.close()


def _no_cuda_here():
    from workbench.runtime.device import cuda_facts, cuda_problem

    return cuda_problem(cuda_facts())


@pytest.mark.skipif(_no_cuda_here() is None, reason="CUDA is available here: the missing-CUDA message cannot be shown")
def test_cuda_without_cuda_is_one_message_and_writes_nothing(tmp_path, quick_data) -> None:
    import html

    why = _no_cuda_here()
    panel = GraphPanel(model="tiny", data=quick_data, run_dir=tmp_path, fusion_preset="inspect_only")
    try:
        report = panel.run()
        panel.controls["device"].value = "cuda"
        before = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(ValueError):
            panel.run()
        assert html.escape(why) in panel.error_box.value and panel.result is report
        assert sorted(p.name for p in tmp_path.iterdir()) == before
    finally:
        panel.close()


def test_a_cuda_report_shows_placement_memcpy_and_the_capture_refusal(graph_panel: GraphPanel) -> None:
    import dataclasses

    from workbench.runtime.device import CPU_PROVIDER, CUDA_PROVIDER, NodePlacement, analyze_placement

    rep = analyze_placement([NodePlacement("Shape_1", "Shape", CPU_PROVIDER), NodePlacement("M", "MatMul", CUDA_PROVIDER)],
                            "cuda", [CUDA_PROVIDER, CPU_PROVIDER], memcpy={"MemcpyToHost": 1, "MemcpyFromHost": 0},
                            capture_error="all compute graph nodes have not been partitioned to the CUDA EP")
    cpu_report = graph_panel.result
    try:
        graph_panel.show(dataclasses.replace(cpu_report, device="cuda", placement={"unoptimized": rep}))
        text = graph_panel.summary_html.value
        assert "Device: <b>cuda</b>" in text and "Memcpy nodes inserted: 1" in text
        assert "CUDA graph refused" in text and "fix: use the fused graph" in text
    finally:
        graph_panel.show(cpu_report)


def test_a_roberta_folder_shows_its_own_inputs_and_why_its_embeddings_do_not_fuse(tmp_path: Path, quick_data) -> None:
    from workbench.workflows.coverage import build_tiny

    folder = build_tiny("roberta", tmp_path / "roberta")
    panel = GraphPanel(model=str(folder), fusion_preset="inspect_only", data=quick_data, run_dir=tmp_path / "run")
    report = panel.run()
    assert panel.export_result.input_names == ["input_ids", "attention_mask"]
    html = panel.summary_html.value
    assert "roberta" in html and "<code>input_ids, attention_mask</code>" in html
    assert [d.fusion for d in report.diagnoses] == ["EmbedLayerNormalization"]
    assert "padding id" in html  # the architecture's reason, not the generic one
    panel.close()


def test_variants_table_carries_the_floor_and_the_interval(fused_tiny) -> None:
    """The graph panel's table shows each variant's share of this CPU's floor and its
    speed-up over PyTorch with the interval from the interleaved rounds; a busy machine is said."""
    import dataclasses

    from widgets.graph import variants_table

    report = dataclasses.replace(fused_tiny, load=dataclasses.replace(fused_tiny.load, contended=False, reasons=[]))
    html = variants_table(report)
    sp = report.speed[0]
    assert f"({sp.ratio.lo:.2f}-{sp.ratio.hi:.2f}) vs pytorch" in html and "of floor" in html
    busy = dataclasses.replace(report, load=dataclasses.replace(report.load, contended=True, reasons=["spinner"]))
    assert "timed under load" in variants_table(busy)
