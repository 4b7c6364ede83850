"""The doctor banner over workbench.doctor.checks.run_doctor."""

from __future__ import annotations

import pytest

import workbench.sessions.doctor as doctor_module  # the session runs the checks
from widgets import DoctorBanner
from workbench.doctor.checks import Check, DoctorReport


def test_banner_runs_the_real_doctor() -> None:
    banner = DoctorBanner()
    report = banner.result
    assert isinstance(report, DoctorReport)
    # one row per check the library made, each with its name
    for check in report.checks:
        assert check.name in banner.checks_html.value
    assert banner.checks_html.value.count("<tr>") == len(report.checks)
    assert banner.ok == report.ok


def test_failed_check_shows_its_fix() -> None:
    report = DoctorReport(
        [
            Check("python", True, "3.11.9"),
            Check("torch", False, "2.8.0", "pip install torch==2.6.0"),
            Check("accelerators", False, "none", "optional", required=False),
        ]
    )
    banner = DoctorBanner(report=report)
    html = banner.checks_html.value
    assert "1 required check(s) failed" in html
    assert "fix: pip install torch==2.6.0" in html
    assert "warn" in html and "FAIL" in html
    assert not banner.ok
    assert "need attention" in banner.status.value


def test_doctor_error_is_shown_and_check_again_recovers(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken():
        raise ImportError("onnxruntime is not importable: run `make setup`")

    banner = DoctorBanner(autorun=False)
    assert banner.result is None
    monkeypatch.setattr(doctor_module, "run_doctor", broken)
    banner.run_button.click()
    assert isinstance(banner.error, ImportError)
    assert "run `make setup`" in banner.error_box.value
    monkeypatch.undo()
    banner.run_button.click()
    assert banner.error is None and isinstance(banner.result, DoctorReport)


def test_report_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match="DoctorReport"):
        DoctorBanner(report={"ok": True})
