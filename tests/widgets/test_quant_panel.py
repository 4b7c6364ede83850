"""QuantPanel without a browser: dynamic INT8 of the fused tiny graph, per-slice drift and flips,
re-quantization without the worst nodes, the constrained search, errors, saved results."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import workbench.sessions.quant as quant_module  # the session runs the stage
from widgets import PanelInputError, QuantPanel
from workbench.quant import Flip, FlipKind
from workbench.plots import quant as quant_plots
from workbench.quant import QuantResult, SearchResult, worst_nodes


@pytest.fixture(scope="module")
def quant_panel(tmp_path_factory, fused_tiny, exported_tiny, quick_data) -> QuantPanel:
    panel = QuantPanel(graph=fused_tiny, export=exported_tiny, data=quick_data, n_boot=100, worst_k=2,
                       run_dir=tmp_path_factory.mktemp("quant-panel"))
    panel.run()
    return panel


# Tests must pass in any order (pytest-randomly): the tests reading ``quant_panel`` do not change
# its result; re-quantizing and searching happen on panels of their own.
@pytest.fixture(scope="module")
def searched(tmp_path_factory, quant_panel: QuantPanel, fused_tiny, exported_tiny, quick_data) -> QuantPanel:
    """A panel showing ``quant_panel``'s result, then searched within a budget (FP32 + two presets)."""
    panel = QuantPanel(graph=fused_tiny, export=exported_tiny, data=quick_data, n_boot=100,
                       run_dir=tmp_path_factory.mktemp("quant-search"))
    panel.show(quant_panel.result)
    panel.set_values(candidates=("dynamic", "dynamic-per-channel"), budget_overall=0.05, budget_per_slice=0.1)
    panel.run_search()
    return panel


def _flip(i: int, text: str, kind: FlipKind = FlipKind.BROKEN) -> Flip:
    return Flip(index=i, text=text, slices=["test:all"], label=1, reference_pred=1, reference_confidence=0.9,
                candidate_pred=0, candidate_confidence=0.6 - i / 10, kind=kind, label_name="fresh",
                reference_pred_name="fresh", candidate_pred_name="rotten")


def test_result_is_the_quantization_of_the_fused_graph(quant_panel: QuantPanel, fused_tiny) -> None:
    r = quant_panel.result
    assert isinstance(r, QuantResult)
    assert Path(r.source_path) == Path(fused_tiny.fused_path)
    assert r.report.n_boot == 100
    assert quant_panel.results == {r.name: r}
    assert (Path(r.out_dir) / "quantize.json").is_file()
    assert Path(r.out_dir).parent.name == "quantize"


def test_drift_figure_and_tables_come_from_the_result(quant_panel: QuantPanel) -> None:
    r = quant_panel.result
    quant_panel.controls["figure"].value = "slice drift"
    expected = quant_plots.drift_bars(r)
    got = quant_panel.figure.data
    assert [t.type for t in got] == [t.type for t in expected.data]
    assert list(got[0].y) == list(expected.data[0].y), "one bar per slice, in the library's order"
    # independent of the figure code: the first bar is the whole set's accuracy change in points,
    # the others each slice's own change, the worst (most negative) first among the non-empty slices
    rep = r.report
    bars = dict(zip(got[0].y, got[0].x))
    right = lambda pred: sum(p == y for p, y in zip(pred, rep.labels)) / len(rep.labels)  # noqa: E731
    assert got[0].x[0] == pytest.approx(100 * (right(rep.candidate_pred) - right(rep.reference_pred)))
    for d in rep.slices:
        if d.n:
            name = next(n for n in bars if n.startswith(f"{d.slice} (n={d.n}"))
            assert bars[name] == pytest.approx(100 * (d.candidate.accuracy - d.reference.accuracy))
    nonempty = [x for x, n in zip(got[0].x[1:], got[0].y[1:]) if "(n=0" not in n]
    assert nonempty == sorted(nonempty)
    table = quant_panel.results_html.value
    assert r.name in table and table.count("<tr>") == 2
    assert f"{len(r.report.flips)} flips" in quant_panel.status.value


