"""``summary.json`` and ``report.html`` replaced as one unit: a reader sees both old or both new, never one of each."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from ..core import serial
from ..runs.atomic import atomic_write_set
from ..runs.layout import REPORT_FILE, SUMMARY_FILE
from .inputs import ReportInputs, inputs_from_run
from .page import draw_figures, render_html
from .summary import build_summary


def write_report(inp: ReportInputs, out_dir: Optional[str | os.PathLike] = None) -> tuple[Path, Path, dict]:
    summary = build_summary(inp)
    report, written = write_summary_page(out_dir if out_dir is not None else inp.run_dir, summary, draw_figures(inp, summary))
    return report, written, summary


def write_summary_page(out_dir: str | os.PathLike, summary: dict, figures: dict) -> tuple[Path, Path]:
    page = render_html(summary, figures)
    text = json.dumps(serial.to_dict(summary), indent=2, allow_nan=False) + "\n"
    paths = atomic_write_set(Path(out_dir), {SUMMARY_FILE: text.encode("utf-8"), REPORT_FILE: page.encode("utf-8")})
    return paths[REPORT_FILE], paths[SUMMARY_FILE]


def write_run_report(run_dir: str | os.PathLike, kind: str = "workbench", **overrides) -> tuple[Path, Path, dict]:
    return write_report(inputs_from_run(run_dir, kind, **overrides), run_dir)
