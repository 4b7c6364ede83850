"""Training figures like for like: every speed ratio compares the backend alone (the baseline runs
every shared setting the contender runs), runs that take turns step by step really never overlap,
their ratios carry an interval, and the verdict says what was measured, where, and whether it pays."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.benchmarks import load_benchmark

from workbench.perf.machine_profile import LoadCheck
from workbench.train import (
    Backend,
    CompareConfig,
    NotLikeForLike,
    TrainConfig,
    compare,
    comparison_table,
    load_verdicts,
    require_like_for_like,
    run_comparison,
    save_verdicts,
    settings_text,
    shared_differences,
    training_verdict,
    verdicts_for,
)
from workbench.train.process import StdioGate

bench_train = load_benchmark("bench_train")


def test_shared_settings_are_everything_but_backend_knobs():
    base = TrainConfig.quick()
    assert shared_differences(base, base.replace(opset=17, ort_allow_spinning=True, memory_optimizer_level=1)) == ()
    assert shared_differences(base.replace(optimizer="adamw"), base) == ("optimizer",)
    assert set(shared_differences(base.replace(dropout=True, attn_implementation="sdpa"), base)) == {"dropout", "attn_implementation"}
    with pytest.raises(NotLikeForLike, match="optimizer adamw_fused vs adamw"):
        require_like_for_like(base, base.replace(optimizer="adamw"))
    require_like_for_like(base, base.replace(opset=17))  # backend knobs may differ
    assert settings_text(base) == "AdamW (fused), eager attention, dropout off, fp32, batch 16x64"


@pytest.mark.parametrize("variant", sorted(bench_train.VARIANTS))
def test_every_benchmark_variant_has_a_like_for_like_baseline(variant):
    """The benchmark's headline pairs each variant with an eager variant that shares every setting:
    the tuned ORTModule (fused AdamW) is never read against eager on foreach AdamW."""
    args = ("minilm", 16, 64, 12, None)
    base = bench_train.baseline_for(variant, *args)
    assert bench_train.VARIANTS[base][0] == "eager"
    assert shared_differences(bench_train.config_for(variant, *args), bench_train.config_for(base, *args)) == ()
    names = bench_train.with_baselines([variant], *args)
    assert base in names and "eager" in names and names.index(base) <= names.index(variant)


def test_tuned_ortmodule_is_read_against_fused_adamw_eager():
    args = ("minilm", 16, 64, 12, None)
    assert bench_train.baseline_for("ort-opset14-fused-no-spin", *args) == "eager-fused-adamw"
    assert bench_train.baseline_for("ort-dropout", *args) == "eager-dropout"
    assert bench_train.baseline_for("ortmodule", *args) == "eager"


def _rows(names, steps_ms, warmup=1):
    rows = []
    for name, ms in zip(names, steps_ms):
        cfg = bench_train.config_for(name, "tiny", 16, 64, len(ms), None)
        row = bench_train._row(name, cfg, 16, 64)
        row["step_s"] = [m / 1000 for m in ms]
        row["losses"] = [0.7] * len(ms)
        rows.append(row)
    return bench_train.add_ratios(rows, warmup, "tiny", None)


def test_bench_ratios_pair_each_backend_with_its_own_baseline():
    rows = {r["variant"]: r for r in _rows(
        ["eager", "eager-fused-adamw", "ort-opset14-fused-no-spin"],
        [[900, 440, 450, 445, 442], [900, 370, 372, 371, 369], [3000, 380, 378, 376, 379]])}
    tuned = rows["ort-opset14-fused-no-spin"]
    assert tuned["baseline"] == "eager-fused-adamw" and tuned["comparison"] == "backend"
    assert tuned["speed_vs_baseline"] == pytest.approx(0.98, abs=0.02)  # not the 1.17x against foreach eager
    lo, hi = tuned["interval"]
    assert lo <= tuned["speed_vs_baseline"] <= hi
    fused = rows["eager-fused-adamw"]
    assert fused["comparison"] == "pytorch setting" and fused["baseline"] == "eager" and fused["speed_vs_baseline"] > 1.15
    table = bench_train.table(list(rows.values()), [])
    headline = table.split("PyTorch settings")[0]
    assert "ort-opset14-fused-no-spin" in headline and "eager-fused-adamw" in headline
    assert "0.98x" in headline or "0.99x" in headline or "0.97x" in headline


def test_bench_refuses_a_headline_pair_that_is_not_like_for_like(monkeypatch):
    """Break the rule on purpose: a baseline lookup that returns eager on foreach AdamW for the tuned row."""
    monkeypatch.setattr(bench_train, "baseline_for", lambda name, *a: "eager")
    with pytest.raises(NotLikeForLike, match="optimizer"):
        _rows(["eager", "ort-opset14-fused-no-spin"], [[500, 440, 450, 445], [3000, 380, 378, 376]])


def _runs_in_turns(comparison, base_ms, other_ms, group="g1"):
    """The comparison's runs with step times replaced, as if they had taken turns in one lockstep group."""
    out = []
    for pid, run, ms in zip((101, 102), comparison.runs, (base_ms, other_ms)):
        steps = [dataclasses.replace(s, step_s=m / 1000) for s, m in zip(run.steps, ms)]
        out.append(dataclasses.replace(run, steps=steps, environment={**run.environment, "lockstep": group, "pid": str(pid)}))
    return out


