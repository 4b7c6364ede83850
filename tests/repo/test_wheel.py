"""The built wheel is complete and works from an ordinary (non-editable) install, run from a folder
outside the repository: every subpackage is in it (workbench.plots was once missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.wheel]
REPO = Path(__file__).resolve().parents[2]
_SKIP_ANYWHERE = shutil.ignore_patterns(".venv", ".venv-*", ".git", "*.egg-info", "__pycache__", ".pytest_cache", ".ipynb_checkpoints")
_SKIP_AT_ROOT = {"build", "dist", "runs", "test-output", "notebooks"}  # the repo's own folders, not workbench/runs/


def SKIP(folder: str, names: list[str]) -> set[str]:
    skipped = set(_SKIP_ANYWHERE(folder, names))
    if Path(folder).resolve() == REPO:
        skipped |= _SKIP_AT_ROOT & set(names)
    return skipped


def _setuptools_major() -> int:
    try:
        import setuptools

        return int(setuptools.__version__.split(".")[0])
    except ImportError:
        return 0


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=SKIP)  # a clean copy: no stale build/ from an earlier build
    cmd = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-w", str(tmp / "dist"), "-q"]
    if _setuptools_major() >= 77:  # pyproject needs 77+ (SPDX license); otherwise pip builds in isolation
        cmd.append("--no-build-isolation")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "would be ignored" not in proc.stdout + proc.stderr
    (whl,) = (tmp / "dist").glob("ort_workbench-*.whl")
    return whl


def test_wheel_holds_every_subpackage(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    plots = {n for n in names if n.startswith("workbench/plots/") and n.endswith(".py")}
    assert {f"workbench/plots/{p.name}" for p in (REPO / "workbench" / "plots").glob("*.py")} == plots
    assert "workbench/resources/golden_reviews.jsonl" in names
    assert "workbench/resources/ship_predict.py" in names  # the template of chosen/predict.py
    assert {"workbench/resources/ondevice_page.html", "workbench/resources/ondevice_app.js"} <= names  # the on-device web page
    for package in ("audit", "report", "ondevice"):
        assert {f"workbench/{package}/{p.name}" for p in (REPO / "workbench" / package).glob("*.py")} <= names
    assert "widgets/workbench.py" in names


def test_installed_wheel_runs_outside_the_repo(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The dependencies come from this environment's site-packages through a plain path line: a
    # .pth line only adds the folder, it does not run the editable-install hook that lives there.
    (site / "shared-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), capture_output=True, text=True, cwd=outside, env=env, timeout=timeout)

    where = run(str(py), "-c", "import workbench, workbench.plots.quant, workbench.plots.report, workbench.report, widgets; "
                               "print(workbench.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), where.stdout
    doctor = run(str(venv / "bin" / "workbench"), "doctor")
    # the wheel shares this (set-up) environment's packages, ORTModule's compiled extensions included: every check passes
    assert doctor.returncode == 0 and "Traceback" not in doctor.stderr, doctor.stdout + doctor.stderr
    assert "onnxruntime" in doctor.stdout and "environment OK" in doctor.stdout
    helptext = run(str(venv / "bin" / "workbench"), "audit", "--help")
    assert helptext.returncode == 0, helptext.stderr
    assert "--budget-slice" in helptext.stdout and "3  no quantized" in helptext.stdout
