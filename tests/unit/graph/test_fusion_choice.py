"""The fusion stage's choice of graph: the rule on given figures (no timing asserted), every candidate built and
validated on the tiny model, fusion.json's record of it, --fusion full keeping today's graph, and the session
honouring what a graph with a fusion left out asks for."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter

import onnx
import pytest

from workbench.core.latency import Ratio
from workbench.graph import FAMILIES, FULL, FUSION_MARGIN, FusionChoice, FusionConfig, load_fusion, pick_fusion, run_fusion
from workbench.runs import layout

TINY_FUSIONS = {"SkipLayerNormalization": 4, "Attention": 2, "BiasGelu": 2, "EmbedLayerNormalization": 1}
CANDIDATES = [FULL, *(f.candidate for f in FAMILIES)]


def r(value: float, lo: float, hi: float | None = None) -> Ratio:
    return Ratio(value=value, lo=lo, hi=hi if hi is not None else value + 0.05, rounds=10)


@pytest.fixture(scope="module")
def timed_tiny(tmp_path_factory, exported_tiny):
    """The tiny export fused with the timed choice (quick timings; FusionConfig.quick() alone keeps the full fusion)."""
    from workbench.graph import FusionConfig, run_fusion

    return run_fusion(exported_tiny, FusionConfig.quick(fusion="timed"), tmp_path_factory.mktemp("timed_tiny"))


# ---- the rule, on figures the test gives -------------------------------------------------------------------------
def test_the_fastest_candidate_faster_beyond_doubt_at_every_shape_is_chosen():
    figures = {
        "no_a": {"1x32": r(1.10, 1.05), "8x128": r(1.08, 1.04)},  # faster beyond doubt everywhere, tight intervals
        "no_b": {"1x32": r(1.30, 1.02), "8x128": r(1.25, 1.01)},  # wider, still above 1 everywhere, and faster: chosen
        "no_c": {"1x32": r(2.00, 1.50), "8x128": r(1.40, 0.99)},  # fastest by its medians, not beyond doubt at 8x128
    }
    chosen, reason = pick_fusion(figures)
    assert chosen == "no_b" and reason.startswith("no_b: ") and "8x128" in reason and "3%" in reason
    del figures["no_b"]
    assert pick_fusion(figures)[0] == "no_a"


def test_the_full_fusion_stays_when_no_candidate_is_faster_beyond_doubt_by_the_margin():
    figures = {"no_a": {"1x32": r(1.02, 1.01)}, "no_b": {"1x32": r(0.80, 0.70)}}  # no_a: beyond doubt, under the margin
    chosen, reason = pick_fusion(figures)
    assert chosen == FULL and reason.startswith("full fusion kept") and "closest: no_a" in reason
    # the margin is on the geometric mean over the shapes; beyond doubt is the low end above 1 at every shape
    assert pick_fusion({"no_a": {"1x32": r(1 + FUSION_MARGIN + 0.001, 1.001)}})[0] == "no_a"
    assert pick_fusion({"no_a": {"1x32": r(1 + FUSION_MARGIN - 0.001, 1.001)}})[0] == FULL
    assert pick_fusion({"no_a": {"1x32": r(1.20, 1.00), "8x128": r(1.30, 1.10)}})[0] == FULL
    assert pick_fusion({"no_a": {"1x32": r(1.05, 1.01), "8x128": r(1.02, 1.01)}})[0] == "no_a"  # 1.035 in the mean
    assert pick_fusion({"no_a": {"1x32": r(1.05, 1.02)}}, margin=0.10)[0] == FULL


def test_a_busy_machine_or_no_timing_keeps_the_full_fusion():
    clear = {"no_a": {"1x32": r(1.5, 1.4)}}
    chosen, reason = pick_fusion(clear, contended=True)
    assert chosen == FULL and "other work used the CPU" in reason
    assert pick_fusion({})[0] == FULL and pick_fusion({"no_a": {}})[0] == FULL


def test_fusion_mode_is_checked():
    assert FusionConfig().fusion == "timed"
    with pytest.raises(ValueError, match=r"fusion must be one of \['timed', 'full'\], got 'fastest'"):
        FusionConfig(fusion="fastest")


# ---- the stage on the tiny model ---------------------------------------------------------------------------------
def test_every_candidate_is_built_validated_and_recorded(timed_tiny):
    choice = timed_tiny.choice
    assert choice is not None and choice.mode == "timed"
    assert [c.name for c in choice.candidates] == CANDIDATES  # every family the full fusion made
    full = choice.candidate(FULL)
    assert full.fused_ops == TINY_FUSIONS == timed_tiny.fused_op_counts and full.path == timed_tiny.fused_path
    shapes = [f"{b}x{s}" for b, s in FusionConfig.quick().shapes]
    for fam in FAMILIES:
        c = choice.candidate(fam.candidate)
        assert c.validation is not None and c.validation.passed, c.validation
        assert c.left_out == fam.op and fam.op not in c.fused_ops and c.session_disabled == fam.session_off
        assert sum(c.op_counts.values()) == c.node_count and c.node_count > full.node_count  # fewer nodes fused together
        assert list(c.ratios) == shapes and [(s.batch, s.seq) for s in c.latency] == list(FusionConfig.quick().shapes)
        # a candidate not taken is deleted; the one taken lies beside the fully fused graph under its layout name
        assert (c.path is not None) == (c.name == choice.chosen)
    assert choice.chosen in CANDIDATES and choice.reason
    assert timed_tiny.chosen_path == choice.path and choice.path.is_file()
    assert timed_tiny.fused_path.name == layout.FUSED_GRAPH and timed_tiny.fused_path.is_file()
    if choice.chosen != FULL:
        assert choice.path.name == layout.fusion_candidate(choice.chosen)
    # the chooser agrees with the recorded figures
    assert pick_fusion({c.name: c.ratios for c in choice.candidates if c.name != FULL},
                  contended=bool(choice.load and choice.load.contended))[0] == choice.chosen


def test_fusion_json_records_the_choice(timed_tiny):
    folder = timed_tiny.fused_path.parent
    raw = json.loads((folder / layout.FUSION_FILE).read_text())["choice"]
    assert {"mode", "chosen", "path", "reason", "candidates", "margin", "load"} <= set(raw)
    assert raw["margin"] == FUSION_MARGIN and "\n" not in raw["reason"]
    for c in raw["candidates"]:
        assert {"name", "left_out", "path", "fused_ops", "op_counts", "node_count", "session_disabled", "validation",
                "latency", "speed"} <= set(c)
        for s in c["speed"]:
            assert s["base"] == FULL and {"value", "lo", "hi"} <= set(s["ratio"])
    assert load_fusion(folder).choice == timed_tiny.choice
    from workbench.graph import summary

    js = summary(timed_tiny)["choice"]
    assert js["chosen"] == timed_tiny.choice.chosen and [c["name"] for c in js["candidates"]] == CANDIDATES


def test_full_fusion_keeps_todays_graph_and_op_counts(exported_tiny, tmp_path):
    cfg = FusionConfig.inspect_only(variants=("transformer",), fusion="full")
    report = run_fusion(exported_tiny, cfg, tmp_path)
    assert report.choice.mode == "full" and report.choice.chosen == FULL and "--fusion full" in report.choice.reason
    assert [c.name for c in report.choice.candidates] == [FULL]
    assert report.chosen_path == report.fused_path == (tmp_path / layout.FUSED_GRAPH).resolve()
    assert report.fused_op_counts == TINY_FUSIONS
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == [layout.FUSED_GRAPH]
    assert not onnx.load(str(report.fused_path)).metadata_props  # asks nothing of its sessions
    from workbench.flow.handoffs import graph_to_quantize

    assert graph_to_quantize(fusion=report).path == report.fused_path


def test_later_stages_take_the_chosen_graph(timed_tiny, tmp_path):
    """A choice of a candidate: the quantization hand-off and graph_file take it; the fully fused graph stays."""
    from workbench.flow.handoffs import graph_to_quantize
    from workbench.graph.sources import graph_file

    taken = tmp_path / layout.fusion_candidate("no_skip_layer_norm")
    shutil.copy(timed_tiny.fused_path, taken)
    report = dataclasses.replace(timed_tiny, choice=FusionChoice("timed", "no_skip_layer_norm", taken, "given"))
    assert report.chosen_path == taken and report.fused_path != taken
    assert graph_to_quantize(fusion=report).path == taken and graph_file(report) == taken


def test_a_session_leaves_out_the_fusion_the_graph_asks_it_to(exported_tiny, tmp_path):
    """Without the graph's request, ONNX Runtime's session would fuse Add + LayerNormalization back into
    SkipLayerNormalization, and the candidate would time the full fusion again; an INT8 graph made from it
    keeps the request."""
    from onnxruntime.quantization import quantize_dynamic

    from workbench.graph.build import transformer_variant
    from workbench.graph.diagnose import attention_shape
    from workbench.runtime.graphmeta import disabled_optimizers, read_metadata
    from workbench.runtime.session import make_session

    fam = next(f for f in FAMILIES if f.candidate == "no_skip_layer_norm")
    path = tmp_path / layout.fusion_candidate(fam.candidate)
    heads, hidden = attention_shape(onnx.load(str(exported_tiny.onnx_path)))  # what the stage tells the optimizer
    transformer_variant(exported_tiny.onnx_path, path, FusionConfig(), heads, hidden, "bert", fam.options_off, fam.session_off)
    assert "Attention" in Counter(n.op_type for n in onnx.load(str(path)).graph.node)
    assert disabled_optimizers(path) == ("SkipLayerNormFusion",)
    assert read_metadata(path) == {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert disabled_optimizers(exported_tiny.onnx_path) == ()

    def ops_after_session(graph, **kw) -> Counter:
        out = tmp_path / f"opened_{len(list(tmp_path.iterdir()))}.onnx"
        make_session(graph, graph_optimization="all", optimized_model_path=out, **kw)
        return Counter(n.op_type for n in onnx.load(str(out)).graph.node)

    asked = ops_after_session(path)
    assert asked["SkipLayerNormalization"] == 0 and asked["LayerNormalization"] >= 4
    assert ops_after_session(path, disabled_optimizers=())["SkipLayerNormalization"] == 4  # what the request prevents
    int8 = tmp_path / "int8.onnx"
    quantize_dynamic(str(path), str(int8), extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    assert disabled_optimizers(int8) == ("SkipLayerNormFusion",)


def test_the_report_shows_the_chosen_graph_beside_the_full_fusion(timed_tiny):
    """summary.json's fusion section carries the choice, valid under its schema; the page shows the reason and
    each candidate's fused operators and node count beside the full fusion's."""
    from workbench.report import ReportInputs, render_html
    from workbench.report.schema import validate_summary
    from workbench.report.summary import build_summary

    summary = build_summary(ReportInputs(kind="workbench", fusion=timed_tiny))
    validate_summary(summary)
    ch = summary["fusion"]["choice"]
    assert ch["chosen"] == timed_tiny.choice.chosen and [c["name"] for c in ch["candidates"]] == CANDIDATES
    assert ch["candidates"][0]["fused_ops"] == TINY_FUSIONS
    page = render_html(summary)
    assert "Graph the later stages take (timed)" in page and f"{ch['chosen']} <b>(taken)</b>" in page
    for c in ch["candidates"]:
        assert f"<td>{c['name']}" in page or f">{c['name']}" in page
        assert f"<td>{c['node_count']}</td>" in page or f">{c['node_count']}<" in page
