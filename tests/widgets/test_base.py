"""The panel base, without a browser: kwargs checking, busy state, errors shown in the panel and
recovery, progress, stop, the Run button in the foreground and in a background thread."""

from __future__ import annotations

import threading
from typing import Any

import ipywidgets as W
import plotly.graph_objects as go
import pytest

from widgets.base import Panel, PanelInputError, ProgressView, check_kwargs, format_seconds, replace_figure


class EchoPanel(Panel):
    """A panel whose one call is a function the test gives it (the base is what is under test)."""

    OPTIONS = {"n": 3, "mode": "square", "fn": None}
    TITLE = "Echo"
    STOPPABLE = True

    def _build_controls(self, options: dict[str, Any]) -> dict[str, W.Widget]:
        return {
            "n": W.IntText(value=options["n"], description="n"),
            "mode": W.Dropdown(options=["square", "cube"], value=options["mode"], description="mode"),
        }

    def _build_views(self) -> list[W.Widget]:
        self.figure = go.FigureWidget()
        return [self.figure]

    def _compute(self, values: dict[str, Any]) -> Any:
        seen = {"busy": self.busy, "run_disabled": self.run_button.disabled, "stop_disabled": self.stop_button.disabled,
                "controls_disabled": all(w.disabled for w in self.controls.values())}
        out = self.options["fn"](values, self)
        return {"values": values, "seen": seen, "out": out}

    def _draw(self, result: Any) -> None:
        y = result["out"]
        replace_figure(self.figure, go.Figure(go.Scatter(x=list(range(len(y))), y=y, name=result["values"]["mode"])))


def powers(values: dict[str, Any], panel: Panel) -> list[int]:
    if values["n"] < 0:
        raise PanelInputError(f"n must be 0 or more, got {values['n']}; set n to a count of points")
    p = 2 if values["mode"] == "square" else 3
    return [i**p for i in range(values["n"])]


def test_unknown_kwarg_is_a_type_error_naming_the_allowed_ones() -> None:
    with pytest.raises(TypeError) as info:
        EchoPanel(fn=powers, nn=3)
    message = str(info.value)
    assert "'nn'" in message and "did you mean 'n'?" in message
    for name in ("n", "mode", "fn", "background"):
        assert name in message


def test_check_kwargs_accepts_known_names() -> None:
    check_kwargs("X", {"a": 1}, ["a", "b"])
    with pytest.raises(TypeError, match="allowed: a, b"):
        check_kwargs("X", {"zzz": 1}, ["a", "b"])


def test_run_stores_result_and_draws_in_place() -> None:
    panel = EchoPanel(fn=powers)
    figure_before = panel.figure
    result = panel.run()
    assert panel.result is result
    assert result["out"] == [0, 1, 4]
    assert list(panel.figure.data[0].y) == [0, 1, 4]
    panel.set_values(n=4, mode="cube")
    panel.run()
    assert panel.figure is figure_before, "the figure is updated in place, not replaced"
    assert len(panel.figure.data) == 1, "traces are replaced, not piled up"
    assert list(panel.figure.data[0].y) == [0, 1, 8, 27]
    assert panel.figure.data[0].name == "cube"
    assert "done" in panel.status.value


def test_busy_state_while_computing_and_released_after() -> None:
    panel = EchoPanel(fn=powers)
    result = panel.run()
    assert result["seen"] == {"busy": True, "run_disabled": True, "stop_disabled": False, "controls_disabled": True}
    assert not panel.busy and not panel.run_button.disabled and panel.stop_button.disabled
    assert not any(w.disabled for w in panel.controls.values())


def test_error_is_shown_in_the_panel_and_the_panel_keeps_working() -> None:
    panel = EchoPanel(fn=powers)
    panel.run()
    good = panel.result
    panel.set_values(n=-2)
    with pytest.raises(PanelInputError):
        panel.run()
    assert isinstance(panel.error, PanelInputError)
    assert panel.error_box.layout.display != "none"
    assert "InputError" in panel.error_box.value
    assert "n must be 0 or more, got -2" in panel.error_box.value
    assert "traceback" in panel.error_box.value
    assert panel.result is good, "a failed run keeps the last good result"
    assert not panel.busy and not panel.run_button.disabled
    assert "failed" in panel.status.value
    panel.set_values(n=2)
    panel.run()
    assert panel.error is None and panel.error_box.layout.display == "none"
    assert panel.result["out"] == [0, 1]


