"""TrainPanel and ComparePanel without a browser: real training of the tiny model (a few steps),
results and figures checked against the library's own objects."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

import widgets.train as train_module
import workbench.sessions.train as train_session
from widgets import ComparePanel, PanelInputError, TrainPanel
from workbench.train import Comparison, compare, load_comparison
from workbench.plots import train as train_plots
from workbench.train import Backend, RunStatus


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> TrainPanel:
    panel = TrainPanel(model="tiny", backends=("eager", "ortmodule"), max_steps=6,
                       run_dir=tmp_path_factory.mktemp("train-panel"))
    panel.run()
    return panel


def test_train_panel_result_is_the_comparison(trained: TrainPanel) -> None:
    c = trained.result
    assert isinstance(c, Comparison)
    assert [r.backend for r in c.runs] == [Backend.EAGER, Backend.ORTMODULE]
    assert all(r.status is RunStatus.OK for r in c.runs), [r.reason for r in c.runs]
    assert c.run(Backend.ORTMODULE).executed_in_onnxruntime
    assert [len(r.steps) for r in c.runs] == [6, 6]
    assert trained.error is None and "ortmodule ok (in ONNX Runtime)" in trained.status.value
    assert (Path(trained.options["run_dir"]) / "train" / "compare.json").is_file()  # the run layout, as the demo writes


def test_train_panel_draws_the_library_loss_curves(trained: TrainPanel) -> None:
    expected = train_plots.loss_curves(trained.result)
    got = trained.figure
    assert [t.name for t in got.data] == [t.name for t in expected.data]
    for g, e in zip(got.data, expected.data):
        assert list(g.x) == list(e.x) and list(g.y) == pytest.approx(list(e.y))
    eager = trained.result.run("eager")
    assert list(got.data[0].y) == pytest.approx(eager.losses)


def test_train_panel_tables_and_progress(trained: TrainPanel) -> None:
    html = trained.runs_html.value
    assert html.count("<tr>") == 1 + len(trained.result.runs)
    assert "ortmodule" in html and "eager" in html
    ort = trained.result.run("ortmodule")
    assert ort.graphs is not None and ort.graphs.stages
    for stage in ort.graphs.stages:
        assert stage.name in trained.graphs_html.value
    assert trained.progress.bar.max == trained.result.runs[-1].total_steps
    assert trained.progress.bar.bar_style == "success"
    assert set(trained.checkpoints()) == {"eager checkpoint", "ortmodule checkpoint"}
    assert all(Path(p).is_dir() for p in trained.checkpoints().values())


def test_train_panel_opens_a_saved_run_without_training(trained: TrainPanel, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_training(*args, **kwargs):
        raise AssertionError("opening a saved run must not train")

    monkeypatch.setattr(train_session, "run_comparison", no_training)
    saved = TrainPanel(saved=trained.options["run_dir"])
    assert isinstance(saved.result, Comparison)
    assert [r.losses for r in saved.result.runs] == [r.losses for r in trained.result.runs]
    assert "opened" in saved.status.value
    assert len(saved.figure.data) == len(trained.figure.data)


def test_train_panel_error_is_shown_and_the_panel_recovers(tmp_path: Path) -> None:
    panel = TrainPanel(model=str(tmp_path / "no-such-model"), backends=("eager",), max_steps=2, run_dir=tmp_path / "run")
    with pytest.raises(ValueError):
        panel.run()
    assert "no-such-model" in panel.error_box.value
    assert "nothing is downloaded" in panel.error_box.value  # the library's fix is shown
    assert not panel.busy and not panel.run_button.disabled
    panel.set_values(model="tiny")
    result = panel.run()
    assert panel.error is None and result.runs[0].status is RunStatus.OK


def test_train_panel_rejects_bad_controls(tmp_path: Path) -> None:
    panel = TrainPanel(run_dir=tmp_path)
    panel.set_values(backends=())
    with pytest.raises(PanelInputError, match="backends is empty"):
        panel.run()
    assert "select at least one of eager, ortmodule, compile" in panel.error_box.value
    with pytest.raises(PanelInputError, match=r"preset must be one of \['quick', 'demo', 'full'\], got 'huge'"):
        panel.set_values(preset="huge")
    with pytest.raises(PanelInputError, match="backends must be one of"):
        TrainPanel(backends=("eager", "onnx"))
    with pytest.raises(TypeError, match="did you mean 'max_steps'"):
        TrainPanel(max_step=3)


def test_train_panel_config_follows_the_controls(tmp_path: Path) -> None:
    panel = TrainPanel(run_dir=tmp_path)
    panel.set_values(model="minilm", preset="demo", max_steps=7)
    cfg = panel.config()
    assert (cfg.model, cfg.max_steps, cfg.lr) == ("minilm", 7, train_module.TrainConfig.demo().lr)


def test_live_curve_and_stop_from_the_buttons(tmp_path: Path) -> None:
    panel = TrainPanel(model="tiny", backends=("eager",), max_steps=400, run_dir=tmp_path)
    # The panel's own progress bar tells the test where the run is: on step 3 the observer (called
    # in the training thread) hands over and holds the run there until the test has pressed Stop.
    # No clock is involved; pytest-timeout ends the test if the run never gets there.
    at_step_3, go_on = threading.Event(), threading.Event()

    def on_bar(change) -> None:
        if change["new"] == 3 and not at_step_3.is_set():
            at_step_3.set()
            go_on.wait()

    panel.progress.bar.observe(on_bar, names="value")
    panel.on_busy(lambda p: p.busy or at_step_3.set())  # a run that ends early does not leave the test waiting
    panel.run_button.click()  # background thread, as in JupyterLab
    at_step_3.wait()
    try:
        assert panel.error is None, panel.error
        assert panel.busy and panel.run_button.disabled and not panel.stop_button.disabled
        live = panel.figure.data
        assert len(live) == 1 and live[0].meta["kind"] == "live" and list(live[0].x) == [1, 2, 3]
        assert "step 3/400" in panel.progress.label.value and "left" in panel.progress.label.value
        panel.stop_button.click()
    finally:
        go_on.set()
    panel.wait()
    assert not panel.busy
    run = panel.result.runs[0]
    assert run.status is RunStatus.STOPPED
    assert len(run.steps) == 3, "stopped at the check before step 4"
    assert panel.progress.bar.bar_style == "warning" and "stopped on request" in panel.progress.label.value


def test_compare_panel_is_blocked_without_runs() -> None:
    panel = ComparePanel()
    assert panel.run_button.disabled and "a training run" in panel.notice.value
    with pytest.raises(RuntimeError, match="cannot run yet"):
        panel.run()


def _shifted(c: Comparison, backend: str, by: float) -> Comparison:
    """``c``'s runs with every step loss of ``backend`` moved by ``by`` (a defect of known size),
    compared again (a Comparison carries the ratios computed from its runs)."""
    runs = [dataclasses.replace(r, steps=[dataclasses.replace(s, loss=s.loss + by) for s in r.steps])
            if r.backend.value == backend else r for r in c.runs]
    return compare(runs, baseline=c.baseline)


def test_compare_panel_shows_and_recomputes(trained: TrainPanel) -> None:
    panel = ComparePanel(comparison=trained.result)
    assert not panel.run_button.disabled
    c = panel.result
    assert c is panel.input
    table = panel.table_html.value
    assert "eager (baseline)" in table and table.count("<tr>") == 1 + len(c.summaries)
    # eager and ORTModule, fp32, dropout off: the curves agree (measured drift 6e-8, tolerance 1e-4)
    assert c.loss_parity and "loss curves agree" in table and "DIFFER" not in table

    panel.set_values(baseline="ortmodule", tolerance=0.0)
    flipped = panel.run()
    assert flipped.baseline is Backend.ORTMODULE
    assert "ortmodule (baseline)" in panel.table_html.value
    eager_ratio = flipped.ratio("eager")
    original = c.ratio("ortmodule")
    assert eager_ratio.throughput == pytest.approx(1.0 / original.throughput)


def test_compare_panel_shows_a_loss_defect_and_the_tolerance_decides(trained: TrainPanel) -> None:
    """ORTModule's losses moved by 0.01 by hand: the default fp32 tolerance (1e-4) flags it, a
    tolerance of 0.02 given in the panel accepts it."""
    panel = ComparePanel(comparison=_shifted(trained.result, "ortmodule", 0.01))
    assert panel.result.ratio("ortmodule").max_loss_diff == pytest.approx(0.01, abs=1e-5)
    assert not panel.result.loss_parity and "loss curves DIFFER" in panel.table_html.value
    panel.set_values(tolerance=0.02)
    loose = panel.run()
    assert loose.tolerance == 0.02 and loose.loss_parity
    assert "loss curves agree" in panel.table_html.value
    panel.set_values(tolerance=0.005)
    assert not panel.run().loss_parity and "loss curves DIFFER" in panel.table_html.value


def test_compare_panel_figures_switch_in_place(trained: TrainPanel) -> None:
    panel = ComparePanel(comparison=trained.result)
    fig = panel.figure
    for name, builder in train_module.FIGURES.items():
        panel.controls["figure"].value = name
        expected = builder(panel.result)
        assert panel.figure is fig
        assert [t.type for t in fig.data] == [t.type for t in expected.data]
        assert fig.layout.title.text == expected.layout.title.text


def test_compare_panel_opens_a_saved_comparison(trained: TrainPanel) -> None:
    path = Path(trained.options["run_dir"]) / "train" / "compare.json"
    panel = ComparePanel(comparison=path)
    assert panel.result.ratios == load_comparison(path).ratios
    with pytest.raises(TypeError, match="Comparison"):
        ComparePanel(comparison=42)
