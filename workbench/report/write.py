"""Writing the report: ``summary.json`` then ``report.html``, each atomically."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from .. import runs
from .inputs import ReportInputs, inputs_from_run
from .page import _figures, render_html
from .schema import REPORT_FILE, SUMMARY_FILE
from .summary import build_summary


def write_report(inp: ReportInputs, out_dir: Optional[str | os.PathLike] = None) -> tuple[Path, Path, dict]:
    """Write ``summary.json`` and ``report.html`` into ``out_dir`` (default ``inp.run_dir``),
    each atomically; returns (report path, summary path, summary)."""
    out = Path(out_dir if out_dir is not None else inp.run_dir)
    summary = build_summary(inp)
    page = render_html(summary, _figures(inp, summary))
    spath = runs.atomic_write_json(out / SUMMARY_FILE, summary)
    rpath = runs.atomic_write_text(out / REPORT_FILE, page)
    return rpath, spath, summary


def write_run_report(run_dir: str | os.PathLike, kind: str = "workbench", **overrides) -> tuple[Path, Path, dict]:
    """Report of what a run folder holds so far (the notebook Workbench's button, the demo)."""
    return write_report(inputs_from_run(run_dir, kind, **overrides), run_dir)
