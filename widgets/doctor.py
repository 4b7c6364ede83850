"""The doctor banner: is this environment able to run every stage? Each failed check shows its fix."""

from __future__ import annotations

import html
from typing import Any, Optional

import ipywidgets as W

from workbench.doctor.checks import DoctorReport
from workbench.sessions.doctor import DoctorSession

from .base import FAIL_COLOUR, MUTED_COLOUR, OK_COLOUR, WARN_COLOUR, Panel

_COLOURS = {"ok": OK_COLOUR, "FAIL": FAIL_COLOUR, "warn": WARN_COLOUR}


def report_html(report: DoctorReport) -> str:
    """A banner line (environment OK / n checks failed) and one row per check with its fix."""
    required_failed = [c for c in report.checks if c.required and not c.ok]
    if report.ok:
        banner = f'<div class="wb-doctor-banner" style="color:{OK_COLOUR};font-weight:bold">Environment OK: every stage can run.</div>'
    else:
        banner = (
            f'<div class="wb-doctor-banner" style="color:{FAIL_COLOUR};font-weight:bold">'
            f"{len(required_failed)} required check(s) failed: the stages that need them will fail "
            f"until you apply the fixes below.</div>"
        )
    rows = []
    for c in report.checks:
        colour = _COLOURS.get(c.status, MUTED_COLOUR)
        fix = (
            f'<div class="wb-doctor-fix" style="color:{colour}">fix: {html.escape(c.fix)}</div>'
            if (not c.ok and c.fix) else ""
        )
        rows.append(
            f'<tr><td style="padding:1px 8px;color:{colour};font-weight:bold">{html.escape(c.status)}</td>'
            f'<td style="padding:1px 8px">{html.escape(c.name)}</td>'
            f'<td style="padding:1px 8px">{html.escape(c.value)}{fix}</td></tr>'
        )
    return banner + f'<table class="wb-doctor-checks" style="border-collapse:collapse">{"".join(rows)}</table>'


class DoctorBanner(Panel):
    """Runs :func:`workbench.doctor.checks.run_doctor` and shows every check, failures first with their fix.

    ``DoctorBanner(report=...)`` shows a report computed elsewhere; ``DoctorBanner(autorun=False)``
    waits for the button. ``panel.session`` is the :class:`~workbench.sessions.doctor.DoctorSession`,
    ``panel.result`` its :class:`~workbench.doctor.checks.DoctorReport`.
    """

    SESSION = DoctorSession
    OPTIONS = {"report": None, "autorun": True}
    TITLE = "Environment"
    HELP = "Versions, ORTModule's compiled extensions, execution providers, the built-in model and data."
    RUN_LABEL = "Check again"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("background", False)  # a few seconds of imports; no progress to show
        super().__init__(**kwargs)
        report: Optional[DoctorReport] = self.options["report"]
        if report is not None:
            self.show(report)
        elif self.options["autorun"]:
            self.run()

    def _build_views(self) -> list[W.Widget]:
        self.checks_html = W.HTML("")
        return [self.checks_html]

    def _compute(self, values: dict[str, Any]) -> DoctorReport:
        return self.session.check()

    def _open(self, result: Any) -> DoctorReport:
        return self.session.open(result)

    def _draw(self, report: DoctorReport) -> None:
        self.checks_html.value = report_html(report)
        self.progress.layout.display = "none"

    def _summary(self, report: DoctorReport) -> str:
        n = len(report.failures)
        return "environment OK" if report.ok else f"{n} check(s) need attention"

    def _summary_colour(self, report: DoctorReport) -> str:
        return OK_COLOUR if report.ok else FAIL_COLOUR

    @property
    def ok(self) -> bool:
        """Whether every required check passed in the last report (False before any)."""
        return self.session.ok
