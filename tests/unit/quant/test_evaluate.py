"""workbench.quant.evaluate: per-slice metrics, paired bootstrap drift, flips and thresholds.

The fixed set below is small enough to compute every metric by hand; the expected numbers in
the tests are those hand computations (shown in the comments), not outputs of the code.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from workbench.core import serial
from workbench.quant import (
    EvalConfig,
    EvaluationError,
    FlipKind,
    SliceReport,
    Preds,
    weighted_metrics,
    evaluate_slices,
    slice_metrics,
    softmax,
    sort_flips,
)
from workbench.data.slices import SliceSet, predicate_slice

# 8 examples, 2 classes. p1 = probability of class 1.
LABELS = [0, 0, 0, 1, 1, 1, 1, 0]
REF_P1 = [0.15, 0.35, 0.82, 0.91, 0.62, 0.44, 0.97, 0.23]
# reference: pred [0,0,1,1,1,0,1,0]  conf [.85,.65,.82,.91,.62,.56,.97,.77]  correct [1,1,0,1,1,0,1,1]
CAND_P1 = [0.15, 0.58, 0.82, 0.47, 0.62, 0.71, 0.97, 0.23]
# candidate: pred [0,1,1,0,1,1,1,0]  conf [.85,.58,.82,.53,.62,.71,.97,.77]  correct [1,0,0,0,1,1,1,1]
TEXTS = [f"review number {i}" + (" , not good" if i in (1, 5) else "") for i in range(8)]


def probs(p1):
    p1 = np.asarray(p1, dtype=float)
    return np.stack([1 - p1, p1], axis=1)


def examples():
    return [{"text": t, "id": i} for i, t in enumerate(TEXTS)]


def odd_slices() -> SliceSet:
    return SliceSet(
        "test",
        (
            predicate_slice("odd", lambda e: e["id"] % 2 == 1, "odd ids"),
            predicate_slice("first_two", lambda e: e["id"] < 2, "ids 0 and 1"),
            predicate_slice("nobody", lambda e: False, "empty on purpose"),
        ),
    )


@pytest.fixture(scope="module")
def report() -> SliceReport:
    return evaluate_slices(
        examples(), LABELS, probs(REF_P1), probs(CAND_P1), odd_slices(), EvalConfig(n_boot=400, seed=0, thresholds=(0.5, 0.8, 0.99)),
        class_names=["rotten", "fresh"],
    )


def test_overall_metrics_match_hand_computation(report):
    ref, cand = report.overall.reference, report.overall.candidate
    assert ref.n == cand.n == 8
    assert ref.accuracy == pytest.approx(6 / 8)
    assert cand.accuracy == pytest.approx(5 / 8)
    # reference: F1(class 0) = 2*3/(2*3+1+1) = .75, F1(class 1) = 2*3/(2*3+1+1) = .75
    assert ref.macro_f1 == pytest.approx(0.75)
    # candidate: F1(0) = 2*2/(2*2+1+2) = 4/7, F1(1) = 2*3/(2*3+2+1) = 2/3
    assert cand.macro_f1 == pytest.approx((4 / 7 + 2 / 3) / 2)
    assert ref.mean_confidence == pytest.approx(6.15 / 8)
    assert cand.mean_confidence == pytest.approx(5.85 / 8)
    # ECE, bins (b/10, (b+1)/10]: reference gaps .56 + .73 + .23 + .67 + .12 = 2.31
    assert ref.ece == pytest.approx(2.31 / 8)
    # candidate gaps 1.11 + .38 + .52 + .67 + .03 = 2.71
    assert cand.ece == pytest.approx(2.71 / 8)
    assert ref.agreement == 1.0
    assert cand.agreement == pytest.approx(5 / 8)
    d = report.overall.deltas
    assert d["accuracy"].delta == pytest.approx(-1 / 8)
    assert d["ece"].delta == pytest.approx(0.4 / 8)
    assert d["ece"].worse and d["accuracy"].worse and not d["ece"].higher_is_better


def test_slice_metrics_and_drift(report):
    odd = report.drift("odd")  # ids 1,3,5,7: labels [0,1,1,0]; ref pred [0,1,0,0]; cand pred [1,0,1,0]
    assert odd.n == 4
    assert odd.reference.accuracy == pytest.approx(3 / 4)
    assert odd.candidate.accuracy == pytest.approx(2 / 4)
    assert odd.delta == pytest.approx(-0.25)
    assert odd.flips == 3
    assert odd.description == "odd ids" and odd.group == "user"
    first = report.drift("first_two")  # ids 0,1: labels [0,0]; ref [0,0]; cand [0,1]
    assert first.reference.accuracy == 1.0 and first.candidate.accuracy == 0.5
    # reference predicts only class 0 -> macro-F1 over {0} = 1; candidate: F1(0) = 2/3, F1(1) = 0
    assert first.reference.macro_f1 == pytest.approx(1.0)
    assert first.candidate.macro_f1 == pytest.approx((2 / 3 + 0) / 2)


def test_small_and_empty_slices_are_marked_not_hidden(report):
    assert [d.slice for d in report.slices] == ["odd", "first_two", "nobody"]
    assert all(d.too_small for d in report.slices)  # default minimum is 50 examples
    empty = report.drift("nobody")
    assert empty.n == 0 and math.isnan(empty.reference.accuracy) and not empty.significant
    big_enough = evaluate_slices(examples(), LABELS, probs(REF_P1), probs(CAND_P1), odd_slices(), EvalConfig(n_boot=200, min_slice_size=4))
    assert [d.too_small for d in big_enough.slices] == [False, True, True]


def test_flips_listed_exactly(report):
    got = [(f.index, f.kind, f.label, f.reference_pred, f.candidate_pred) for f in report.flips]
    assert got == [
        (1, FlipKind.BROKEN, 0, 0, 1),
        (3, FlipKind.BROKEN, 1, 1, 0),
        (5, FlipKind.FIXED, 1, 0, 1),
    ]
    f1 = report.flips[0]
    assert f1.text == TEXTS[1]
    assert f1.slices == ["odd", "first_two"]
    assert f1.reference_confidence == pytest.approx(0.65) and f1.candidate_confidence == pytest.approx(0.58)
    assert (f1.label_name, f1.reference_pred_name, f1.candidate_pred_name) == ("rotten", "rotten", "fresh")
    # sortable: biggest confidence drop first is index 3 (.91 -> .53)
    assert [f.index for f in sort_flips(report.flips, "confidence_change")] == [3, 1, 5]
    assert [f.index for f in report.sorted_flips("candidate_confidence", descending=True)] == [5, 1, 3]
    with pytest.raises(EvaluationError, match="sorted by one of"):
        sort_flips(report.flips, "colour")


def test_threshold_analysis(report):
    t = {p.threshold: p for p in report.thresholds}
    # at 0.8 the reference accepts ids 0,2,3,6 (3 right), the candidate ids 0,2,6 (2 right)
    p = t[0.8]
    assert p.reference_coverage == pytest.approx(4 / 8) and p.reference_accuracy == pytest.approx(3 / 4)
    assert p.candidate_coverage == pytest.approx(3 / 8) and p.candidate_accuracy == pytest.approx(2 / 3)
    assert (p.decisions_changed, p.newly_rejected, p.newly_accepted, p.accepted_flips) == (1, 1, 0, 0)
    # at 0.5 everything is accepted, so accuracy is plain accuracy and every flip gets through
    assert t[0.5].reference_coverage == 1.0 and t[0.5].accepted_flips == 3
    assert math.isnan(t[0.99].reference_accuracy) and t[0.99].reference_coverage == 0.0


def test_bootstrap_deterministic_under_seed():
    rng = np.random.default_rng(1)
    n = 120
    labels = rng.integers(0, 2, n)
    ref = softmax(rng.normal(size=(n, 2)) + 2.0 * np.eye(2)[labels])
    cand = softmax(np.log(ref) + rng.normal(scale=0.6, size=(n, 2)))
    ex = [{"text": f"t{i}"} for i in range(n)]
    a = evaluate_slices(ex, labels, ref, cand, None, EvalConfig(n_boot=300, seed=7))
    b = evaluate_slices(ex, labels, ref, cand, None, EvalConfig(n_boot=300, seed=7))
    c = evaluate_slices(ex, labels, ref, cand, None, EvalConfig(n_boot=300, seed=8))
    keys = [(m.ci_low, m.ci_high) for m in a.overall.deltas.values()]
    assert keys == [(m.ci_low, m.ci_high) for m in b.overall.deltas.values()]
    assert keys != [(m.ci_low, m.ci_high) for m in c.overall.deltas.values()]
    assert a.overall.flips > 0
    for m in a.overall.deltas.values():
        assert m.ci_low <= m.delta <= m.ci_high, m


def test_the_bootstrap_draws_exactly_n_boot_replicates_in_chunks():
    """Replicates are drawn in chunks of 250: the last chunk is cut to what is left, and a chunk's draws do not
    depend on how many chunks follow."""
    from workbench.quant.bootstrap import bootstrap_deltas, make_preds

    rng = np.random.default_rng(2)
    n = 30
    labels = rng.integers(0, 2, n)
    ref, cand = make_preds(labels, softmax(rng.normal(size=(n, 2))), 10), make_preds(labels, softmax(rng.normal(size=(n, 2))), 10)
    agree = (ref.pred == cand.pred).astype(float)
    drawn = {n_boot: bootstrap_deltas(ref, cand, agree, n_boot, np.random.default_rng(0)) for n_boot in (100, 250, 260, 501)}
    assert all(len(v) == n_boot for n_boot, d in drawn.items() for v in d.values())
    assert np.array_equal(drawn[260]["accuracy"][:250], drawn[250]["accuracy"])


def test_slice_interval_does_not_move_when_other_slices_are_added():
    n = 60
    ex = [{"text": f"t{i}", "id": i} for i in range(n)]
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, n)
    ref, cand = softmax(rng.normal(size=(n, 2))), softmax(rng.normal(size=(n, 2)))
    s1 = SliceSet("a", (predicate_slice("even", lambda e: e["id"] % 2 == 0),))
    s2 = s1.extend([predicate_slice("low", lambda e: e["id"] < 20)])
    r1 = evaluate_slices(ex, labels, ref, cand, s1, EvalConfig(n_boot=200, seed=0))
    r2 = evaluate_slices(ex, labels, ref, cand, s2, EvalConfig(n_boot=200, seed=0))
    assert r1.drift("even").ci_low == r2.drift("even").ci_low
    assert r1.drift("even").ci_high == r2.drift("even").ci_high


def test_weighted_kernel_equals_metrics_on_the_resampled_examples():
    """The bootstrap's weighted formulas give exactly what recomputing on the drawn examples gives."""
    rng = np.random.default_rng(5)
    n, k = 40, 3
    labels = rng.integers(0, k, n)
    p = softmax(rng.normal(size=(n, k)) * 2)
    pred = p.argmax(1)
    for _ in range(5):
        counts = rng.multinomial(n, np.full(n, 1 / n))
        idx = np.repeat(np.arange(n), counts)
        want = slice_metrics("x", labels[idx], p[idx])
        got = weighted_metrics(counts[None, :].astype(float), Preds(labels, pred, p.max(1), k, 10), np.ones(n))
        for name in ("accuracy", "macro_f1", "mean_confidence", "ece"):
            assert got[name][0] == pytest.approx(getattr(want, name)), name