def test_flips_table_lists_the_flips(quant_panel: QuantPanel) -> None:
    """Both cases set up by hand: a result with two flips, and the same result with none."""
    r = quant_panel.result
    two = [_flip(0, "a flat, lifeless film"), _flip(1, "not bad at all", FlipKind.FIXED)]
    panel = QuantPanel(n_boot=100)
    panel.show(dataclasses.replace(r, report=dataclasses.replace(r.report, flips=two)))
    flips = panel.flips_html.value
    assert "2 flipped prediction(s)" in flips and flips.count("<tr>") == 3  # header + 2
    assert "a flat, lifeless film" in flips and "not bad at all" in flips
    # 'not bad at all' lost 0.4 of confidence (0.9 -> 0.5), 'a flat, lifeless film' 0.3 (0.9 -> 0.6)
    assert flips.index("not bad at all") < flips.index("a flat, lifeless film"), "largest confidence loss first"
    panel.show(dataclasses.replace(r, report=dataclasses.replace(r.report, flips=[])))
    assert "no prediction changed label" in panel.flips_html.value and "<tr>" not in panel.flips_html.value


def test_other_figures_and_the_golden_set(quant_panel: QuantPanel) -> None:
    r = quant_panel.result
    for name, builder in (("confidence", quant_plots.confidence_scatter), ("thresholds", quant_plots.threshold_curves),
                          ("node errors", quant_plots.node_errors)):
        quant_panel.controls["figure"].value = name
        expected = builder(r)
        assert [(t.type, t.name) for t in quant_panel.figure.data] == [(t.type, t.name) for t in expected.data]
    assert r.golden is not None
    quant_panel.controls["figure"].value = "slice drift"
    quant_panel.controls["golden"].value = True
    assert list(quant_panel.figure.data[0].y) == list(quant_plots.drift_bars(r, golden=True).data[0].y)
    quant_panel.controls["golden"].value = False


def test_golden_checkbox_switches_the_flips_to_the_golden_set(quant_panel: QuantPanel) -> None:
    r = quant_panel.result
    assert r.golden is not None
    golden_flip = _flip(0, "the golden edge case that flipped")
    panel = QuantPanel(n_boot=100)
    panel.show(dataclasses.replace(r, report=dataclasses.replace(r.report, flips=[]),
                                   golden=dataclasses.replace(r.golden, flips=[golden_flip])))
    assert "no prediction changed label on the test set" in panel.flips_html.value
    panel.controls["golden"].value = True
    assert "1 flipped prediction(s)</b> on the golden set" in panel.flips_html.value
    assert "the golden edge case that flipped" in panel.flips_html.value
    panel.controls["golden"].value = False
    assert "the golden edge case that flipped" not in panel.flips_html.value


def test_search_figure_before_any_search_says_what_to_do(quant_panel: QuantPanel) -> None:
    panel = QuantPanel(saved=quant_panel.result.out_dir)  # a result, no search
    assert panel.search is None
    panel.controls["figure"].value = "search trade-off"
    assert len(panel.figure.data) == 0
    assert "press Search within budget" in panel.figure.layout.title.text
    panel.controls["figure"].value = "slice drift"
    assert len(panel.figure.data) >= 1


def test_requantize_leaves_the_worst_nodes_in_fp32(quant_panel: QuantPanel) -> None:
    first = quant_panel.result
    panel = QuantPanel(saved=first.out_dir, n_boot=100, worst_k=2)
    again = panel.requantize()
    assert again is panel.result and again.name != first.name
    assert again.excluded_nodes == worst_nodes(first.node_errors, 2)
    assert set(panel.results) == {first.name, again.name}
    assert panel.results_html.value.count("<tr>") == 3


