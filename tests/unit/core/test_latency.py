"""workbench.core.latency.measure: how many runs a time budget allows (no timing asserted, only counts)."""

from __future__ import annotations

from workbench.core.latency import measure


def test_a_spent_budget_still_runs_the_minimum_and_no_more():
    calls = []
    stats = measure(lambda: calls.append(1), warmup=2, repeats=50, max_seconds=0.0)
    assert len(stats.samples_ms) == 3 and len(calls) == 2 + 3  # the default minimum, after the warm-up
    stats = measure(lambda: None, warmup=0, repeats=50, max_seconds=0.0, min_repeats=5)
    assert len(stats.samples_ms) == 5  # the load probe's minimum
    assert len(measure(lambda: None, warmup=0, repeats=4, max_seconds=None).samples_ms) == 4
