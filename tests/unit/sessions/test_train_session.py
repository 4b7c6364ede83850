"""TrainSession and CompareSession without a widget: the tiny model trained a few steps with eager and
ORTModule through the session into its run folder, the comparison recomputed against another baseline
with nothing retrained, and bad inputs refused naming the input before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench.sessions.train as train_session
from workbench.runs.lock import LOCK_FILE
from workbench.sessions.base import InputError
from workbench.sessions.train import CompareSession, TrainSession
from workbench.train import Backend, CompareConfig, Comparison, RunStatus, TrainConfig, TrainConfigError, load_comparison

STEPS = 4


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> TrainSession:
    steps = []
    s = TrainSession(run_dir=tmp_path_factory.mktemp("train-session"),
                     progress=lambda done, total, eta, detail: steps.append((done, total, detail)))
    s.train(TrainConfig.quick(max_steps=STEPS, eval_every=2), CompareConfig(backends=("eager", "ortmodule")))
    s.steps = steps
    return s


@pytest.mark.train
@pytest.mark.slow
def test_train_keeps_the_comparison_written_into_the_run_folder(trained: TrainSession) -> None:
    c = trained.result
    assert isinstance(c, Comparison) and trained.history == [c]
    assert [r.backend for r in c.runs] == [Backend.EAGER, Backend.ORTMODULE]
    assert all(r.status is RunStatus.OK for r in c.runs), [r.reason for r in c.runs]
    assert [len(r.steps) for r in c.runs] == [STEPS, STEPS] and c.run("ortmodule").executed_in_onnxruntime
    run = Path(trained.run_dir)
    assert load_comparison(run / "train" / "compare.json").ratios == c.ratios
    assert (run / LOCK_FILE).read_text() == "", "the run folder's lock is released after training"
    ckpts = trained.checkpoints()
    assert set(ckpts) == {"eager checkpoint", "ortmodule checkpoint"}
    assert all(Path(p).is_dir() and Path(p).is_relative_to(run / "train") for p in ckpts.values())
    reported = [(done, total) for done, total, detail in trained.steps if detail.startswith("eager:")]
    assert reported and reported[-1] == (STEPS, STEPS), "every backend's steps reach the session's progress"


@pytest.mark.train
@pytest.mark.slow
def test_a_saved_comparison_is_opened_and_compared_again_without_training(trained: TrainSession, monkeypatch) -> None:
    def no_training(*args, **kwargs):
        raise AssertionError("opening or comparing a saved run must not train")

    monkeypatch.setattr(train_session, "run_comparison", no_training)
    opened = TrainSession().open(trained.run_dir)
    assert [r.losses for r in opened.runs] == [r.losses for r in trained.result.runs]
    s = CompareSession(comparison=Path(trained.run_dir) / "train" / "compare.json")
    as_trained = s.result
    assert s.input is as_trained and as_trained.baseline is Backend.EAGER
    flipped = s.compare("ortmodule", tolerance=0.5)
    assert flipped.baseline is Backend.ORTMODULE and flipped.tolerance == 0.5
    assert flipped.run_dir == as_trained.run_dir and s.result is flipped and s.history == [as_trained, flipped]
    assert flipped.ratio("eager").throughput == pytest.approx(1.0 / as_trained.ratio("ortmodule").throughput)


def test_bad_inputs_are_refused_naming_the_input_before_anything_is_written(tmp_path: Path) -> None:
    s = TrainSession(run_dir=tmp_path / "run")
    with pytest.raises(TrainConfigError, match="backends must name at least one of eager, ortmodule, compile"):
        CompareConfig(backends=())  # the config refuses it when made
    emptied = CompareConfig(backends=("eager",))
    object.__setattr__(emptied, "backends", ())  # and the session when one was emptied after it was made
    with pytest.raises(InputError, match="backends is empty: select at least one of eager, ortmodule, compile"):
        s.train(TrainConfig.quick(), emptied)
    with pytest.raises(TypeError, match="cfg must be a workbench.train.TrainConfig, got dict"):
        s.train({"model": "tiny"}, CompareConfig(backends=("eager",)))
    assert not (tmp_path / "run").exists() and s.result is None
    c = CompareSession()
    with pytest.raises(InputError, match="no runs to compare: train first"):
        c.compare("eager")
    exported_only = tmp_path / "exported-only"  # a run folder holding another stage's result
    (exported_only / "export").mkdir(parents=True)
    (exported_only / "export" / "export.json").write_text("{}")
    with pytest.raises(InputError, match=r"holds no comparison \(compare.json\): run that step first"):
        c.set_input(exported_only)
    assert c.input is None and c.result is None
