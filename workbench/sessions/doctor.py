"""The doctor session: is this environment able to run every stage? Keeps the last report."""

from __future__ import annotations

from ..doctor.checks import DoctorReport, run_doctor
from .base import Session


class DoctorSession(Session):
    """``result`` is the latest :class:`~workbench.doctor.checks.DoctorReport`."""

    INPUTS = ()
    LABEL = "doctor"

    def check(self) -> DoctorReport:
        return self.keep(run_doctor())

    def open(self, report: DoctorReport) -> DoctorReport:
        if not isinstance(report, DoctorReport):
            raise TypeError(f"report must be a workbench.doctor.checks.DoctorReport, got {type(report).__name__}")
        return self.keep(report)

    @property
    def ok(self) -> bool:
        return bool(self.result is not None and self.result.ok)
