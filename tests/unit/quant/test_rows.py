"""One row per quantized variant (workbench/quant/rows.py): the figures the CLI, the report and the
panel show come from it, so they agree."""

from __future__ import annotations

import dataclasses

from workbench.quant import load_quant_result, variant_row
from workbench.quant.rows import SUMMARY_KEYS


def test_the_row_reads_the_result_once(quant_tiny_dynamic) -> None:
    r = quant_tiny_dynamic
    row = variant_row(r)
    assert (row.name, row.mode, row.graph_kind) == (r.name, "dynamic", r.graph_kind)
    assert row.floor_ms == r.latency[0].floor_ms and row.of_floor == r.of_floor
    assert row.fp32_floor_ms == r.fp32_latency[0].floor_ms and row.contended is r.contended
    assert row.speedup == r.speedup and row.speedup_ci == (r.speed[0].ratio.lo, r.speed[0].ratio.hi)
    assert row.max_slice_drop == r.report.max_slice_drop() and row.n_flips == len(r.report.flips)
    assert row.nodes_kept_fp32 == len(r.excluded_nodes)
    assert row.worst_slice is None or row.max_slice_drop > 0


def test_a_saved_result_gives_the_same_row(quant_tiny_dynamic) -> None:
    saved = load_quant_result(quant_tiny_dynamic.out_dir)
    assert variant_row(saved) == variant_row(quant_tiny_dynamic)  # JSON keeps every float exactly


def test_busy_machine_and_intervals(quant_tiny_dynamic) -> None:
    r = quant_tiny_dynamic
    busy = dataclasses.replace(r, load=dataclasses.replace(r.load, contended=True, reasons=["another process spins"]))
    assert variant_row(busy).contended is True
    quiet = dataclasses.replace(r, load=dataclasses.replace(r.load, contended=False, reasons=[]))
    assert variant_row(quiet).contended is False
    old = dataclasses.replace(r, speed=[])  # saved before interleaved timing: no interval
    assert variant_row(old).speedup_ci is None and variant_row(old).speedup_is_gain is None
    d = variant_row(r).as_dict(SUMMARY_KEYS)
    assert list(d) == list(SUMMARY_KEYS) and isinstance(d["speedup_ci"], list)
