"""`make bench-stacks` (benchmarks/bench_stacks.py): the same graphs timed under both stacks' ONNX Runtimes. End to
end on the tiny model in both venvs (its graphs built, then found again instead of rebuilt), the one-line refusals
of a missing venv or graph, and the Makefile target's commands. No timing is asserted (timings belong to the
benchmark's table)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark

from workbench.perf.machine_profile import FLAG_KEYS

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "bench_stacks.py"
VENVS = {"training": ROOT / ".venv", "current": ROOT / ".venv-current"}
SETUP = {"training": "make setup", "current": "make setup-current"}
HERE_VENV = Path(sys.prefix)  # the venv running these tests: a real one for the refusals that need one


def bench(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def missing_venvs() -> str:
    return ", ".join(f"{p.name} (set up by `{SETUP[role]}`)" for role, p in VENVS.items() if not (p / "bin" / "python").is_file())


def ort_version(venv: Path) -> str:
    return subprocess.run([str(venv / "bin" / "python"), "-c", "import onnxruntime; print(onnxruntime.__version__)"],
                          capture_output=True, text=True, check=True, timeout=120).stdout.strip()


def op_types(path: Path) -> set[str]:
    import onnx

    return {n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node}


@pytest.mark.slow  # builds the tiny model's graphs, then four worker processes (about 40 s on 2 busy cores)
@pytest.mark.skipif(bool(missing_venvs()), reason=f"bench-stacks times both stacks; missing here: {missing_venvs()}")
def test_both_stacks_time_the_tiny_models_built_graphs(tmp_path):
    work, out = tmp_path / "stacks", tmp_path / "bench_stacks.json"
    proc = bench("--model", "tiny", "--work", str(work), "--venvs", str(VENVS["training"]), str(VENVS["current"]),
                 "--shapes", "1x8", "--rounds", "1", "--iters", "5", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "building tiny's fused FP32 and per-channel INT8 graphs" in proc.stdout
    r = json.loads(out.read_text())
    assert r["versions"] == {role: ort_version(venv) for role, venv in VENVS.items()}
    assert r["threads"] == 2 and r["rounds"] == 1 and r["shapes"] == ["1x8"] and r["settings"] == ["workbench"]
    m = r["machine"]
    assert m["cpu_model"] and set(m["flags"]) == set(FLAG_KEYS) and m["cpus"] >= 1
    assert len(m["load_avg_start"]) == 3 and len(m["load_avg_end"]) == 3
    # the graphs: the fused FP32 graph and its per-channel dynamic INT8 version, recorded relative to --work
    assert r["built"]["model"] == "tiny" and set(r["graphs"]) == {"fused-fp32", "int8-per-channel"}
    graphs = {label: work / rel for label, rel in r["built"]["graphs"].items()}
    assert {k: str(v) for k, v in graphs.items()} == r["graphs"]
    assert "SkipLayerNormalization" in op_types(graphs["fused-fp32"])
    assert op_types(graphs["int8-per-channel"]) & {"DynamicQuantizeMatMul", "MatMulInteger"}
    # one row per graph, setting and shape: each runtime's median over the rounds, and the ratio current / training
    rows = {(row["graph"], row["setting"], row["shape"]): row for row in r["rows"]}
    assert set(rows) == {("fused-fp32", "workbench", "1x8"), ("int8-per-channel", "workbench", "1x8")}
    for key, row in rows.items():
        assert set(row["rounds"]) == {"training", "current"}, key
        assert row["training_ms"] == row["rounds"]["training"][0] > 0 and row["current_ms"] == row["rounds"]["current"][0] > 0
        assert row["ratio"] == pytest.approx(row["current_ms"] / row["training_ms"])
    for line in ("ort " + r["versions"]["training"], "ort " + r["versions"]["current"], "int8-per-channel"):
        assert line in proc.stdout
    # a second call for the same model finds the graphs instead of building them again; another model does not
    stamps = {p: p.stat().st_mtime_ns for p in (*graphs.values(), work / "graphs.json")}
    said: list[str] = []
    bench_stacks = load_benchmark("bench_stacks")
    assert bench_stacks.build_graphs("tiny", work, log=said.append) == r["built"]
    assert said and said[0].startswith("reusing the graphs of tiny")
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert bench_stacks.built_graphs(work, "minilm") is None
    graphs["int8-per-channel"].unlink()
    assert bench_stacks.built_graphs(work, "tiny") is None


@pytest.mark.parametrize("role", ["training", "current"])
def test_a_missing_venv_is_refused_in_one_line_naming_its_setup(tmp_path, role):
    missing = tmp_path / "no-venv"
    venvs = [str(missing), str(HERE_VENV)] if role == "training" else [str(HERE_VENV), str(missing)]
    out = tmp_path / "bench_stacks.json"
    proc = bench("--venvs", *venvs, "--out", str(out), timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    line, = proc.stderr.splitlines()
    assert line.startswith("bench_stacks: --venvs: ") and str(missing) in line and f"`{SETUP[role]}`" in line
    assert f"the {role} stack's" in line
    assert not out.exists()


def test_a_missing_graph_is_refused_in_one_line(tmp_path):
    graph, out = tmp_path / "nowhere" / "model.onnx", tmp_path / "bench_stacks.json"
    proc = bench("--graphs", str(graph), "--venvs", str(HERE_VENV), str(HERE_VENV), "--out", str(out), timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    line, = proc.stderr.splitlines()
    assert line.startswith("bench_stacks: --graphs: ") and str(graph) in line and "leave --graphs out" in line
    assert not out.exists()


def test_a_model_that_is_not_one_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    proc = bench("--model", str(folder), "--work", str(tmp_path / "stacks"), "--venvs", str(HERE_VENV), str(HERE_VENV),
                 timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    line, = proc.stderr.splitlines()
    assert line.startswith("bench_stacks: --model: ") and str(folder) in line and "config.json" in line
    assert not (tmp_path / "stacks").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed here")
def test_make_bench_stacks_sets_up_and_times_both_venvs(tmp_path):
    proc = subprocess.run(["make", "-n", "--no-print-directory", "bench-stacks", f"RUNS={tmp_path}", "BENCH_ARGS=--rounds 5"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["bash scripts/setup.sh", "bash scripts/setup_current.sh"]  # both stacks, set up first
    run, = (line for line in lines if "benchmarks/bench_stacks.py" in line)
    assert run.startswith(".venv/bin/python benchmarks/bench_stacks.py ") and " --venvs .venv .venv-current " in run
    assert f"--work {tmp_path}/bench/stacks" in run and f"--out {tmp_path}/bench/bench_stacks.json" in run
    assert run.endswith("--rounds 5")
