"""The page's style and cells for every section: escaped text, formatted numbers, tables, figures."""

from __future__ import annotations

import html
from typing import Any, Sequence

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1180px;padding:16px 28px;color:#222;
line-height:1.45}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{padding:14px 18px;border-radius:6px;font-size:1.1em;margin:12px 0}
.meets_budget{background:#e8f5e9;border-left:6px solid #54A24B}.no_candidate_meets_budget{background:#fff4e5;border-left:6px solid #F58518}
.incomplete{background:#fdecea;border-left:6px solid #E45756}.muted{color:#666;font-size:.9em}.ok{color:#2e7d32}.bad{color:#c62828}
details{margin:6px 0}summary{cursor:pointer}code{background:#f6f6f6;padding:0 3px}.cols{display:flex;gap:2em}.cols>div{flex:1}
"""


def escape(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def format_value(v: Any, fmt: str = ".2f", scale: float = 1.0, suffix: str = "") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    return f"{v * scale:{fmt}}{suffix}"


def report_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure_html(fig, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})
