"""Training figures, read through fig.data / fig.layout (no pixels). Runs are built by hand, so
these tests are instant and the expected values are known."""

from __future__ import annotations


import plotly.graph_objects as go
import pytest

from workbench.train import FP32_TOLERANCE, compare
from workbench.plots.train import COLORS, loss_curves, step_time_distribution, throughput_memory_bars
from workbench.train import Backend, EvalRecord, RunStatus, StepRecord, TrainConfig, TrainRun


def _run(backend: str, step_s: float, peak: float, losses=None, status=RunStatus.OK, startup=2.0) -> TrainRun:
    losses = losses or [0.7 - 0.01 * i for i in range(12)]
    steps = [StepRecord(i + 1, loss, startup if i == 0 else step_s, 16 / step_s, 1e-3, 16) for i, loss in enumerate(losses)]
    return TrainRun(
        backend=Backend(backend), status=status, reason="" if status is RunStatus.OK else "because",
        executed_in_onnxruntime=backend == "ortmodule" and status is RunStatus.OK, steps=steps,
        evals=[EvalRecord(6, 0.66, 0.7, 128, 0.1), EvalRecord(12, 0.6, 0.75, 128, 0.1)],
        peak_memory_mib=peak, startup_s=startup, total_s=30.0, checkpoint_dir=None, graphs=None,
        config=TrainConfig.quick(max_steps=len(losses)), total_steps=len(losses),
    )


@pytest.fixture
def cmp():
    return compare([_run("eager", 0.1, 1000.0), _run("ortmodule", 0.2, 1250.0), _run("compile", 0.05, 800.0, startup=40.0)])


def test_loss_curves_overlay_train_and_validation(cmp):
    fig = loss_curves(cmp)
    assert isinstance(fig, go.Figure)
    train = [t for t in fig.data if t.meta["kind"] == "train"]
    val = [t for t in fig.data if t.meta["kind"] == "validation"]
    assert [t.meta["backend"] for t in train] == ["eager", "ortmodule", "compile"]
    assert list(train[1].y) == cmp.run("ortmodule").losses and list(train[1].x) == list(range(1, 13))
    assert list(val[0].x) == [6, 12] and list(val[0].y) == [0.66, 0.6]
    assert train[0].line.color == COLORS[Backend.EAGER]
    assert f"max |Δloss| 0.0e+00 (within {FP32_TOLERANCE:g})" in fig.layout.title.text
    assert fig.layout.xaxis.title.text == "optimizer step"


def test_loss_curves_flag_a_curve_outside_tolerance():
    eager = _run("eager", 0.1, 1000.0)
    off = _run("ortmodule", 0.2, 1000.0, losses=[x + 0.005 for x in eager.losses])
    fig = loss_curves([eager, off])  # a list of runs is compared on the fly
    assert f"max |Δloss| 5.0e-03 (OUTSIDE {FP32_TOLERANCE:g})" in fig.layout.title.text


def test_step_time_distribution_leaves_out_start_up(cmp):
    fig = step_time_distribution(cmp)
    boxes = {t.meta["backend"]: t for t in fig.data}
    assert set(boxes) == {"eager", "ortmodule", "compile"}
    assert all(isinstance(t, go.Box) for t in fig.data)
    # 12 steps: the first two (start-up, recompile) are excluded
    assert list(boxes["compile"].y) == pytest.approx([50.0] * 10)
    assert boxes["compile"].meta["startup_s"] == 40.0
    assert any("start-up 40.0 s" in a.text for a in fig.layout.annotations)


def test_throughput_memory_bars_carry_the_ratios(cmp):
    fig = throughput_memory_bars(cmp)
    thr, mem = fig.data
    assert thr.meta["unit"] == "samples/s" and mem.meta["unit"] == "MiB"
    assert list(thr.x) == ["eager", "ortmodule", "compile"]
    assert list(thr.y) == pytest.approx([160.0, 80.0, 320.0])
    assert list(thr.text) == ["1.00x (baseline)", "0.50x", "2.00x"]
    assert list(mem.text) == ["1.00x (baseline)", "0.80x", "1.25x"]  # >1 is better: less memory
    assert "higher is better" in fig.layout.annotations[0].text and "lower is better" in fig.layout.annotations[1].text


def test_a_fallen_back_run_gets_no_bar_height_and_says_why():
    c = compare([_run("eager", 0.1, 1000.0), _run("ortmodule", 0.1, 900.0, status=RunStatus.FELL_BACK)])
    thr, mem = throughput_memory_bars(c).data
    assert list(thr.x) == ["eager", "ortmodule (fell_back)"]
    assert thr.y[1] == 0 and thr.text[1] == "no ratio: fell_back" and mem.text[1] == "no ratio: fell_back"
    curves = loss_curves(c)
    assert curves.data[2].name == "ortmodule (fell_back) train" and curves.data[2].line.dash == "dot"


def test_empty_input_is_rejected():
    with pytest.raises(ValueError, match="no runs to plot"):
        loss_curves([])
