"""DoctorSession without a widget: the environment checks run through the session, every report kept,
a report computed elsewhere opened, and anything else refused naming the input."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.doctor.checks import Check, DoctorReport
from workbench.sessions.doctor import DoctorSession


def test_check_runs_the_doctor_and_keeps_every_report(tmp_path: Path) -> None:
    s = DoctorSession(run_dir=tmp_path / "run")
    assert s.result is None and not s.ok, "no report yet: not ok"
    first = s.check()
    assert isinstance(first, DoctorReport) and first.checks
    assert s.result is first and s.history == [first] and s.ok == first.ok
    assert {"python", "torch", "onnxruntime"} <= {c.name for c in first.checks}
    elsewhere = DoctorReport([Check("python", True, "3.11.9")])
    s.open(elsewhere)
    assert s.result is elsewhere and s.history == [first, elsewhere], "every report is kept, oldest first"
    assert not (tmp_path / "run").exists(), "the checks only read the environment: no run folder is written"


def test_an_opened_report_decides_ok_and_anything_else_is_refused() -> None:
    s = DoctorSession()
    failing = DoctorReport([Check("python", True, "3.11.9"), Check("torch", False, "2.8.0", "pip install torch==2.6.0")])
    assert s.open(failing) is failing and s.result is failing and not s.ok
    passing = DoctorReport([Check("python", True, "3.11.9"), Check("accelerators", False, "none", "optional", required=False)])
    s.open(passing)
    assert s.ok and s.history == [failing, passing], "a check that is not required does not fail the report"
    with pytest.raises(TypeError, match="report must be a workbench.doctor.checks.DoctorReport, got dict"):
        s.open({"ok": True})
    assert s.result is passing and len(s.history) == 2, "a refused report changes nothing"
