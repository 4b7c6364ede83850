"""The wheel on the current stack: installed (not editable) into a clean environment whose packages are the
current stack's, run from a folder outside the repository, `workbench doctor` names the stack and `workbench audit`
audits a classifier saved by transformers 5. And the `infer` extra resolves to onnxruntime, never beside a
training build. Runs where the current stack is (`make test-current`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from test_wheel import wheel  # noqa: F401  (the module-scoped fixture that builds the wheel from a clean copy)
from workbench.doctor.checks import stack

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.wheel,
              pytest.mark.skipif(stack() != "current", reason="the current stack's wheel test (make test runs it in .venv-current)")]
REPO = Path(__file__).resolve().parents[2]
V5 = REPO / "tests" / "fixtures" / "v5" / "generic_fast"


def test_the_wheel_audits_a_transformers_5_classifier_in_a_clean_current_stack_venv(wheel, tmp_path):  # noqa: F811
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the current stack's packages (the lock), without the repository: its .pth line is left out on purpose
    (site / "current-stack.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), capture_output=True, text=True, cwd=outside, env=env, timeout=timeout)

    where = run(str(py), "-c", "import workbench, workbench.models.compat; print(workbench.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), where.stdout
    doctor = run(str(venv / "bin" / "workbench"), "doctor")
    assert doctor.returncode == 0 and "current stack" in doctor.stdout and "environment OK" in doctor.stdout, \
        doctor.stdout + doctor.stderr
    rows = ["text,label"] + [f"review number {i} was {'great fun' if i % 2 else 'a dull bad film'},"
                             f"{'fresh' if i % 2 else 'rotten'}" for i in range(80)]
    (outside / "reviews.csv").write_text("\n".join(rows) + "\n")
    audit = run(str(venv / "bin" / "workbench"), "audit", "--model", str(V5), "--data", "reviews.csv", "--out", "audit",
                "--quick", "--presets", "dynamic", "--min-speedup", "0")
    summary = json.loads((outside / "audit" / "summary.json").read_text())
    assert audit.returncode in (0, 3), audit.stdout[-2000:] + audit.stderr[-2000:]
    assert summary["verdict"]["status"] != "incomplete" and (outside / "audit" / "report.html").is_file()
    train = run(str(venv / "bin" / "workbench"), "train")
    assert train.returncode == 2 and "make setup" in train.stderr and len(train.stderr.strip().splitlines()) == 1


def test_the_infer_extra_brings_onnxruntime_and_never_a_training_build(wheel, tmp_path):  # noqa: F811
    """pip's resolver, from package metadata only (nothing installed): `[infer]` with the current lock gives
    onnxruntime and no onnxruntime-training; `[infer,train]` does not resolve at all."""
    def resolve(extras: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
                               "--report", str(tmp_path / f"{extras}.json"), "-c",
                               str(REPO / "requirements" / "constraints-current.txt"), f"{wheel}[{extras}]"],
                              capture_output=True, text=True, timeout=600)

    infer = resolve("infer")
    assert infer.returncode == 0, infer.stderr[-3000:]
    names = {i["metadata"]["name"].lower() for i in json.loads((tmp_path / "infer.json").read_text())["install"]}
    assert {"onnxruntime", "torch", "transformers", "onnxscript"} <= names
    assert not {n for n in names if n.startswith("onnxruntime-training")}, names
    both = resolve("infer,train")
    assert both.returncode != 0 and "transformers" in both.stderr, both.stderr[-2000:]