@pytest.fixture(scope="module")
def comparison(tiny_comparison):
    return tiny_comparison[0]  # eager vs ORTModule, tiny model, 10 steps (conftest)


def test_runs_in_turns_get_an_interval_and_a_verdict(comparison):
    base = [900] + [400, 410, 405, 402, 399, 404, 401, 400, 403]
    other = [3000] + [408, 412, 410, 409, 407, 411, 410, 406, 412]
    c = compare(_runs_in_turns(comparison, base, other))
    r = c.ratio("ortmodule")
    assert r.interleaved and r.steady.lo <= r.throughput <= r.steady.hi and r.like_for_like
    assert r.baseline_settings == settings_text(comparison.runs[0].config)
    assert any("taking turns step by step" in n for n in c.notes)
    quiet = LoadCheck(contended=False, reasons=[], loadavg_1m=0.1, probe_fp32_gops=200.0, probe_fraction=0.97, at="t", cpus=2)
    v = training_verdict(c, "ortmodule", machine="AMD EPYC, AVX2 + FMA", load=quiet)
    assert v.outcome in ("loss", "no gain") and "of eager PyTorch with the same settings" in v.text
    assert v.text.startswith("Like for like (steps taken in turns): ORTModule trains at ")  # the headline says which figure
    assert f"{r.throughput:.2f}x ({r.steady.lo:.2f}-{r.steady.hi:.2f})" in v.text
    assert "AMD EPYC" in v.text and "no gain here" in v.text
    assert "GPUs" in v.where_it_pays and v.next_steps  # where it is reported to pay, labelled as theirs
    busy = dataclasses.replace(quiet, contended=True, reasons=["another process used a core"])
    assert training_verdict(c, "ortmodule", load=busy).outcome == "unmeasured"
    # clearly faster in every pair: a gain, with no pointers elsewhere
    fast = compare(_runs_in_turns(comparison, base, [3000] + [m / 2 for m in base[1:]]))
    g = training_verdict(fast, "ortmodule", load=quiet)
    assert g.outcome == "gain" and not g.where_it_pays and fast.ratio("ortmodule").steady.lo > 1.0


def test_runs_timed_apart_have_no_interval(comparison):
    c = compare(_runs_in_turns(comparison, [900] + [400] * 9, [3000] + [400] * 9, group=""))
    r = c.ratio("ortmodule")
    assert not r.interleaved and r.steady is None
    assert "without an interval" in training_verdict(c, "ortmodule").text


