"""`make setup` is quiet: pip's output (setuptools' build warnings, resolver notes) goes to a log and
is shown only when pip fails (scripts/setup.sh's ``quiet_pip``). The function is taken from the
script itself and run in bash with a stand-in for the venv's python, so no package is installed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup.sh"


def _quiet_pip_function() -> str:
    text = SETUP.read_text()
    match = re.search(r"^quiet_pip\(\) \{\n.*?^\}\n", text, flags=re.S | re.M)
    assert match, "scripts/setup.sh defines quiet_pip() { ... }"
    return match.group(0)


def _run(tmp_path: Path, exit_code: int) -> subprocess.CompletedProcess:
    fake = tmp_path / "python"
    fake.write_text("#!/usr/bin/env bash\n"
                    "for i in $(seq 1 60); do echo \"setuptools warning line $i\" >&2; echo \"noise $i\"; done\n"
                    f"exit {exit_code}\n")
    fake.chmod(0o755)
    script = (f'set -euo pipefail\nVPY="{fake}"\nPIP_LOG="{tmp_path / "pip.log"}"\n'
              f'{_quiet_pip_function()}quiet_pip install -q something\necho "after pip"\n')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_a_working_pip_prints_nothing_and_logs_everything(tmp_path: Path) -> None:
    done = _run(tmp_path, 0)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "after pip\n" and done.stderr == ""
    log = (tmp_path / "pip.log").read_text()
    assert "setuptools warning line 60" in log and "noise 60" in log


def test_a_failing_pip_stops_setup_and_shows_the_end_of_its_log(tmp_path: Path) -> None:
    done = _run(tmp_path, 1)
    assert done.returncode == 1
    assert "after pip" not in done.stdout
    assert "setup: pip install -q something failed" in done.stderr
    assert "setuptools warning line 60" in done.stderr  # the end of the log, where pip's error is
    assert "setuptools warning line 1\n" not in done.stderr  # only the end (tail -40), not the whole screen


def test_every_pip_call_in_setup_goes_through_quiet_pip() -> None:
    """A pip install added later without quiet_pip would print its screen of warnings again.
    (The uninstall before the GPU build is allowed: it prints nothing with -q and ignores errors.)"""
    loud = [line.strip() for line in SETUP.read_text().splitlines()
            if re.search(r"-m pip (install|download|wheel)\b", line) and "quiet_pip" not in line
            and not line.strip().startswith("#") and '"$VPY" -m pip "$@"' not in line]
    assert not loud, f"pip calls outside quiet_pip in scripts/setup.sh: {loud}"