def test_search_within_budget(searched: QuantPanel, quant_panel: QuantPanel) -> None:
    search = searched.search
    assert isinstance(search, SearchResult)
    assert searched.result is quant_panel.result, "the search does not replace the quantization shown"
    assert len(search.candidates) == 3  # FP32 + two presets
    assert search.message in searched.search_html.value.replace("&#x27;", "'")
    assert searched.search_html.value.count("<tr>") == 1 + len(search.candidates)
    assert searched.controls["figure"].value == "search trade-off"
    expected = quant_plots.tradeoff(search)
    assert [t.name for t in searched.figure.data] == [t.name for t in expected.data]


def test_empty_search_candidates_are_refused_in_the_panel(fused_tiny, exported_tiny, quick_data, tmp_path: Path) -> None:
    panel = QuantPanel(graph=fused_tiny, export=exported_tiny, data=quick_data, n_boot=100, run_dir=tmp_path)
    panel.set_values(candidates=())
    with pytest.raises(PanelInputError, match="search candidates is empty"):
        panel.run_search()
    assert "select at least one preset" in panel.error_box.value
    assert not list(tmp_path.iterdir()), "nothing was written"


def test_blocked_until_a_graph_exists(fused_tiny, exported_tiny, quick_data, tmp_path: Path) -> None:
    panel = QuantPanel(n_boot=100, run_dir=tmp_path)
    assert panel.run_button.disabled and panel.requantize_button.disabled and panel.search_button.disabled
    assert "an FP32 graph" in panel.notice.value
    panel.set_graph(fused_tiny, export=exported_tiny, data=quick_data)
    assert not panel.run_button.disabled and panel.notice.value == ""
    assert isinstance(panel.run(), QuantResult)


def test_library_errors_are_shown_and_the_panel_recovers(fused_tiny, quick_data, tmp_path: Path) -> None:
    panel = QuantPanel(graph=tmp_path / "nothing.onnx", data=quick_data, n_boot=100, run_dir=tmp_path)
    with pytest.raises(ValueError):
        panel.run()
    assert "nothing.onnx" in panel.error_box.value and "export one first" in panel.error_box.value
    with pytest.raises(PanelInputError, match="nothing to re-quantize yet"):
        panel.requantize()
    panel.set_graph(fused_tiny)  # the export is found through the report
    assert isinstance(panel.run(), QuantResult) and panel.error is None


def test_bad_options_are_refused() -> None:
    with pytest.raises(PanelInputError, match="preset must be one of"):
        QuantPanel(preset="int4")
    with pytest.raises(PanelInputError, match="candidates must be one of"):
        QuantPanel(candidates=("dynamic", "fp8"))
    with pytest.raises(TypeError, match="did you mean 'n_boot'"):
        QuantPanel(nboot=10)


def test_opens_saved_results_without_recomputing(quant_tiny_dynamic, searched: QuantPanel, monkeypatch) -> None:
    def no(*a, **k):
        raise AssertionError("opening saved results must not quantize")

    monkeypatch.setattr(quant_module, "run_quantization", no)
    monkeypatch.setattr(quant_module, "run_search", no)
    panel = QuantPanel(saved=quant_tiny_dynamic.out_dir, saved_search=searched.search.out_dir)
    assert panel.result.name == quant_tiny_dynamic.name
    assert panel.result.report.overall.delta == quant_tiny_dynamic.report.overall.delta
    assert panel.search.chosen == searched.search.chosen
    assert not panel.run_button.disabled, "a saved result names its FP32 graph: the panel can quantize it again"


def test_out_of_range_numbers_are_refused_not_clamped() -> None:
    with pytest.raises(PanelInputError, match="n_boot must be a number from 100 to 100000, got 50; a 95% interval"):
        QuantPanel(n_boot=50)
    with pytest.raises(PanelInputError, match="budget_overall .* got 2"):
        QuantPanel(budget_overall=2)