def test_significance_flag_follows_the_interval():
    n = 200
    labels = np.zeros(n, dtype=int)
    ref = probs(np.full(n, 0.1))  # all right
    many = np.full(n, 0.1)
    many[:30] = 0.9  # 30 broken flips: a clear drop
    one = np.full(n, 0.1)
    one[0] = 0.9  # one flip: the interval touches zero
    ex = [{"text": "x"}] * n
    bad = evaluate_slices(ex, labels, ref, probs(many), None, EvalConfig(n_boot=500))
    assert bad.overall.significant and bad.overall.ci_high < 0
    assert bad.significant_drops()[0].slice == "all"
    tiny_change = evaluate_slices(ex, labels, ref, probs(one), None, EvalConfig(n_boot=500))
    assert not tiny_change.overall.significant and tiny_change.overall.ci_high == 0.0
    same = evaluate_slices(ex, labels, ref, ref, None, EvalConfig(n_boot=200))
    assert (same.overall.ci_low, same.overall.ci_high, same.overall.significant) == (0.0, 0.0, False)
    assert same.flips == []


def test_round_trip_through_serial_and_json(report):
    data = json.loads(json.dumps(serial.to_dict(report), allow_nan=False))
    back = serial.from_dict(SliceReport, data)
    assert back.flips == report.flips
    assert back.overall == report.overall
    assert back.thresholds[1] == report.thresholds[1]
    assert back.drift("odd") == report.drift("odd")
    assert math.isnan(back.drift("nobody").reference.accuracy)  # NaN -> null -> NaN
    assert isinstance(back.flips[0].kind, FlipKind)


