"""The notebooks' exercise checks (workbench.exercises): for each, a right answer passes, a wrong one
gets a hint that does not contain the answer, and an unattempted one (or one whose step has not
run) says "not yet" without raising. The right answers come from real results (tiny model)."""

from __future__ import annotations

import dataclasses

import pytest

from workbench import exercises as ex


def _ok(v: ex.Verdict) -> None:
    assert v.status == ex.CORRECT and v.correct and bool(v), str(v)


def _wrong(v: ex.Verdict, *secret: str) -> None:
    assert v.status == ex.NOT_QUITE and not v, str(v)
    for s in secret:
        assert s not in v.message, f"the hint gives the answer away ({s!r}): {v}"


def _with_deltas(report, delta_of):
    """``report`` with every slice's accuracy change (and the overall one) set by ``delta_of(slice)``."""
    def fix(d):
        value = delta_of(d)
        deltas = {k: dataclasses.replace(m, delta=value) if k == "accuracy" else m for k, m in d.deltas.items()}
        return dataclasses.replace(d, delta=value, deltas=deltas)

    return dataclasses.replace(report, slices=[fix(d) for d in report.slices], overall=fix(report.overall))


def _not_yet(v: ex.Verdict) -> None:
    assert v.status == ex.NOT_YET and not v and "not yet" in str(v), str(v)


def test_size_ratio(quant_tiny_dynamic) -> None:
    truth = quant_tiny_dynamic.fp32_size_mib / quant_tiny_dynamic.size_mib
    _ok(ex.check_size_ratio(round(truth, 1), quant_tiny_dynamic))
    _wrong(ex.check_size_ratio(truth * 2, quant_tiny_dynamic), f"{truth:.1f}", f"{truth:.2f}")
    assert "too high" in ex.check_size_ratio(truth * 2, quant_tiny_dynamic).message
    _wrong(ex.check_size_ratio("four", quant_tiny_dynamic))
    _not_yet(ex.check_size_ratio(None, quant_tiny_dynamic))
    _not_yet(ex.check_size_ratio(3.0, None))


def test_startup_in_steps(tiny_comparison) -> None:
    run = tiny_comparison[0].run("ortmodule")
    truth = run.startup_s / run.median_step_s
    _ok(ex.check_startup_in_steps(truth * 1.1, run))
    _wrong(ex.check_startup_in_steps(truth / 3, run), f"{truth:.0f}", f"{truth:.1f}")
    _not_yet(ex.check_startup_in_steps(None, run))
    _not_yet(ex.check_startup_in_steps(5, None))


def test_fastest_backend(tiny_comparison) -> None:
    comparison = tiny_comparison[0]
    ranked = sorted((r for r in comparison.runs if r.ok), key=lambda r: r.samples_per_s, reverse=True)
    _ok(ex.check_fastest_backend(ranked[0].backend.value, comparison))
    _ok(ex.check_fastest_backend(ranked[0].backend.value.upper() + " ", comparison))
    _wrong(ex.check_fastest_backend(ranked[-1].backend.value, comparison))
    _wrong(ex.check_fastest_backend("tensorflow", comparison))
    _not_yet(ex.check_fastest_backend(None, comparison))
    _not_yet(ex.check_fastest_backend("eager", None))


def test_fusions_per_layer(fused_tiny) -> None:
    counts, layers = fused_tiny.fused_op_counts, fused_tiny.num_layers
    right = {op: counts.get(op, 0) / layers for op in ex.FUSED_PER_LAYER_OPS}
    assert right == {"Attention": 1, "SkipLayerNormalization": 2, "BiasGelu": 1}  # what a BERT layer holds
    _ok(ex.check_fusions_per_layer(right, fused_tiny))
    whole_model = {op: counts.get(op, 0) for op in ex.FUSED_PER_LAYER_OPS}  # forgot to divide by the layers
    v = ex.check_fusions_per_layer(whole_model, fused_tiny)
    _wrong(v)
    assert "3 of 3" in v.message
    _wrong(ex.check_fusions_per_layer({"Attention": 1}, fused_tiny))
    _wrong(ex.check_fusions_per_layer(6, fused_tiny))
    _not_yet(ex.check_fusions_per_layer(None, fused_tiny))
    _not_yet(ex.check_fusions_per_layer(right, None))


