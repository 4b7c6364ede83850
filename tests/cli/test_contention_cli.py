"""A timing command run while another process keeps a core busy flags its figures as taken under
load: the result, summary fields and the CLI's warning line say so; the exit code does
not change. No time is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SPIN = "import time\nend = time.time() + 120\nwhile time.time() < end: pass\n"


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    # the command times with its own default, one thread per CPU: make test gives each worker (and what it
    # starts) OMP_NUM_THREADS of its share, and a one-thread timing beside one busy core of two is not contended
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return subprocess.run([sys.executable, "-m", "workbench.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.slow  # a long run for make test-fast: 9 s on 2 cores
@pytest.mark.timeout(600)
def test_quantize_beside_a_busy_core_flags_its_speed(exported_tiny, tmp_path: Path) -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])  # one core kept busy by another process
    try:
        proc = _cli("quantize", str(Path(exported_tiny.onnx_path).parent), "--preset", "dynamic", "--quick",
                    "--data", "reviews", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    finally:
        spinner.kill()
        spinner.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "WARNING: speed" in proc.stdout and "not a measured fact" in proc.stdout, proc.stdout[-2000:]
    saved = next((tmp_path / "run").rglob("quantize.json"))
    result = json.loads(saved.read_text())
    assert result["load"]["contended"] is True and result["load"]["reasons"]
    assert any("not a measured fact" in n for n in result["notes"])
