"""The panel base every stage panel is built on.

A panel is a view over a session (:mod:`workbench.sessions`): the session holds the stage's inputs,
its results, caches, servers, run folder, stop event and progress callback, and runs the stage
through the library; the panel holds input controls, a Run button (and a Stop button for long
work), a progress bar, an error box and one place where results are drawn (a ``go.FigureWidget``
updated in place, or HTML widgets whose value is replaced). ``panel.session`` is that session;
``panel.result`` reads the session's latest result (the panel keeps none of its own), and the
options named in the session's ``INPUTS`` (``graph``, ``data``, ``run_dir``, ...) are the session's.

Subclasses set ``SESSION`` (their session class) and implement three hooks:

``_build_controls(options) -> dict[str, Widget]``
    the input widgets, keyed by option name (``panel.controls[name]``);
``_compute(values) -> result``
    one call into the session with the control values (the session reports progress to the bar
    and reads the Stop button's event);
``_draw(result)``
    update the figures and tables in place.

Behaviour shared by every panel:

* keyword arguments are checked: a misspelled one is a ``TypeError`` naming the allowed ones;
* while busy the Run button and the controls are disabled, Stop is enabled;
* an error is shown inside the panel (what went wrong, the message with its fix, the traceback
  folded away), kept on ``panel.error``, and the panel keeps working: change a control, run again;
* :meth:`Panel.run` is synchronous (tests and notebooks call it); the Run button calls it in a
  background thread when ``background=True`` so that Stop and the progress bar stay live;
* its state is observed the traitlets way: ``busy``, and ``generation`` (one more after every
  successful run or :meth:`Panel.show`, so an observer hears of each result even when it equals
  the one before): ``panel.observe(handler, names="generation")``, then read ``panel.result``.
  :meth:`Panel.on_result` / :meth:`Panel.on_busy` are that call, for a handler that takes the panel.
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import threading
import time
from collections.abc import MutableMapping
from typing import Any, Callable, ClassVar, Iterator, Mapping, Optional, Sequence

import ipywidgets as W
import traitlets

from workbench.sessions.base import InputError, Session

from .display import (  # noqa: F401  (the panels' drawing helpers, imported from here by every panel)
    FAIL_COLOUR,
    MUTED_COLOUR,
    OK_COLOUR,
    WARN_COLOUR,
    Markup,
    ProgressView,
    coloured,
    error_html,
    fmt,
    format_seconds,
    html_table,
    replace_figure,
)

#: A control value a panel cannot use; the message names the value, what is allowed and what to do
#: (the sessions' :class:`~workbench.sessions.base.InputError`: one kind of error, whoever found it).
PanelInputError = InputError


def check_kwargs(owner: str, given: Mapping[str, Any], allowed: Sequence[str]) -> None:
    """Raise ``TypeError`` for keyword arguments not in ``allowed``, suggesting the closest name."""
    unknown = [k for k in given if k not in allowed]
    if not unknown:
        return
    hints = []
    for k in unknown:
        close = difflib.get_close_matches(k, allowed, n=1)
        hints.append(f"{k!r} (did you mean {close[0]!r}?)" if close else repr(k))
    raise TypeError(
        f"{owner}() got unexpected keyword argument(s) {', '.join(hints)}; "
        f"allowed: {', '.join(sorted(allowed))}"
    )


def check_choice(name: str, value: Any, allowed: Sequence[Any]) -> Any:
    """Return ``value`` if it is one of ``allowed``, else raise a :class:`PanelInputError`."""
    if value not in allowed:
        raise PanelInputError(f"{name} must be one of {list(allowed)}, got {value!r}")
    return value


def check_range(name: str, value: Any, low: float, high: float, hint: str = "") -> Any:
    """Return ``value`` if ``low <= value <= high``, else raise a :class:`PanelInputError` (a bounded
    control would otherwise clamp it silently)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise PanelInputError(f"{name} must be a number from {low} to {high}, got {value!r}" + (f"; {hint}" if hint else ""))
    return value


def config_default(cls: type, name: str) -> Any:
    """The default of field ``name`` of the config dataclass ``cls`` (an enum as its value): a panel's
    option defaults are read from the configs, never written twice."""
    field = next((f for f in dataclasses.fields(cls) if f.name == name), None)
    if field is None:
        raise AttributeError(f"{cls.__name__} has no field {name!r}")
    value = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
    return getattr(value, "value", value)