def test_worst_slices_sorted_worst_first(report):
    order = [d.slice for d in report.worst_slices("accuracy")]
    assert order == ["first_two", "odd", "nobody"]  # -0.5, -0.25, empty last
    assert report.max_slice_drop(include_small=True) == pytest.approx(0.5)
    assert report.max_slice_drop(include_small=False) == 0.0  # every slice here is too small
    with pytest.raises(EvaluationError, match="metric must be one of"):
        report.worst_slices("speed")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(reference_probs=probs(REF_P1)[:5]), "must have shape"),
        (dict(candidate_probs=np.log(probs(CAND_P1))), "softmax"),
        (dict(labels=[0, 1, 2, 0, 0, 0, 0, 0]), r"class ids in \[0, 1\]"),
        (dict(labels=[0, 1]), "8 examples but 2 labels"),
        (dict(n_boot=10), "n_boot must be at least 100"),
        (dict(class_names=["a", "b", "c"]), "3 names but the models score 2"),
    ],
)
def test_bad_inputs_say_what_to_do(kwargs, match):
    args = dict(examples=examples(), labels=LABELS, reference_probs=probs(REF_P1), candidate_probs=probs(CAND_P1))
    args.update(kwargs)
    with pytest.raises(EvaluationError, match=match):
        if "n_boot" in args:  # a knob of the EvalConfig: refused when the config is built
            args["config"] = EvalConfig(n_boot=args.pop("n_boot"))
        evaluate_slices(**args)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(confidence_level=1.0), "confidence_level must be between 0.5 and 1"),
        (dict(min_slice_size=0), "min_slice_size must be at least 1"),
        (dict(n_bins=0), "n_bins must be at least 1"),
        (dict(thresholds=(0.5, 1.5)), r"thresholds are confidences in \[0, 1\], got \[1.5\]"),
        (dict(thresholds="0.5"), "thresholds are a list of confidences"),
    ],
)
def test_eval_config_refuses_bad_knobs(kwargs, match):
    with pytest.raises(EvaluationError, match=match):
        EvalConfig(**kwargs)


