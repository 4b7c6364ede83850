"""`make bench`'s benchmark (benchmarks/bench.py) in --quick mode on the tiny model: the JSON has
every row it promises, each measured or carrying a reason, every ratio paired with its interval,
the floor of each variant from the machine profile, and the busy-machine check. No timing is
asserted (timings belong to the benchmark's table, not to tests)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark

from workbench.core.latency import paired_ratio
from workbench.perf.machine_profile import default_threads

ROOT = Path(__file__).resolve().parents[3]
bench = load_benchmark("bench")

INFERENCE_ROWS = {"torch-eager-fp32", "torch-sdpa-fp32", "torch-bf16", "torch-compile", "torch-dynamic-int8",
                  "ort-exported-fp32", "ort-fused-fp32", "ort-fused-int8-dynamic", "ort-fused-int8-dynamic-per-channel",
                  "ort-fused-int8-dynamic-fp32-embeddings",
                  "ort-fused-int8-dynamic-reduce-range", "ort-exported-int8-static-minmax", "ort-exported-int8-static-best",
                  "ort-fused-int4-weight-only", "ort-fused-int4-weight-only-acc4"}  # weight-only
TRAIN_ROWS = {"eager", "compile", "ortmodule", "ort-opset14-fused-no-spin",
              "eager-fused-adamw"}  # the last: the tuned row's like-for-like baseline


@pytest.fixture(scope="module")
def quick_json(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench.py"), "--quick", "--out", str(out),
                           "--work", str(out.parent / "work")], cwd=out.parent, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "== inference" in proc.stdout and "== the floor" in proc.stdout and "== training" in proc.stdout
    return json.loads(out.read_text())


@pytest.mark.slow  # a long run: every variant, training included (2-3 min on an idle 2-core machine)
@pytest.mark.heavy
@pytest.mark.timeout(1800)
def test_quick_bench_has_every_row_measured_or_explained(quick_json):
    r = quick_json
    assert r["schema_version"] == bench.SCHEMA_VERSION and r["quick"] is True
    m = r["machine"]
    assert m["cpu_model"] and m["logical_cpus"] >= 1 and len(m["load_avg_start"]) == 3 and len(m["load_avg_end"]) == 3
    assert set(bench.RECORDED_FLAGS) == set(m["flags"]) and {"avx512_vnni", "amx_bf16", "avx512_bf16"} <= set(m["flags"])
    assert r["threads"] == default_threads() and r["settings"]["shapes"] == [bench.key(s) for s in bench.QUICK_SHAPES]
    rows = {row["name"]: row for row in r["inference"]}
    assert set(rows) == INFERENCE_ROWS
    for name, row in rows.items():
        assert set(row["shapes"]) == set(r["settings"]["shapes"]), name
        for shape, cell in row["shapes"].items():
            if cell["available"]:
                assert cell["runs"] == r["settings"]["rounds"] * r["settings"]["repeats"], (name, shape)
                assert 0 < cell["p10_ms"] <= cell["median_ms"] <= cell["p90_ms"] and cell["iqr_ms"] >= 0, (name, shape)
                assert cell["load_avg"] >= 0
                ratio = cell["ratio_vs_eager"]  # paired rounds, with its bootstrap interval
                assert ratio["rounds"] == r["settings"]["rounds"] == len(cell["round_ms"]), (name, shape)
                # the speed-up is the median of the per-round ratios eager / variant, from the rounds in the JSON
                per_round = [e / v for e, v in zip(rows["torch-eager-fp32"]["shapes"][shape]["round_ms"], cell["round_ms"])]
                assert cell["speedup_vs_eager"] == ratio["value"] == pytest.approx(statistics.median(per_round)), (name, shape)
                assert ratio["lo"] <= ratio["value"] <= ratio["hi"] and ratio["is_gain"] == (ratio["lo"] > 1.0)
                if name.startswith("ort-") or name in ("torch-eager-fp32", "torch-dynamic-int8"):
                    assert cell["floor_ms"] > 0 and cell["of_floor"] == pytest.approx(cell["floor_ms"] / cell["median_ms"])
            else:
                assert cell["reason"], (name, shape)
        if not row["available"]:
            assert row["reason"], name
    # bf16 is measured exactly when the CPU has bf16 instructions, else it says why not
    has_bf16 = m["flags"]["avx512_bf16"] or m["flags"]["amx_bf16"]
    assert rows["torch-bf16"]["available"] == has_bf16
    if not has_bf16:
        assert "no bf16 instructions" in rows["torch-bf16"]["reason"]
    # the rows every machine can run are measured (torch.compile included: the set-up installs its compiler)
    for name in INFERENCE_ROWS - {"torch-bf16"}:
        assert rows[name]["available"], (name, rows[name]["reason"])
    for name in ("ort-fused-int8-dynamic", "ort-exported-int8-static-best"):
        acc = rows[name]["accuracy"]
        assert acc["n"] > 0 and 0 <= acc["accuracy"] <= 1 and isinstance(acc["within_budget"], bool)
    assert r["onnx"]["fused_ops"], "the fused graph has fused operators"
    # the busy-machine check ran before and after, and its verdict is in the JSON
    lc = r["load_check"]
    assert isinstance(r["contended"], bool) and lc["contended"] == r["contended"]
    assert lc["before"]["at"] and lc["after"]["at"] and (lc["reasons"] != []) == r["contended"]


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.timeout(1800)
def test_quick_bench_floor_and_training(quick_json):
    from workbench.models.load import TINY_CONFIG
    from helpers.macs import config_macs

    prof, fl = quick_json["machine_profile"], quick_json["floor"]
    assert prof["fp32_gops"] > 0 and prof["int8_gops"] > 0 and prof["isa"]
    assert set(fl) == set(quick_json["settings"]["shapes"])
    for k, e in fl.items():
        b, s = (int(x) for x in k.split("x"))
        assert e["total_macs"] == config_macs(TINY_CONFIG["hidden_size"], TINY_CONFIG["intermediate_size"],
                                              TINY_CONFIG["num_hidden_layers"], b, s)
        assert e["work"]["ort-fused-int8-dynamic"]["int8_macs"] > 0
        assert e["work"]["ort-fused-fp32"]["int8_macs"] == 0
        assert e["floor_ms"]["ort-fused-int8-dynamic"] < e["floor_ms"]["ort-fused-fp32"]
        assert e["best_ort"] in e["of_floor"]
        # the floor at the shape's own row count is never below the one at each kernel's best figure
        assert e["peak_floor_ms"] and all(e["peak_floor_ms"][n] <= f * (1 + 1e-9) for n, f in e["floor_ms"].items()
                                          if n in e["peak_floor_ms"])
        if e["best_of_floor"] < 0.9:  # far from its floor: the profiler says which ops take the time
            assert e["ops"] and sum(o["share"] for o in e["ops"]) == pytest.approx(1.0)
    train = {row["variant"]: row for row in quick_json["training"]}
    assert set(train) == TRAIN_ROWS
    # every training variant runs on the CPU: a failure is a failure, not a row with a reason
    warmup = quick_json["settings"]["train_warmup"]
    for name, row in train.items():
        assert row["status"] == "ok", (name, row["reason"])
        timed = row["step_s"][warmup:]
        assert len(timed) >= 2 and row["median_step_s"] == pytest.approx(statistics.median(timed)), name
        base = train[row["baseline"]]
        if name == row["baseline"]:
            assert row["speed_vs_baseline"] is None
            continue
        want = paired_ratio(base["step_s"][warmup:], row["step_s"][warmup:])
        assert row["speed_vs_baseline"] == pytest.approx(want.value) and row["interval"] == pytest.approx([want.lo, want.hi]), name
    # like for like: every backend row's baseline runs the same shared settings (only backend knobs differ)
    assert train["ort-opset14-fused-no-spin"]["baseline"] == "eager-fused-adamw"
    assert {train[n]["baseline"] for n in ("ortmodule", "compile")} == {"eager"}
    for name, row in train.items():
        if row["comparison"] == "backend":
            assert train[row["baseline"]]["shared_settings"] == row["shared_settings"], name
    assert train["ortmodule"]["executed_in_onnxruntime"] and not train["eager"]["executed_in_onnxruntime"]


def test_bf16_reason_follows_the_flags():
    info = {"cpu_model": "X", "flags": {f: False for f in bench.RECORDED_FLAGS}}
    assert "no bf16 instructions" in bench.bf16_unavailable_reason(info)
    info["flags"]["amx_bf16"] = True
    assert bench.bf16_unavailable_reason(info) is None


def test_latency_quantiles():
    from workbench.core.latency import quantile, summarize

    s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.median_ms, s.min_ms, s.p25_ms, s.p75_ms, s.iqr_ms) == (3.0, 1.0, 2.0, 4.0, 2.0)
    assert s.p10_ms == pytest.approx(1.4) and quantile([7.0], 0.9) == 7.0
    with pytest.raises(ValueError, match="q must be in"):
        quantile([1.0], 1.5)
