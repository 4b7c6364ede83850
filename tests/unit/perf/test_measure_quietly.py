"""A timing the load check finds taken on a busy machine is taken again after the machine calms down, a bounded
number of times; only what is still busy after that is flagged, and each try is said. The load checks are scripted
here (a busy reading, then quiet ones), so nothing depends on this machine's load; no time is asserted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from workbench.perf import speed
from workbench.perf.machine_profile import LoadCheck


def _check(busy: bool) -> LoadCheck:
    return LoadCheck(contended=busy, reasons=["probe at 40% of the profile"] if busy else [], loadavg_1m=1.0,
                     probe_fp32_gops=10.0, probe_fraction=0.4 if busy else 1.0, at="now", cpus=2)


@pytest.fixture
def scripted(monkeypatch):
    """Load checks read from a script of True (busy) / False (quiet); the waits counted, not slept."""
    script: list[bool] = []
    waits: list[float] = []

    def check_load(profile, probe=True):
        return _check(script.pop(0))

    def wait_for_calm(profile, max_seconds, poll_s=1.0):
        waits.append(max_seconds)
        return _check(script.pop(0))

    monkeypatch.setattr(speed, "check_load", check_load)
    monkeypatch.setattr(speed, "wait_for_calm", wait_for_calm)
    return script, waits


def test_a_busy_reading_is_timed_again_once_the_machine_is_quiet(scripted):
    script, waits = scripted
    script += [False, True, False, False]  # before, after (busy): wait (quiet), after the second try (quiet)
    runs, notes = [], []
    result, load = speed.measure_quietly(lambda: runs.append(len(runs)) or len(runs), object(), notes, what="fp32 and int8",
                                         retimes=2, calm_wait_s=7)
    assert runs == [0, 1] and result == 2, "measured twice, the second figures kept"
    assert not load.contended and waits == [7] and script == []
    assert notes[0].startswith("fp32 and int8: try 1 taken while other work used the CPU (after: probe at 40% of the profile)")
    assert notes[-1].startswith("fp32 and int8: timed again (2 tries) after other work used the CPU")


def test_still_busy_after_every_try_is_flagged_and_said(scripted):
    script, waits = scripted
    script += [True] * 6  # before, after; wait, after; wait, after
    runs, notes = [], []
    _, load = speed.measure_quietly(lambda: runs.append(1), object(), notes, what="int8", retimes=2, calm_wait_s=3)
    assert len(runs) == 3 and waits == [3, 3] and load.contended
    assert notes[-1] == "int8: still taken under load after 3 tries; its speed is not stated as measured"


def test_a_quiet_machine_is_measured_once_and_no_retime_means_once(scripted):
    script, waits = scripted
    script += [False, False]
    runs, notes = [], []
    _, load = speed.measure_quietly(lambda: runs.append(1), object(), notes)
    assert runs == [1] and not load.contended and notes == [] and waits == []
    script += [True, True]
    _, load = speed.measure_quietly(lambda: runs.append(1), object(), notes, retimes=0)
    assert runs == [1, 1] and load.contended and waits == [] and notes == []  # one try: the figures flagged, nothing to say


def test_without_a_profile_nothing_is_checked():
    result, load = speed.measure_quietly(lambda: 5, None, [])
    assert result == 5 and load is None


def test_time_encoders_times_again_after_a_busy_reading(scripted, monkeypatch):
    """The embedding timings go through the same primitive: a busy first try is timed again, the run is not flagged."""
    from workbench.embed.encode import time_encoders

    script, waits = scripted
    script += [False, True, False, False]
    profile = SimpleNamespace(isa_text=lambda: "AVX2", key="test")
    monkeypatch.setattr("workbench.perf.machine_profile.machine_profile", lambda threads=None, **kw: profile)
    calls: list[str] = []
    fns = {1: {"base": lambda: calls.append("base"), "quick": lambda: calls.append("quick")}}
    run = time_encoders(fns, "base", 12, 1, rounds=3, repeats=1, warmup=0, floors=False, retimes=1, calm_wait_s=2)
    assert not run.contended and waits == [2] and script == []
    assert calls.count("base") == calls.count("quick") == 2 * 3, "every round taken twice: once busy, once quiet"
    assert any("timed again (2 tries)" in n for n in run.notes)


def test_the_verdict_names_only_the_variants_still_timed_under_load():
    """One variant still busy after its tries: its speed goes unstated, the others' stand, and the verdict says which."""
    from pathlib import Path

    from workbench.quant.budget import BudgetCheck
    from workbench.quant.search import SearchCandidate
    from workbench.report.verdict import build_verdict, under_load_words

    def candidate(name, precision, contended):
        return SearchCandidate(name, "fused", precision, None, Path("m.onnx"), None, 1.0, 1.0, 0.8, 0.0,
                               BudgetCheck(0.0, "", 0.0, True, True, [], 1, []), speedup=2.0, speedup_lo=1.9,
                               speedup_hi=2.1, contended=contended)

    found = [candidate("fused/fp32", "fp32", False), candidate("fused/dynamic", "int8", False),
             candidate("fused/static", "int8", True)]
    words = under_load_words(found[1:])
    assert words == (" The speed of fused/static was taken while other work used the CPU, even after timing again, so it is "
                     "not stated as measured; the other 1 variant was timed on a quiet machine: time again on a quiet machine.")
    assert under_load_words(found[1:2]) == ""
    search = SimpleNamespace(candidates=found, chosen="fused/dynamic", message="fused/dynamic: 2.00x", min_speedup=1.05)
    inp = SimpleNamespace(budget_overall=0.01, budget_per_slice=0.02, stages=[], include_small_slices=False)
    v = build_verdict(inp, search, {})
    assert v["status"] == "meets_budget" and v["chosen"] == "fused/dynamic" and v["text"].endswith(words)
    # with the search's own message (which names the busy variant too), the verdict still says it once
    from workbench.quant.search import SearchTerms, choice_message

    search.message = choice_message(found, found[1], SearchTerms.accuracy(0.01, 0.02), 1.05)
    text = build_verdict(inp, search, {})["text"]
    assert "fused/static was taken while other work used the CPU" in text and text.count("other work used the CPU") == 1