def test_timing_device_is_checked_and_cuda_without_cuda_is_one_clear_error(fused_tiny, quick_data, tmp_path: Path) -> None:
    import html as html_module

    from workbench.runtime.device import cuda_facts, cuda_problem

    with pytest.raises(PanelInputError, match="device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"):
        QuantPanel(device="gpu")
    panel = QuantPanel(graph=fused_tiny, data=quick_data, n_boot=100, run_dir=tmp_path, device="cuda")
    assert panel.controls["device"].options == ("cpu", "cuda") and panel._timing(panel.values()).device == "cuda"
    why = cuda_problem(cuda_facts())
    if why is None:
        pytest.skip("CUDA is available here: the missing-CUDA error cannot be shown")
    with pytest.raises(ValueError):
        panel.run()
    assert html_module.escape(why) in panel.error_box.value
    assert not any(tmp_path.rglob("*.onnx"))  # refused before quantizing anything


def test_results_table_shows_the_interval_the_floor_and_a_busy_machine(quant_tiny_dynamic) -> None:
    """The panel's table carries the speed-up's interval over the paired rounds and the share
    of this CPU's floor; a result timed under load says so instead of showing a speed-up as fact."""
    import dataclasses

    from widgets.quant import results_table

    quiet = dataclasses.replace(quant_tiny_dynamic.load, contended=False, reasons=[])
    r = dataclasses.replace(quant_tiny_dynamic, load=quiet)  # as if timed on a quiet machine
    lo, hi = r.speed[0].ratio.lo, r.speed[0].ratio.hi
    html = results_table([r])
    assert f"({lo:.2f}-{hi:.2f})" in html and "floor" in html
    assert f"{100 * r.latency[0].floor_ms / r.latency[0].median_ms:.0f}%" in html
    busy = dataclasses.replace(r, load=dataclasses.replace(r.load, contended=True, reasons=["another process spins"]))
    shown = results_table([busy])
    assert "timed under load" in shown and "not a measured fact" in shown and f"({lo:.2f}-{hi:.2f})" not in shown


def test_ship_writes_the_searchs_choice_into_chosen(searched: QuantPanel) -> None:
    """The Ship button: the search's choice, its tokenizer, labels, settings and predict.py into chosen/ of the
    search's run folder; predict.py (imported here) gives the labels that choice gave when it was scored."""
    import importlib.util
    import json

    search = searched.search
    shipped = searched.ship()
    run = Path(search.out_dir).parent
    assert shipped.out_dir == run / "chosen" and searched.session.shipped is shipped
    settings = json.loads((run / "chosen" / "settings.json").read_text())
    best = search.best
    assert settings["variant"] == best.name and settings["precision"] == best.precision
    assert (run / "chosen" / "model.onnx").read_bytes() == Path(best.onnx_path).read_bytes()
    assert Path(settings["unfused_export"]).name == "model.onnx" and "Shipped" in searched.ship_html.value
    from workbench.quant import load_baseline, load_quant_result

    first = next(c for c in search.candidates if c.precision == "int8")
    base = load_baseline(load_quant_result(first.result_path).baseline_path)
    texts = [r["text"] for r in base.eval_sets[0].load_examples()]
    if best.precision == "int8":
        want = load_quant_result(best.result_path).report.candidate_pred
    else:
        want = base.eval_sets[0].fp32_logits().argmax(-1).tolist()
    names = json.loads((run / "chosen" / "labels.json").read_text())
    spec = importlib.util.spec_from_file_location("panel_shipped_predict", run / "chosen" / "predict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [r["label"] for r in module.predict(texts)] == [names[i] for i in want]


def test_ship_before_a_search_says_what_to_do(quant_panel: QuantPanel) -> None:
    panel = QuantPanel(saved=quant_panel.result.out_dir)  # a result, no search
    with pytest.raises(Exception, match="nothing chosen yet: press Search within budget first"):
        panel.ship()
