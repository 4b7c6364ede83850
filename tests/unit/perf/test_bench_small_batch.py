"""benchmarks/bench_small_batch.py: the session settings side by side at batch 1 and the profiler's per-row summary.
End to end in --quick mode on the tiny model's graphs (every row and profile it promises, the machine, versions and
date in the JSON), the profile's reading of ONNX Runtime's events on a made-up profile, and the one-line refusals.
No timing is asserted (timings belong to the benchmark's table)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark

from workbench.perf.machine_profile import FLAG_KEYS

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "bench_small_batch.py"
bench_small_batch = load_benchmark("bench_small_batch")


def bench(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_the_profile_counts_only_the_last_runs_kernels(tmp_path: Path) -> None:
    def run(ts, dur):
        return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur}

    def node(op, ts, dur, suffix="_kernel_time"):
        return {"cat": "Node", "name": f"{op}_1{suffix}", "ts": ts, "dur": dur, "args": {"op_name": op}}

    events = [{"cat": "Session", "name": "session_initialization", "ts": 0, "dur": 50},
              run(100, 50), node("MatMul", 110, 30),  # the warm-up run: left out
              run(200, 40), node("MatMul", 205, 20), node("Add", 230, 5), node("MatMul", 226, 0, "_fence_before"),
              run(300, 60), node("MatMul", 310, 25), node("Add", 340, 10)]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(events))
    got = bench_small_batch.profile_events(path, last=2)
    assert got == {"runs": 2, "run_us": [40.0, 60.0], "op_us": {"MatMul": 45.0, "Add": 15.0}}
    assert bench_small_batch.profile_events(path, last=5)["op_us"] == {"MatMul": 75.0, "Add": 15.0}
    path.write_text(json.dumps(events[:1]))
    with pytest.raises(ValueError, match="no model_run events"):
        bench_small_batch.profile_events(path, last=2)


@pytest.mark.parametrize("argv, said", [
    (["--threads", "0"], "--threads 0 must be at least 1"),
    (["--rounds", "0"], "--rounds 0 must be at least 1"),
    (["--shapes", "1by26"], "--shapes 1by26: shapes are BATCHxSEQ"),
    (["--graphs", "/nowhere/g.onnx"], "--graphs /nowhere/g.onnx: no such file"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], said: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = bench(*argv, "--out", str(out), timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("bench_small_batch: ") and said in proc.stderr
    assert not out.exists()


@pytest.mark.slow  # builds the tiny model's graphs, then times and profiles them (about a minute on 2 busy cores)
@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_quick_run_on_the_tiny_models_graphs(tmp_path: Path) -> None:
    out, settings = tmp_path / "small.json", ["threads-1", "no-spin", "parallel", "io-binding"]
    proc = bench("--quick", "--model", "tiny", "--work", str(tmp_path / "work"), "--settings", *settings,
                 "--profile-batch", "4", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["schema_version"] == bench_small_batch.SCHEMA_VERSION and r["quick"] is True and r["rounds"] == 3
    assert time.strptime(r["date"], "%Y-%m-%dT%H:%M:%SZ")
    assert set(r["machine"]["flags"]) == set(FLAG_KEYS) and r["machine"]["cpu_model"] and len(r["machine"]["load_avg_end"]) == 3
    assert {"onnxruntime", "onnxruntime-training-cpu", "onnxruntime-training"} & set(r["versions"]) and "numpy" in r["versions"]
    assert r["shapes"] == ["1x26"] and list(r["settings"]) == ["workbench", *settings]
    assert set(r["graphs"]) == {"fused-fp32", "int8-per-channel"} and r["built"]["model"] == "tiny"
    rows = {(row["graph"], row["shape"], row["setting"]): row for row in r["rows"]}
    assert set(rows) == {(g, "1x26", s) for g in r["graphs"] for s in r["settings"]}
    for key, row in rows.items():
        assert row["ms"] > 0 and len(row["samples_ms"]) == 3 and 0 < row["lo"] <= row["hi"] and row["speedup"] > 0, key
        assert row["threads"] == (1 if key[2] == "threads-1" else 2), key
        assert row["floor_ms"] > 0 and row["of_floor"] == pytest.approx(row["floor_ms"] / row["ms"]), key
        if key[2] == "workbench":
            assert (row["speedup"], row["lo"], row["hi"]) == (1.0, 1.0, 1.0)
    assert set(r["profile"]) == {"fused-fp32 seq 26", "int8-per-channel seq 26"}
    for name, prof in r["profile"].items():
        for batch in ("batch_1", "batch_4"):
            p = prof[batch]
            assert p["runs"] == 3 and p["shape"] == f"{batch.split('_')[1]}x26", name
            assert p["kernels_us_per_row"] == pytest.approx(sum(p["op_us_per_row"].values()))
            assert p["between_kernels_us_per_row"] == pytest.approx(p["run_us_per_row"] - p["kernels_us_per_row"])
            assert p["python_call_us_per_row"] > 0 and 0 < p["gemm_share"] <= 1
    assert "QAttention" in r["profile"]["int8-per-channel seq 26"]["batch_1"]["op_us_per_row"]
    assert "vs workbench [95%]" in proc.stdout and "µs per row (batch 4 divided by 4)" in proc.stdout
    assert not list((tmp_path / "small_batch_profiles").glob("*.json"))  # the profiler's files are read, then removed
