"""workbench.plots.report: the report's slice-drift overview, read from fig.data / fig.layout."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from test_quant_plots import make_report
from workbench.quant import EvalConfig, evaluate_slices
from workbench.plots.report import slice_drift_overview
from workbench.data.slices import SliceSet, predicate_slice


def _variant(name: str, report):
    return SimpleNamespace(name=name, report=report)  # slice_drift_overview reads .name and .report


def test_one_point_per_variant_per_slice_with_intervals_and_the_budget_line():
    a = make_report()
    # a second variant that breaks nothing on 'bad' but 12 of 'good': the worst slice differs per variant
    n = 200
    labels = np.zeros(n, dtype=int)
    ref = np.tile([0.9, 0.1], (n, 1))
    ref[60:66] = [0.3, 0.7]
    cand = ref.copy()
    cand[66:78] = [0.4, 0.6]
    ex = [{"text": f"example {i}", "i": i} for i in range(n)]
    ss = SliceSet("t", (predicate_slice("good", lambda e: 60 <= e["i"] < 120), predicate_slice("bad", lambda e: e["i"] < 60),
                        predicate_slice("small", lambda e: e["i"] >= 195)))
    b = evaluate_slices(ex, labels, ref, cand, ss, EvalConfig(n_boot=300), class_names=["rotten", "fresh"])
    fig = slice_drift_overview([_variant("dyn", a), _variant("stat", b)], budget_per_slice=0.02)
    assert [t.name for t in fig.data] == ["dyn", "stat"] and fig.layout.scattermode == "group"
    assert all(t.type == "scatter" and t.mode == "markers" for t in fig.data)
    y = [label.split(" ")[0] for label in fig.data[0].y]
    # the whole set first, then judged slices worst-first under any variant, small slices last
    assert y == ["all", "good", "bad", "small"], y
    assert list(fig.data[0].y) == list(fig.data[1].y) and "too small" in fig.data[0].y[-1]
    for trace, rep in ((fig.data[0], a), (fig.data[1], b)):
        for i, name in enumerate(["all", "good", "bad", "small"]):
            d = rep.drift(name) if name != "all" else rep.overall
            assert trace.x[i] == pytest.approx(100 * d.delta)
            assert trace.error_x.array[i] == pytest.approx(100 * (d.ci_high - d.delta))
            assert trace.error_x.arrayminus[i] == pytest.approx(100 * (d.delta - d.ci_low))
    assert fig.data[1].x[1] == pytest.approx(-20.0) and fig.data[0].x[2] == pytest.approx(-15.0)
    budget = [s for s in fig.layout.shapes if s.line.dash == "dash"]
    assert len(budget) == 1 and budget[0].x0 == pytest.approx(-2.0)
    assert "paired bootstrap" in fig.layout.title.text and "300 replicates" in fig.layout.title.text


def test_no_results_is_a_clear_error():
    with pytest.raises(ValueError, match="quantize with at least one preset"):
        slice_drift_overview([])


def test_no_change_anywhere_still_shows_its_points_inside_the_axis():
    """A variant that changed no prediction: every change and interval is 0; the points sit at 0, and the
    axis reaches past 0 and past the budget line, so neither is drawn on the plot's edge."""
    n = 100
    labels = np.zeros(n, dtype=int)
    ref = np.tile([0.9, 0.1], (n, 1))
    ex = [{"text": f"example {i}", "i": i} for i in range(n)]
    ss = SliceSet("t", (predicate_slice("first", lambda e: e["i"] < 50),))
    same = evaluate_slices(ex, labels, ref, ref.copy(), ss, EvalConfig(n_boot=100), class_names=["rotten", "fresh"])
    fig = slice_drift_overview([_variant("int8", same)], budget_per_slice=0.02)
    assert list(fig.data[0].x) == [0.0, 0.0] and fig.data[0].mode == "markers"
    lo, hi = fig.layout.xaxis.range
    assert lo < -2.0 and hi > 0.0 and hi - 0.0 >= 0.5
    everything = [v for t in fig.data for v in t.x]
    assert lo < min(everything) and max(everything) < hi
