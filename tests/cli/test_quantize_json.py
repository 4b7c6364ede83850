"""``workbench quantize --json`` prints the variant's row (workbench/quant/rows.py): the floor, the share of
it and whether the machine was busy, the same figures quantize.json holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.quant import load_quant_result


@pytest.mark.slow  # a quantization of the tiny model: about 9 s on 2 cores
@pytest.mark.timeout(600)
def test_quantize_json_carries_the_floor_and_the_load_of_quantize_json(exported_tiny, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "quantize", str(Path(exported_tiny.onnx_path).parent),
                           "--preset", "dynamic", "--quick", "--node-samples", "0", "--n-boot", "100",
                           "--run-dir", str(tmp_path / "run"), "--json"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = json.loads(proc.stdout)
    saved = load_quant_result(tmp_path / "run")
    raw = json.loads((tmp_path / "run" / "quantize.json").read_text())
    assert printed["floor_ms"] == raw["latency"][0]["floor_ms"] == saved.latency[0].floor_ms
    assert printed["floor_ms"] is not None and printed["floor_ms"] > 0
    assert printed["of_floor"] == pytest.approx(saved.of_floor)
    assert printed["contended"] is bool(raw["load"] and raw["load"]["contended"]) is saved.contended
    assert printed["speedup_ci"] == [saved.speed[0].ratio.lo, saved.speed[0].ratio.hi]
    for key in ("name", "graph", "graph_kind", "size_mib", "latency_ms", "fp32_latency_ms", "speedup", "accuracy", "flips"):
        assert key in printed, key  # the keys scripts read before the row model stay