class BoundOptions(MutableMapping):
    """A panel's options: those its session holds (the session's ``INPUTS``) are read from and written
    to the session; the rest (the controls' starting values) are the panel's own."""

    def __init__(self, session: Session, values: Mapping[str, Any]) -> None:
        self.session = session
        self._own: dict[str, Any] = {}
        self._keys: list[str] = []
        for key, value in values.items():
            self[key] = value

    def __getitem__(self, key: str) -> Any:
        if key in self.session.INPUTS and key in self._keys:
            return getattr(self.session, key)
        return self._own[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self.session.INPUTS:
            setattr(self.session, key, value)
        else:
            self._own[key] = value
        if key not in self._keys:
            self._keys.append(key)

    def __delitem__(self, key: str) -> None:
        self._keys.remove(key)
        self._own.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


class Panel(W.VBox):
    """Base class of every panel (see the module docstring for the contract)."""

    #: Option name -> default; the constructor accepts exactly these (plus ``background``).
    OPTIONS: ClassVar[dict[str, Any]] = {}
    #: Title shown at the top of the panel.
    TITLE: ClassVar[str] = ""
    #: What the panel does, one line under the title.
    HELP: ClassVar[str] = ""
    #: Label of the Run button.
    RUN_LABEL: ClassVar[str] = "Run"
    #: Whether the work can be stopped (shows a Stop button and passes ``stop_event``).
    STOPPABLE: ClassVar[bool] = False
    #: The session class this panel binds its controls to.
    SESSION: ClassVar[type[Session]] = Session

    #: Whether the panel is working (observe it to follow runs).
    busy = traitlets.Bool(False)
    #: One more after every successful run or :meth:`show` (observe it to hear of every result).
    generation = traitlets.Int(0)

    def __init__(self, **kwargs: Any) -> None:
        allowed = [*self.OPTIONS, "background"]
        check_kwargs(type(self).__name__, kwargs, allowed)
        self.background: bool = bool(kwargs.pop("background", True))
        #: The stage's work: inputs, results, caches, servers, run folder, stop event, progress.
        self.session: Session = type(self).SESSION(progress=self.progress_callback)
        self.options: MutableMapping[str, Any] = BoundOptions(self.session, {**self.OPTIONS, **kwargs})
        #: The last error (``None`` after a successful run).
        self.error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        self._actions: list[tuple[W.Button, str]] = []
        self._started = 0.0
        #: Why the panel cannot run yet ("" when it can); see :meth:`block`.
        self.blocked = ""

        self.controls: dict[str, W.Widget] = self._build_controls(self.options)
        self.header = W.HTML(self._header_html())
        self.run_button = W.Button(description=self.RUN_LABEL, button_style="primary", icon="play")
        self.stop_button = W.Button(description="Stop", icon="stop", disabled=True)
        self.stop_button.layout.display = None if self.STOPPABLE else "none"
        self.status = W.HTML("")
        self.notice = W.HTML("")
        self.progress = ProgressView()
        self.error_box = W.HTML("", layout=W.Layout(display="none"))
        self.run_button.on_click(self._on_run_clicked)
        self.stop_button.on_click(lambda _b: self.stop())
        self.run_button.add_class("wb-run")
        self.stop_button.add_class("wb-stop")
        self.add_class("wb-panel")
        self.add_class(f"wb-{type(self).__name__.lower()}")
        self._button_row = W.HBox([self.run_button, self.stop_button, self.status])
        super().__init__(
            [
                self.header,
                self.notice,
                self._controls_box(),
                self._button_row,
                self.progress,
                self.error_box,
                *self._build_views(),
            ]
        )

    @property
    def result(self) -> Any:
        """The session's latest result (``None`` until a run or :meth:`show` succeeds)."""
        return self.session.result

    @property
    def stop_event(self) -> threading.Event:
        """The session's stop event (set by Stop; the library reads it)."""
        return self.session.stop_event

    # ---- hooks for subclasses ----------------------------------------------------------------
    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        return {}

    def _build_views(self) -> list[W.Widget]:
        """The widgets results are drawn into (figures, tables), below the error box."""
        return []

    def _compute(self, values: dict[str, Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement _compute")

    def _draw(self, result: Any) -> None:
        """Redraw the views from ``result``."""

    def _summary(self, result: Any) -> str:
        """One line for the status next to the Run button after a successful run."""
        return "done"

    def _summary_colour(self, result: Any) -> str:
        """Colour of that line (a result can be a finding, e.g. a failed check or a large drift)."""
        return OK_COLOUR

    # ---- layout helpers --------------------------------------------------------------------
    def _header_html(self) -> str:
        title = f"<h3 style=\"margin:4px 0\">{html.escape(self.TITLE)}</h3>" if self.TITLE else ""
        text = f"<div style=\"color:{MUTED_COLOUR}\">{html.escape(self.HELP)}</div>" if self.HELP else ""
        return title + text

    def _controls_box(self) -> W.Widget:
        return W.VBox(list(self.controls.values()))

    # ---- reading controls --------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        """The current control values, keyed by option name."""
        return {name: w.value for name, w in self.controls.items() if hasattr(w, "value")}

    def set_values(self, **values: Any) -> None:
        """Set controls by option name (``TypeError`` for unknown names, a clear error for bad values)."""
        check_kwargs(f"{type(self).__name__}.set_values", values, list(self.controls))
        for name, value in values.items():
            widget = self.controls[name]
            options = getattr(widget, "options", None)
            free_text = isinstance(widget, W.Combobox) and not widget.ensure_option
            if options is not None and not free_text:
                labels = [o[1] if isinstance(o, tuple) else o for o in options]
                for item in (value if isinstance(widget, W.SelectMultiple) else [value]):
                    check_choice(name, item, labels)
            widget.value = tuple(value) if isinstance(widget, W.SelectMultiple) else value

    # ---- running ---------------------------------------------------------------------------
    def run(self) -> Any:
        """Read the controls, compute (the session keeps the result), redraw; return the result.

        On error the exception is shown in the panel, kept on :attr:`error` and re-raised to the
        caller (the Run button keeps it in the panel only); the panel stays usable.
        """
        return self._execute(self._compute, self._draw, self._summary, self._summary_colour)

    def _execute(
        self,
        compute: Callable[[dict[str, Any]], Any],
        draw: Callable[[Any], None],
        summary: Callable[[Any], str],
        colour: Callable[[Any], str],
        keep: Optional[Callable[[Any], Any]] = None,
    ) -> Any:
        """The shared run protocol for the main action and any extra action of a panel; ``keep``
        (default ``session.keep``) is how the session keeps what ``compute`` returned."""
        if self.busy:
            raise RuntimeError(f"{type(self).__name__} is already running; wait for it or press Stop")
        if self.blocked:
            raise RuntimeError(f"{type(self).__name__} cannot run yet: {self.blocked}")
        self._set_busy(True)
        self.error = None
        self.error_box.value = ""
        self.error_box.layout.display = "none"
        self.session.start()
        self.progress.start()
        self._started = time.perf_counter()
        step = "reading the controls"
        try:
            values = self.values()
            step = "computing"
            result = compute(values)
            step = "drawing the result"
            result = (keep or self.session.keep)(result)
            draw(result)
        except BaseException as exc:
            self._show_error(exc, step)
            stopped = self.stop_event.is_set()
            self.progress.finish("stopped on request, then failed" if stopped else "failed", ok=False, stopped=stopped)
            raise
        finally:
            self._set_busy(False)
        elapsed = time.perf_counter() - self._started
        if self.stop_event.is_set():
            self.progress.finish(f"stopped on request after {format_seconds(elapsed)}; the result holds what was done",
                                 stopped=True)
        else:
            self.progress.finish(f"done in {format_seconds(elapsed)}")
        self.status.value = self._status_html(summary(result), colour(result))
        self._notify()
        return result

    def add_action(self, label: str, method: Callable[[], Any], icon: str = "", tooltip: str = "") -> W.Button:
        """A button for an extra action of the panel: it calls ``method`` (a public, synchronous
        method built on :meth:`_execute`) like the Run button calls :meth:`run`."""
        button = W.Button(description=label, icon=icon, tooltip=tooltip, disabled=bool(self.blocked),
                          layout=W.Layout(width="auto"))
        button.add_class("wb-action")
        button.on_click(lambda _b: self._start(method))
        self._actions.append((button, label))
        row = self._button_row.children  # run, actions..., stop, status
        self._button_row.children = (*row[:-2], button, *row[-2:])
        return button

    def block(self, reason: Optional[str]) -> None:
        """Disable the panel's actions with a notice saying what input is missing (None: unblock)."""
        self.blocked = reason or ""
        self.notice.value = (
            f'<div class="wb-notice" style="color:{WARN_COLOUR};padding:4px 0">Waiting: {html.escape(reason)}</div>'
            if reason else ""
        )
        self._set_busy(self.busy)

    def show(self, result: Any) -> None:
        """Show a result computed elsewhere (a saved run, another panel) without recomputing."""
        self.error = None
        self.error_box.layout.display = "none"
        try:
            result = self._open(result)
            self._draw(result)
        except BaseException as exc:
            self._show_error(exc, "drawing the result")
            raise
        self.status.value = self._status_html(f"opened: {self._summary(result)}", self._summary_colour(result))
        self._notify()

    def _open(self, result: Any) -> Any:
        """Give a result computed elsewhere to the session (subclasses read saved files here)."""
        return self.session.keep(result)

    def stop(self) -> None:
        """Ask the running work to stop at its next check (the library reads ``stop_event``)."""
        self.session.stop()
        self.status.value = self._status_html("stopping at the next step ...", WARN_COLOUR)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Wait for a run started by the Run button in the background to finish."""
        if self._thread is not None:
            self._thread.join(timeout)

    def on_result(self, callback: Callable[["Panel"], None]) -> None:
        """Call ``callback(panel)`` after each successful run or :meth:`show` (an observer of
        ``generation``)."""
        self.observe(lambda _change: callback(self), names="generation")

    def on_busy(self, callback: Callable[["Panel"], None]) -> None:
        """Call ``callback(panel)`` whenever the panel starts or stops working (an observer of ``busy``)."""
        self.observe(lambda _change: callback(self), names="busy")

    def progress_callback(self, done: int, total: int, eta_s: Optional[float] = None, detail: str = "") -> None:
        """Update the progress bar (subclasses adapt their library's progress objects to this)."""
        self.progress.update(done, total, eta_s, detail)

    # ---- internals -------------------------------------------------------------------------
    def _on_run_clicked(self, _button: Any = None) -> None:
        self._start(self.run)

    def _start(self, method: Callable[[], Any]) -> None:
        """Call ``method`` for a button: in a background thread when ``background`` is on."""
        if self.busy or self.blocked:
            return
        if self.background:
            self._thread = threading.Thread(target=self._call_from_button, args=(method,),
                                            name=f"{type(self).__name__}.{getattr(method, '__name__', 'run')}", daemon=True)
            self._thread.start()
        else:
            self._call_from_button(method)

    @staticmethod
    def _call_from_button(method: Callable[[], Any]) -> None:
        try:
            method()
        except BaseException:  # noqa: BLE001 - _execute has shown it in the panel and kept it on .error
            pass

    def _set_busy(self, busy: bool) -> None:
        idle = not busy and not self.blocked
        self.run_button.disabled = not idle
        self.run_button.description = "Running ..." if busy else self.RUN_LABEL
        for button, _label in self._actions:
            button.disabled = not idle
        self.stop_button.disabled = not busy
        for widget in self.controls.values():
            if hasattr(widget, "disabled"):
                widget.disabled = busy
        if busy:
            self.status.value = self._status_html("running ...", MUTED_COLOUR)
        self.busy = busy  # last: observers see the buttons and controls already switched

    def _show_error(self, exc: BaseException, step: str) -> None:
        self.error = exc
        self.error_box.value = error_html(exc, step)
        self.error_box.layout.display = None
        self.status.value = self._status_html(f"failed: {type(exc).__name__}", FAIL_COLOUR)

    def _notify(self) -> None:
        self.generation += 1

    @staticmethod
    def _status_html(text: str, colour: str) -> str:
        return f'<span class="wb-status" style="color:{colour};margin-left:8px">{html.escape(text)}</span>'

    def close(self) -> None:
        """Stop the session's servers (if any) and close the widgets."""
        session = getattr(self, "session", None)  # absent when the constructor refused its arguments
        if session is not None:
            session.close()
        super().close()