def test_error_message_is_html_escaped() -> None:
    def bad(values, panel):
        raise ValueError("<script>alert(1)</script> is not a model")

    panel = EchoPanel(fn=bad)
    with pytest.raises(ValueError):
        panel.run()
    assert "<script>" not in panel.error_box.value
    assert "&lt;script&gt;" in panel.error_box.value


def test_set_values_rejects_unknown_names_and_bad_choices() -> None:
    panel = EchoPanel(fn=powers)
    with pytest.raises(TypeError, match="allowed: mode, n"):
        panel.set_values(m=1)
    with pytest.raises(PanelInputError, match=r"mode must be one of \['square', 'cube'\], got 'quartic'"):
        panel.set_values(mode="quartic")


def test_button_runs_in_foreground_and_keeps_errors_in_the_panel() -> None:
    def bad(values, panel):
        raise RuntimeError("graph could not be built; load the model with attn_implementation='eager'")

    panel = EchoPanel(fn=bad, background=False)
    panel.run_button.click()  # must not raise: the error belongs to the panel
    assert isinstance(panel.error, RuntimeError)
    assert "attn_implementation=&#x27;eager&#x27;" in panel.error_box.value


def test_button_runs_in_a_background_thread_and_stop_reaches_the_work() -> None:
    # The work and the test hand over through events, never a clock: a busy machine only makes it
    # slower (pytest-timeout ends it if a hand-over never comes).
    started, release = threading.Event(), threading.Event()

    def long_work(values, panel):
        started.set()
        steps, labels = 0, []
        while not panel.stop_event.is_set():
            release.wait()
            steps += 1
            panel.progress_callback(steps, 100, eta_s=42.0, detail="loss 0.5")
            labels.append(panel.progress.label.value)
        return labels

    panel = EchoPanel(fn=long_work)
    panel.run_button.click()
    try:
        started.wait()
        assert panel.busy and panel.run_button.disabled and not panel.stop_button.disabled
        panel.run_button.click()  # a second click while busy does nothing
        panel.stop_button.click()
    finally:
        release.set()
    panel.wait()
    assert not panel.busy
    assert panel.result is not None and panel.error is None
    assert panel.result["out"] == ["step 1/100 · loss 0.5 · 42 s left"], "stopped after the first step"
    assert panel.progress.bar.bar_style == "warning"
    assert panel.progress.label.value.startswith("stopped on request after")
    assert panel.progress.bar.value == 1, "the bar stays where the work stopped"


def test_run_while_busy_is_refused() -> None:
    panel = EchoPanel(fn=powers)
    panel.busy = True
    with pytest.raises(RuntimeError, match="already running"):
        panel.run()


def test_show_draws_a_saved_result_without_computing() -> None:
    calls = []

    def counting(values, panel):
        calls.append(values)
        return [1]

    panel = EchoPanel(fn=counting)
    panel.show({"values": {"mode": "square"}, "seen": {}, "out": [5, 6, 7]})
    assert calls == []
    assert list(panel.figure.data[0].y) == [5, 6, 7]
    assert "opened" in panel.status.value


def test_on_result_listeners_are_called() -> None:
    seen = []
    panel = EchoPanel(fn=powers)
    panel.on_result(lambda p: seen.append(p.result["out"]))
    panel.run()
    assert seen == [[0, 1, 4]]


def test_progress_view_text() -> None:
    view = ProgressView()
    view.update(3, 10, eta_s=75, detail="loss 0.41")
    assert view.bar.value == 3 and view.bar.max == 10
    assert view.label.value == "step 3/10 · loss 0.41 · 1 min 15 s left"
    assert format_seconds(None) == "?"
    assert format_seconds(3 * 3600 + 120) == "3 h 02 min"


def test_panel_state_is_traitlets_observed_the_traitlets_way() -> None:
    """busy and generation are traits: observers hear each run, also one that repeats the result, and
    read the result from the session (the panel keeps none)."""
    panel = EchoPanel(fn=powers)
    results, busy, generations = [], [], []
    panel.observe(lambda ch: results.append(panel.result["out"]), names="generation")
    panel.observe(lambda ch: busy.append((ch["new"], panel.run_button.disabled)), names="busy")
    panel.observe(lambda ch: generations.append(ch["new"]), names="generation")
    panel.run()
    panel.run()  # the same values: the same result again
    assert results == [[0, 1, 4], [0, 1, 4]]
    assert generations == [1, 2]
    assert panel.session.history == [panel.session.result] * 2 and panel.session.history[0] is not panel.session.history[1]
    # busy went on and off twice, and observers saw the Run button already switched
    assert busy == [(True, True), (False, False), (True, True), (False, False)]
