"""TrainPanel and ComparePanel without a browser: real training of the tiny model (a few steps),
results and figures checked against the library's own objects."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import widgets.train as train_module
from widgets import ComparePanel, PanelInputError, TrainPanel
from workbench.compare import Comparison, load_comparison
from workbench.plots import train as train_plots
from workbench.train import Backend, RunStatus


def wait_for(condition, timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds (a background thread is working), failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


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
    assert (Path(trained.options["run_dir"]) / "compare.json").is_file()


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

    monkeypatch.setattr(train_module, "run_comparison", no_training)
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
    panel.run_button.click()  # background thread, as in JupyterLab
    wait_for(lambda: panel.busy, 10, "the run to start")
    wait_for(lambda: len(panel.figure.data) == 1 and len(panel.figure.data[0].x or ()) >= 3, 90, "live loss points")
    assert panel.figure.data[0].meta["kind"] == "live"
    assert "step" in panel.progress.label.value and "left" in panel.progress.label.value
    assert not panel.stop_button.disabled
    panel.stop_button.click()
    panel.wait(60)
    assert not panel.busy
    run = panel.result.runs[0]
    assert run.status is RunStatus.STOPPED
    assert 3 <= len(run.steps) < 400
    assert panel.progress.bar.bar_style == "warning" and "stopped on request" in panel.progress.label.value


def test_compare_panel_is_blocked_without_runs() -> None:
    panel = ComparePanel()
    assert panel.run_button.disabled and "a training run" in panel.notice.value
    with pytest.raises(RuntimeError, match="cannot run yet"):
        panel.run()


def test_compare_panel_shows_and_recomputes(trained: TrainPanel) -> None:
    panel = ComparePanel(comparison=trained.result)
    assert not panel.run_button.disabled
    c = panel.result
    assert c is panel.input
    table = panel.table_html.value
    assert "eager (baseline)" in table and table.count("<tr>") == 1 + len(c.summaries)
    assert ("loss curves agree" in table) == c.loss_parity

    panel.set_values(tolerance=1e-12)
    strict = panel.run()
    assert strict.tolerance == 1e-12
    expected = all(r.max_loss_diff <= 1e-12 for r in strict.ratios)
    assert strict.loss_parity == expected
    assert ("loss curves DIFFER" in panel.table_html.value) == (not expected)

    panel.set_values(baseline="ortmodule", tolerance=0.0)
    flipped = panel.run()
    assert flipped.baseline is Backend.ORTMODULE
    assert "ortmodule (baseline)" in panel.table_html.value
    eager_ratio = flipped.ratio("eager")
    original = c.ratio("ortmodule")
    assert eager_ratio.throughput == pytest.approx(1.0 / original.throughput)


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
    path = Path(trained.options["run_dir"]) / "compare.json"
    panel = ComparePanel(comparison=path)
    assert panel.result.ratios == load_comparison(path).ratios
    with pytest.raises(TypeError, match="Comparison"):
        ComparePanel(comparison=42)