def test_a_figure_timed_one_after_the_other_is_labelled_and_never_a_gain(comparison):
    """Runs trained one after the other, ORTModule's steps at a fifth of eager's (the 4.60x kind of figure a tiny
    model gives): the headline says it is the one-after-the-other figure, not like for like, and judges nothing;
    the same steps taken in turns give the like-for-like headline and its judgement."""
    base, fast = [900] + [500] * 9, [3000] + [100] * 9
    apart = training_verdict(compare(_runs_in_turns(comparison, base, fast, group="")), "ortmodule", machine="AMD EPYC, AVX2")
    assert apart.text.startswith("One after the other, not like for like: ORTModule trained at 5.00x of eager PyTorch "
                                 "with the same settings (")
    assert "on this CPU (AMD EPYC, AVX2)" in apart.text and "Like for like" not in apart.text
    assert apart.outcome == "one after the other" and not apart.interleaved
    assert "not a verdict" in apart.text and "isolate" in apart.text and not apart.where_it_pays
    turns = training_verdict(compare(_runs_in_turns(comparison, base, fast)), "ortmodule")
    assert turns.text.startswith("Like for like (steps taken in turns): ORTModule trains at 5.00x (")
    assert turns.outcome == "gain" and turns.interleaved and "One after the other" not in turns.text


def test_a_shared_setting_difference_is_no_verdict(comparison):
    eager, ort = comparison.runs
    other = dataclasses.replace(ort, config=ort.config.replace(optimizer="adamw"))
    c = compare([eager, other])
    r = c.ratio("ortmodule")
    assert not r.like_for_like and r.differs_in == ["optimizer"]
    assert any("not like for like" in n for n in c.notes)
    assert "NOT like for like" in comparison_table(c)
    assert training_verdict(c, "ortmodule").outcome == "not like for like"


def test_verdicts_round_trip(comparison, tmp_path):
    vs = verdicts_for(comparison)
    save_verdicts(vs, tmp_path)
    again = load_verdicts(tmp_path)
    assert again == vs
    assert again.get("ortmodule").text == vs.verdicts[0].text and again.get("compile") is None
    assert load_verdicts(tmp_path / "nowhere") is None


def test_stdio_gate_asks_waits_and_gives_back():
    import io

    out = io.StringIO()
    gate = StdioGate(stdin=io.StringIO("go\ngo\n"), stdout=out)
    gate.next("setup")
    gate.next("step 1")
    gate.next("step 2")  # stdin ended: from now on it runs freely
    gate.next("finish")
    gate.release()
    assert out.getvalue().splitlines() == [
        "WORKBENCH_GATE ready setup", "WORKBENCH_GATE done", "WORKBENCH_GATE ready step 1", "WORKBENCH_GATE done",
        "WORKBENCH_GATE ready step 2"]


@pytest.mark.slow
@pytest.mark.heavy  # two training processes of the tiny model taking turns: 60-100 s on 2 cores
def test_lockstep_runs_never_overlap(tmp_path):
    """Two backends, each in its own process, taking turns: no step of one runs while a step of the
    other runs, both record the same lockstep group, and the comparison pairs their steps."""
    cfg = TrainConfig.quick(max_steps=5, eval_every=0)
    c = run_comparison(cfg, CompareConfig(backends=("eager", "ortmodule"), isolate=True), tmp_path)
    eager, ort = c.run("eager"), c.run("ortmodule")
    assert eager.environment["lockstep"] and eager.environment["lockstep"] == ort.environment["lockstep"]
    assert eager.environment["pid"] != ort.environment["pid"] and ort.executed_in_onnxruntime
    spans = sorted((s.at, s.at + s.step_s, run.backend) for run in (eager, ort) for s in run.steps)
    assert len(spans) == 10
    for (a0, a1, ab), (b0, b1, bb) in zip(spans, spans[1:]):
        assert a1 <= b0 + 1e-3, f"{ab} step overlapped {bb}"
    # turns alternate: each backend's step i comes before either's step i + 1
    order = [b for _, _, b in spans]
    assert all(set(order[i:i + 2]) == {Backend.EAGER, Backend.ORTMODULE} for i in range(0, 10, 2))
    r = c.ratio("ortmodule")
    assert r.interleaved and r.steady.lo <= r.throughput <= r.steady.hi
    assert c.loss_parity


def test_a_stop_is_seen_while_a_fast_child_keeps_its_queue_full():
    """Tiny steps keep a child's gate events coming; the scheduler must still see the stop at once."""
    import queue
    import threading

    from workbench.train.lockstep import _Child

    child = object.__new__(_Child)  # the queue alone: no process behind it
    child.events = queue.Queue()
    for _ in range(100):
        child.events.put("ready")
    stop = threading.Event()
    assert child.wait_for(stop) == "ready"
    stop.set()
    assert child.wait_for(stop) == "stop" and child.events.qsize() == 99
