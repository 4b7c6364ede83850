"""The notebooks' exercise checks (workbench.teaching.exercises): for each, a right answer passes, a wrong one
gets a hint that does not contain the answer, and an unattempted one (or one whose step has not
run) says "not yet" without raising. The right answers come from real results (tiny model)."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.teaching import exercises as ex


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
        return dataclasses.replace(d, deltas=deltas)

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


def _profile(flags: dict, fp32: float, int8: float):
    """A machine profile built here (nothing measured): what the exercise's goal is read from."""
    from workbench.perf.machine_profile import MachineProfile

    return MachineProfile(cpu_model="test CPU", flags={k: flags.get(k, False) for k in
                                                       ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx", "bf16")},
                          cores=2, threads=2, ort_version="1.19.2", fp32_gops=fp32, int8_gops=int8, qdq_int8_gops=int8,
                          measured_at="2026-11-24T00:00:00+00:00", shapes=[[128, 384, 384]])


AVX2 = _profile({"avx2": True}, fp32=176.0, int8=317.0)  # docs/benchmarks' AVX2-only Zen 3: INT8 GEMM 1.8x FP32
VNNI = _profile({"avx2": True, "avx512f": True, "avx512_vnni": True, "avx_vnni": True}, fp32=490.0, int8=1122.0)  # 2.29x


def test_the_speed_goal_comes_from_the_machine_profile() -> None:
    assert ex.exercise_speed_target(AVX2) == pytest.approx(1.27, abs=0.01)
    assert ex.exercise_speed_target(VNNI) == pytest.approx(1.43, abs=0.01)
    slow_int8 = _profile({"avx2": True}, fp32=100.0, int8=105.0)  # INT8 barely faster: the goal stays reachable
    assert ex.exercise_speed_target(slow_int8) == 1.05


def _timed(r, speedup: float, lo: float | None = None):
    """``r`` as if timed side by side at ``speedup`` (interval lower end ``lo``) over FP32, on a quiet machine."""
    from workbench.core.latency import Ratio

    lo = speedup * 0.97 if lo is None else lo
    speed = [dataclasses.replace(s, ratio=Ratio(speedup, lo, speedup * 1.03, 20)) for s in r.speed]
    return dataclasses.replace(r, speed=speed, load=dataclasses.replace(r.load, contended=False, reasons=[]))


@pytest.mark.parametrize("profile", [AVX2, VNNI], ids=["avx2", "vnni"])
def test_preset_within_budget(quant_tiny_dynamic, quant_tiny_static, profile) -> None:
    dynamic = dataclasses.replace(quant_tiny_dynamic, name="dynamic")
    other = quant_tiny_static
    results = {"dynamic": dynamic, other.name: other}
    goal = ex.exercise_speed_target(profile)
    # the verdict on the real static result follows the two rules, whatever they say for the tiny model
    meets = (max(other.report.max_slice_drop(), -other.accuracy_delta) <= 0.01 and other.speedup_ratio.lo >= goal
             and not other.contended)
    v = ex.check_preset_within_budget(other.name, results, profile=profile)
    assert v.status == (ex.CORRECT if meets else ex.NOT_QUITE), str(v)

    # every slice held and clearly faster than this CPU's goal: passes; just under the goal, or losing 2 points, does not
    good = dataclasses.replace(_timed(dynamic, goal + 0.2), name="kept-nodes")
    good = dataclasses.replace(good, report=_with_deltas(good.report, lambda d: 0.0))  # no slice moved
    assert good.accuracy_delta == 0.0
    _ok(ex.check_preset_within_budget("kept-nodes", {**results, "kept-nodes": good}, profile=profile))
    _ok(ex.check_preset_within_budget(" kept-nodes ", [good], profile=profile))
    # the median is past the goal but the interval's lower end is not: not yet beyond doubt
    unsure = _timed(good, goal + 0.05, lo=goal - 0.05)
    v = ex.check_preset_within_budget("kept-nodes", {"kept-nodes": unsure}, profile=profile)
    _wrong(v)
    assert f"the goal is at least {goal:.2f}x" in v.message and "drops" not in v.message
    assert ("no VNNI" in v.message) == (profile is AVX2)
    hurt = dataclasses.replace(good, report=_with_deltas(good.report, lambda d: -0.02 if d.slice.startswith("class:") else 0.0))
    v = ex.check_preset_within_budget("kept-nodes", {"kept-nodes": hurt}, profile=profile)
    _wrong(v)
    assert "drops by 2.0 points" in v.message and "as fast" not in v.message
    busy = dataclasses.replace(good, load=dataclasses.replace(good.load, contended=True, reasons=["load"]))
    assert "quiet machine" in ex.check_preset_within_budget("kept-nodes", {"kept-nodes": busy}, profile=profile).message
    _not_yet(ex.check_preset_within_budget("static-entropy", results, profile=profile))  # not run yet
    _not_yet(ex.check_preset_within_budget(None, results, profile=profile))


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


def test_most_ndcg_kept() -> None:
    from types import SimpleNamespace

    def variant(name, ratio):
        return SimpleNamespace(name=name, retrieval=SimpleNamespace(ndcg_ratio=ratio))

    result = SimpleNamespace(evaluation=SimpleNamespace(variants=[variant("dynamic", 0.954), variant("dynamic-per-channel", 1.0),
                                                                  SimpleNamespace(name="unscored", retrieval=None)]))
    assert ex.check_most_ndcg_kept(None, result).status == ex.NOT_YET
    assert ex.check_most_ndcg_kept("dynamic", None).status == ex.NOT_YET
    assert ex.check_most_ndcg_kept("dynamic-per-channel", result).correct
    wrong = ex.check_most_ndcg_kept("dynamic", result)
    assert wrong.status == ex.NOT_QUITE and "share of FP32" in wrong.message
    assert "must be one of" in ex.check_most_ndcg_kept("unscored", result).message
