"""benchmarks/bench_scale.py and the scale page's table made from its JSON: the rounds summed up per graph, the
driver's growth per row between two load runs, the prediction for a million rows (and the placeholder while no
result file is committed), and the one-line refusals. No timing is asserted (timings belong to the benchmark)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "bench_scale.py"
bench_scale = load_benchmark("bench_scale")


def _figures():
    spec = importlib.util.spec_from_file_location("generated", ROOT / "docs" / "hooks" / "generated.py")
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    return generated.figures_module()


def _round(r: int, graph: str, local: float, ray: float) -> dict:
    return {"round": r, "graph": graph, "local_rows_per_s": local, "ray_rows_per_s": ray, "overhead": 1 - ray / local,
            "classes_differ": 0}


def test_the_rounds_give_each_graphs_median_rates_overhead_and_per_actor_rate() -> None:
    rounds = [_round(0, "fp32", 100, 90), _round(1, "fp32", 120, 90), _round(2, "fp32", 110, 99), _round(0, "int8", 200, 200)]
    got = bench_scale.summarize(rounds, actors=2)
    assert list(got) == ["fp32", "int8"]
    fp32 = got["fp32"]
    assert fp32["local_rows_per_s"] == 110 and fp32["ray_rows_per_s"] == 90 and fp32["per_actor_rows_per_s"] == 45
    assert fp32["overhead"] == pytest.approx(0.1) and fp32["overhead_min"] == pytest.approx(0.1)
    assert fp32["overhead_max"] == pytest.approx(0.25)
    assert got["int8"]["overhead"] == 0 and got["int8"]["per_actor_rows_per_s"] == 100


def test_the_per_actor_rate_is_the_pools_steady_rate_from_its_first_batch_back_to_its_last() -> None:
    from workbench.runtime.progress import ScoringProgress

    seen = [ScoringProgress("g", rows, 100, seconds, 2) for rows, seconds in ((0, 0.0), (10, 30.0), (60, 35.0), (100, 40.0))]
    assert bench_scale.steady_rate(seen) == 9.0  # 90 rows in the 10 s after the first batch; the 30 s start left out
    assert bench_scale.steady_rate(seen[:2]) is None
    rounds = [dict(_round(0, "g", 100, 50), ray_steady_rows_per_s=90.0), dict(_round(1, "g", 100, 50), ray_steady_rows_per_s=70.0)]
    got = bench_scale.summarize(rounds, actors=2)["g"]
    assert got["per_actor_rows_per_s"] == 40.0 and got["per_actor_from"] == "steady" and got["ray_rows_per_s"] == 50


def test_the_drivers_growth_per_row_is_read_between_the_smallest_and_largest_load_runs() -> None:
    runs = [{"rows": 200_000, "peak_driver_mib": 700.0, "exit_code": 0}, {"rows": 50_000, "peak_driver_mib": 400.0, "exit_code": 3},
            {"rows": 100_000, "peak_driver_mib": 9000.0, "exit_code": 1}]  # an audit that failed: not a figure of growth
    assert bench_scale.growth(runs[1:], graphs=2) is None
    got = bench_scale.growth(runs, graphs=2)
    assert (got["from_rows"], got["to_rows"]) == (50_000, 200_000)
    assert got["driver_bytes_per_row"] == pytest.approx(300 * 2**20 / 150_000)
    assert got["results_bytes_per_row"] == 16  # two graphs, two float32 logits each


def test_the_scale_table_says_so_until_a_result_file_exists_then_predicts_from_the_per_actor_rate(tmp_path: Path) -> None:
    figures = _figures()
    assert "No result file yet" in figures.scale_table(found=[])
    result = {"rows": 20000, "rounds": 3, "threads": 2, "batch_size": 32, "machine": {"cpu_model": "Some CPU"},
              "pool": {"actors": 2, "threads_per_actor": 1},
              "throughput": {"fused-fp32": {"local_rows_per_s": 200.0, "ray_rows_per_s": 180.0, "overhead": 0.1,
                                            "overhead_min": 0.05, "overhead_max": 0.12, "per_actor_rows_per_s": 90.0},
                             "int8-per-channel": {"local_rows_per_s": 400.0, "ray_rows_per_s": 360.0, "overhead": 0.1,
                                                  "overhead_min": 0.08, "overhead_max": 0.11, "per_actor_rows_per_s": 180.0}}}
    path = tmp_path / "scale_minilm_some-cpu_2026-11-28.json"
    path.write_text(json.dumps(result))
    text = figures.scale_table(found=[path])
    # 1,000,000 rows on one node of 8 one-thread actors: 1e6 / (90 * 8) + 1e6 / (180 * 8) = 2083.3 s
    one, four, sixteen = (figures.minutes(1e6 / (90 * 8 * n) + 1e6 / (180 * 8 * n)) for n in (1, 4, 16))
    assert f"| {one} | {four} | {sixteen} |" in text and one == "34 min 43 s"
    assert "| `fused-fp32` | 200 | 180 | +10.0% [+5.0, +12.0] | 90.0 |" in text
    assert "Some CPU, 2026-11-28" in text and "No result file" not in text


@pytest.mark.parametrize("argv, said", [
    (["--rows", "0"], "--rows 0 must be at least 1"),
    (["--threads", "0"], "--threads 0 must be at least 1"),
    (["--load-rows", "1000"], "--load-rows [1000]: give at least two different positive row counts"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], said: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), *argv, "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("bench_scale: ") and said in proc.stderr
    assert not out.exists()
