"""workbench.plots.quant: figure structure read from fig.data / fig.layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.quant import EvalConfig, evaluate_slices
from workbench.plots import quant as qp
from workbench.quant import SearchCandidate, SearchResult, check_budget
from workbench.data.slices import SliceSet, predicate_slice


def make_report(n: int = 200):
    """Slice 'bad' (first 60): 9 broken; slice 'good' (60-119): 6 fixed; slice 'small' (5): 1 broken."""
    rng = np.random.default_rng(0)
    labels = np.zeros(n, dtype=int)
    ref = np.tile([0.9, 0.1], (n, 1))
    ref[60:66] = [0.3, 0.7]  # reference wrong here; candidate fixes them
    cand = ref.copy()
    cand[:9] = [0.4, 0.6]
    cand[60:66] = [0.8, 0.2]
    cand[195] = [0.45, 0.55]
    cand[120:195, 0] = np.clip(0.9 + rng.normal(0, 0.02, 75), 0.5, 1.0)
    cand[120:195, 1] = 1 - cand[120:195, 0]
    ex = [{"text": f"example {i}", "i": i} for i in range(n)]
    ss = SliceSet("t", (predicate_slice("good", lambda e: 60 <= e["i"] < 120), predicate_slice("bad", lambda e: e["i"] < 60),
                        predicate_slice("small", lambda e: e["i"] >= 195)))
    return evaluate_slices(ex, labels, ref, cand, ss, EvalConfig(n_boot=300), class_names=["rotten", "fresh"])


@pytest.fixture(scope="module")
def report():
    return make_report()


def test_drift_bars_sorted_worst_first_with_intervals(report):
    fig = qp.drift_bars(report)
    bar = fig.data[0]
    labels = list(bar.y)
    assert labels[0].startswith("all (n=200")
    assert [label.split(" ")[0] for label in labels[1:]] == ["small", "bad", "good"]  # -20, -15, +10 points
    assert bar.x[2] == pytest.approx(-15.0) and bar.x[3] == pytest.approx(10.0)
    bad = report.drift("bad")
    assert bar.error_x.array[2] == pytest.approx(100 * (bad.ci_high - bad.delta))
    assert bar.error_x.arrayminus[2] == pytest.approx(100 * (bad.delta - bad.ci_low))
    colors = list(bar.marker.color)
    assert colors[2] == qp.WORSE and colors[3] == qp.BETTER  # both significant at n=60
    assert colors[1] == qp.SMALL and "too small" in labels[1]
    assert fig.layout.yaxis.autorange == "reversed"
    assert "paired bootstrap" in fig.layout.title.text


def test_drift_bars_other_metric_and_errors(report):
    fig = qp.drift_bars(report, metric="ece", include_overall=False, max_slices=2)
    assert len(fig.data[0].y) == 2 and "lower is better" in fig.layout.xaxis.title.text
    with pytest.raises(ValueError, match="metric must be one of"):
        qp.drift_bars(report, metric="f2")
    with pytest.raises(TypeError, match="SliceReport or a QuantResult"):
        qp.drift_bars({"not": "a report"})


def test_confidence_scatter_colours_flips_by_kind(report):
    fig = qp.confidence_scatter(report)
    by_name = {t.name.split(" (")[0]: t for t in fig.data}
    assert len(by_name["flip: broken"].x) == 10 and len(by_name["flip: fixed"].x) == 6
    assert len(by_name["same prediction"].x) == 200 - 16
    broken = by_name["flip: broken"]
    i = broken.customdata[0]
    assert broken.x[0] == pytest.approx(report.reference_confidence[i])
    assert broken.y[0] == pytest.approx(report.candidate_confidence[i])
    assert broken.marker.color == qp.FLIP_COLORS["broken"]
    assert "example 0" in broken.hovertext[0]
    assert "16 flips of 200" in fig.layout.title.text


def test_threshold_curves(report):
    fig = qp.threshold_curves(report)
    names = [t.name for t in fig.data]
    assert "fp32 coverage" in names and "int8 accuracy on accepted" in names and "decisions changed" in names
    cov = next(t for t in fig.data if t.name == "fp32 coverage")
    assert list(cov.x) == [p.threshold for p in report.thresholds]
    assert cov.y[0] == pytest.approx(100 * report.thresholds[0].reference_coverage)


def _search(report) -> SearchResult:
    ok = check_budget([make_report()], budget_overall=0.1, budget_per_slice=0.2)
    bad = check_budget([make_report()], budget_overall=0.1, budget_per_slice=0.05)
    cands = [
        SearchCandidate("g/fp32", "g", "fp32", None, Path("a"), None, 20.0, 80.0, 0.97, 0.0, ok),
        SearchCandidate("g/dyn", "g", "int8", None, Path("b"), None, 8.0, 25.0, 0.95, -0.02, ok),
        SearchCandidate("g/static", "g", "int8", None, Path("c"), None, 6.0, 40.0, 0.90, -0.07, bad),
    ]
    return SearchResult(cands, "g/dyn", 0.1, 0.05, "latency", False, False, Path("."), "g/dyn")


def test_tradeoff_marks_feasible_and_chosen(report):
    s = _search(report)
    fig = qp.tradeoff(s)
    traces = {t.name: t for t in fig.data}
    assert list(traces["int8 within budget"].x) == [8.0]
    assert list(traces["int8 over budget"].x) == [6.0] and traces["int8 over budget"].marker.color == "white"
    ring = traces["chosen: g/dyn"]
    assert (ring.x[0], ring.y[0]) == (8.0, pytest.approx(95.0))
    assert fig.layout.shapes[0].y0 == pytest.approx(100 * (0.97 - 0.1))
    size = qp.tradeoff(s, x="size")
    assert list({t.name: t for t in size.data}["int8 within budget"].x) == [25.0]
    with pytest.raises(ValueError, match="'latency' or 'size'"):
        qp.tradeoff(s, x="power")


def test_node_errors_worst_first(quant_tiny_dynamic):
    fig = qp.node_errors(quant_tiny_dynamic, top=5)
    weight, act, out = fig.data
    assert len(weight.y) == 5
    ranked = sorted((e for e in quant_tiny_dynamic.node_errors), key=lambda e: e.local_sqnr_db)[:5]
    assert list(weight.y) == [e.node for e in ranked]
    assert out.x[0] == pytest.approx(ranked[0].output_sqnr_db)
    assert fig.layout.barmode == "group"
    with pytest.raises(ValueError, match="no per-node errors"):
        qp.node_errors([])


def test_golden_report_from_quant_result(quant_tiny_dynamic):
    fig = qp.drift_bars(quant_tiny_dynamic, golden=True)
    assert "golden" in fig.layout.title.text
    assert fig.data[0].y[0].startswith("all (n=24")
