"""What every panel draws with: the colours, table cells and tables (HTML), the error box, a
figure replaced in place, and the progress bar with its time left. Views only: no computation."""

from __future__ import annotations

import html
import traceback
from typing import Any, Optional, Sequence

import ipywidgets as W
import plotly.graph_objects as go

# Colours shared by every panel (status badges, error box).
OK_COLOUR = "#1b7f3b"
FAIL_COLOUR = "#b42318"
WARN_COLOUR = "#9a6700"
MUTED_COLOUR = "#57606a"


def format_seconds(seconds: Optional[float]) -> str:
    """``75.2`` -> ``"1 min 15 s"``; ``None`` -> ``"?"``."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Markup(str):
    """A table cell that is already HTML (made with :func:`coloured`); other cells are escaped."""


def fmt(value: Any, spec: str = ".3g", suffix: str = "") -> str:
    """Format a number for a table; NaN, inf and None become "–"."""
    if value is None:
        return "–"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if number != number or number in (float("inf"), float("-inf")):
        return "–"
    return f"{format(number, spec)}{suffix}"


def coloured(text: str, good: Optional[bool]) -> "Markup":
    """``text`` (escaped) in green when ``good``, red when not, plain when None."""
    colour = "" if good is None else (OK_COLOUR if good else FAIL_COLOUR)
    body = html.escape(text)
    return Markup(f'<span style="color:{colour}">{body}</span>' if colour else body)


def error_html(exc: BaseException, context: str = "") -> str:
    """The error box: the exception type and message (library messages carry the fix), then the
    traceback folded in a ``<details>`` element."""
    message = str(exc) or "(no message)"
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    where = f" while {html.escape(context)}" if context else ""
    return (
        f'<div class="wb-error" style="border-left:4px solid {FAIL_COLOUR};padding:6px 10px;'
        f'background:#fff5f5;color:#1f2328">'
        f"<b style=\"color:{FAIL_COLOUR}\">{html.escape(type(exc).__name__)}</b>{where}: "
        f'<span class="wb-error-message" style="white-space:pre-wrap">{html.escape(message)}</span>'
        f"<div style=\"color:{MUTED_COLOUR};font-size:90%;margin-top:4px\">Change the inputs above and press "
        f"Run again; the panel keeps working.</div>"
        f"<details><summary>traceback</summary><pre style=\"font-size:80%\">{html.escape(tb)}</pre></details>"
        f"</div>"
    )


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], css_class: str = "wb-table") -> str:
    """A small HTML table; cells are escaped unless they are :class:`Markup`."""
    def cell(v: Any) -> str:
        return str(v) if isinstance(v, Markup) else html.escape(str(v))

    th = "<th style=\"text-align:left;padding:2px 8px;border-bottom:1px solid #d0d7de\">"
    head = "".join(f"{th}{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td style=\"padding:2px 8px\">{cell(v)}</td>" for v in row) + "</tr>"
        for row in rows
    )
    return f'<table class="{css_class}" style="border-collapse:collapse"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def replace_figure(target: go.FigureWidget, figure: go.Figure) -> None:
    """Make ``target`` show ``figure`` in place (traces and layout replaced, one front-end update)."""
    with target.batch_update():
        target.data = []
        target.add_traces(list(figure.data))
        target.layout = figure.layout


class ProgressView(W.VBox):
    """A progress bar with ``step i/n``, an optional detail (loss, throughput) and time left."""

    def __init__(self) -> None:
        self.bar = W.IntProgress(value=0, min=0, max=1, layout=W.Layout(width="100%"))
        self.label = W.HTML("")
        super().__init__([self.bar, self.label], layout=W.Layout(display="none"))

    def start(self, text: str = "starting ...") -> None:
        self.bar.bar_style = ""
        self.bar.value = 0
        self.label.value = html.escape(text)
        self.layout.display = "flex"

    def update(self, done: int, total: int, eta_s: Optional[float] = None, detail: str = "") -> None:
        total = max(int(total), 1)
        parts = [f"step {int(done)}/{total}"]
        if detail:
            parts.append(detail)
        if eta_s is not None:
            parts.append(f"{format_seconds(eta_s)} left")
        self.label.value = html.escape(" · ".join(parts))
        # the bar moves last: whoever observes ``bar.value`` finds the label already saying that step
        self.bar.max = total
        self.bar.value = max(0, min(int(done), total))

    def finish(self, text: str, ok: bool = True, stopped: bool = False) -> None:
        """Final state: green and full when ``ok``, amber where it stopped on request, red otherwise."""
        self.bar.bar_style = "warning" if stopped else ("success" if ok else "danger")
        if ok and not stopped:
            self.bar.value = self.bar.max
        self.label.value = html.escape(text)