def test_eval_config_is_frozen_and_the_report_records_it():
    cfg = EvalConfig(n_boot=200, seed=3, confidence_level=0.9, min_slice_size=4, n_bins=5, thresholds=[0.6])
    with pytest.raises(Exception):
        cfg.n_boot = 300  # frozen
    assert cfg.thresholds == (0.6,)
    rep = evaluate_slices(examples(), LABELS, probs(REF_P1), probs(CAND_P1), odd_slices(), cfg)
    assert (rep.n_boot, rep.seed, rep.confidence_level, rep.min_slice_size, rep.n_bins) == (200, 3, 0.9, 4, 5)
    assert [t.threshold for t in rep.thresholds] == [0.6]
    with pytest.raises(EvaluationError, match="config must be an EvalConfig"):
        evaluate_slices(examples(), LABELS, probs(REF_P1), probs(CAND_P1), None, 300)


def test_nan_probabilities_rejected():
    bad = probs(CAND_P1)
    bad[2] = np.nan
    with pytest.raises(EvaluationError, match="non-finite"):
        evaluate_slices(examples(), LABELS, probs(REF_P1), bad)


def test_calibration_bins_edge_goes_to_lower_bin():
    # confidence exactly 0.7 (0.7 * 10 = 7.000000000000001 in floating point) belongs to (0.6, 0.7]
    m = slice_metrics("x", [0, 0], probs([0.3, 0.25]))  # conf .7 and .75, both right
    # bins: .7 -> (0.6,0.7], .75 -> (0.7,0.8]: gaps |1-.7| + |1-.75| = .55 (same as one bin would give)
    assert m.ece == pytest.approx(0.55 / 2)
    m2 = slice_metrics("x", [0, 1], probs([0.3, 0.25]))  # second wrong
    # separate bins: |1 - .7| + |0 - .75| = 1.05; if both were in one bin: |1 - 1.45| = .45
    assert m2.ece == pytest.approx(1.05 / 2)