def test_preset_within_budget(quant_tiny_dynamic, quant_tiny_static) -> None:
    dynamic = dataclasses.replace(quant_tiny_dynamic, name="dynamic")
    other = quant_tiny_static
    results = {"dynamic": dynamic, other.name: other}
    # the verdict on the real static result follows the two rules, whatever they say for the tiny model
    meets = max(other.report.max_slice_drop(), -other.accuracy_delta) <= 0.01 and other.speedup >= 1.25
    v = ex.check_preset_within_budget(other.name, results)
    assert v.status == (ex.CORRECT if meets else ex.NOT_QUITE), str(v)

    def timed(r, ms):
        return dataclasses.replace(r, latency=[dataclasses.replace(s, stats=dataclasses.replace(s.stats, median_ms=ms))
                                               for s in r.latency])

    fp32_ms = dynamic.fp32_latency_ms
    # every slice held and twice as fast as FP32: passes; the same at FP32's speed, or losing 2 points, does not
    good = dataclasses.replace(timed(dynamic, fp32_ms / 2), name="kept-nodes")
    good = dataclasses.replace(good, report=_with_deltas(good.report, lambda d: 0.0))  # no slice moved
    assert good.speedup == pytest.approx(2.0) and good.accuracy_delta == 0.0
    _ok(ex.check_preset_within_budget("kept-nodes", {**results, "kept-nodes": good}))
    _ok(ex.check_preset_within_budget(" kept-nodes ", [good]))
    slow = timed(good, fp32_ms)
    v = ex.check_preset_within_budget("kept-nodes", {**results, "kept-nodes": slow})
    _wrong(v)
    assert "1.00x as fast as FP32" in v.message and "drops" not in v.message
    hurt = dataclasses.replace(good, report=_with_deltas(good.report, lambda d: -0.02 if d.slice.startswith("class:") else 0.0))
    v = ex.check_preset_within_budget("kept-nodes", {"kept-nodes": hurt})
    _wrong(v)
    assert "drops by 2.0 points" in v.message and "as fast" not in v.message
    _not_yet(ex.check_preset_within_budget("static-entropy", results))  # not run yet
    _not_yet(ex.check_preset_within_budget(None, results))


def test_most_hurt_class(quant_tiny_dynamic) -> None:
    names = [d.slice.split(":", 1)[1] for d in quant_tiny_dynamic.report.slices if d.slice.startswith("class:")]
    assert len(names) == 2
    worst, best = names
    # the tiny model's drops are noise: give the first class a clear drop, so right and wrong are known
    report = _with_deltas(quant_tiny_dynamic.report, lambda d: -0.05 if d.slice == f"class:{worst}" else 0.0)
    result = dataclasses.replace(quant_tiny_dynamic, report=report)
    _ok(ex.check_most_hurt_class(worst, result))
    _ok(ex.check_most_hurt_class(f"class:{worst}", result))
    _wrong(ex.check_most_hurt_class(best, result), worst)
    _wrong(ex.check_most_hurt_class("neutral", result))
    _not_yet(ex.check_most_hurt_class(None, result))
    _not_yet(ex.check_most_hurt_class(worst, None))


@pytest.mark.parametrize("check", [ex.check_size_ratio, ex.check_startup_in_steps, ex.check_fastest_backend,
                                   ex.check_fusions_per_layer, ex.check_most_hurt_class])
def test_nothing_run_nothing_answered_is_not_yet(check) -> None:
    _not_yet(check(None, None))
