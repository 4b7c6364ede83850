"""The workshop checkpoint cache (workbench.teaching.workshop): trained once, reused, retrained when the
recipe changes, never half-written. With the tiny model and a two-step recipe (seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.teaching import workshop
from workbench.train import TrainConfig

RECIPE = TrainConfig.quick(max_steps=2, eval_every=0, save_graphs=False)


@pytest.fixture
def calls(monkeypatch):
    """Counts the trainings ensure_finetuned starts (the real run_training still runs)."""
    import workbench.train as train  # workshop looks run_training up on the package when it trains

    real = train.run_training
    seen = []

    def counting(cfg, backend, *a, **kw):
        seen.append((cfg, backend))
        return real(cfg, backend, *a, **kw)

    monkeypatch.setattr(train, "run_training", counting)
    return seen


def test_trains_once_then_returns_the_cached_checkpoint(tmp_path: Path, calls) -> None:
    lines: list[str] = []
    first = workshop.ensure_finetuned(recipe=RECIPE, home=tmp_path, log=lines.append)
    assert len(calls) == 1
    assert first == workshop.cache_dir(RECIPE, home=tmp_path)
    assert first.parent == tmp_path / "finetuned" and first.name.startswith("tiny-")
    assert {"config.json", "model.safetensors", "tokenizer.json", workshop.INFO_FILE} <= {p.name for p in first.iterdir()}
    info = workshop.load_info(first)
    assert info.recipe == RECIPE and info.backend == "eager" and info.steps == 2
    assert info.recipe_hash == workshop.recipe_hash(RECIPE) and 0.0 <= info.val_accuracy <= 1.0
    assert any("step 2/2" in line for line in lines), lines  # progress reached the learner
    # readable by the other accounts of a room sharing the cache (safetensors writes 0600)
    import os

    mask = os.umask(0)
    os.umask(mask)
    assert {p.name: p.stat().st_mode & 0o777 for p in first.iterdir()} == {p.name: 0o666 & ~mask for p in first.iterdir()}

    mtime = (first / "model.safetensors").stat().st_mtime_ns
    again = workshop.ensure_finetuned(recipe=RECIPE, home=tmp_path, log=lines.append)
    assert again == first and len(calls) == 1  # no second training
    assert (first / "model.safetensors").stat().st_mtime_ns == mtime
    # nothing else left beside it: no temporary folders (only the lock file)
    assert sorted(p.name for p in first.parent.iterdir() if p != first) == [f".{first.name}.lock"]

    from workbench.models.load import load_model

    loaded = load_model(str(first))
    assert loaded.num_labels == 2


def test_a_changed_recipe_is_trained_again_into_its_own_folder(tmp_path: Path, calls) -> None:
    a = workshop.ensure_finetuned(recipe=RECIPE, home=tmp_path, log=None)
    b = workshop.ensure_finetuned(recipe=RECIPE.replace(lr=5e-4), home=tmp_path, log=None)
    assert len(calls) == 2 and a != b and a.exists() and b.exists()
    assert workshop.recipe_hash(RECIPE, "eager") != workshop.recipe_hash(RECIPE, "ortmodule")  # the backend is part of the key


def test_a_failed_training_leaves_nothing_and_the_next_call_trains(tmp_path: Path, monkeypatch) -> None:
    import workbench.train as train

    real = train.run_training

    def crash_after_training(cfg, backend, run_dir=None, **kw):
        real(cfg, backend, run_dir=run_dir, **kw)  # the checkpoint is written in the scratch folder...
        raise KeyboardInterrupt  # ...then the learner presses Stop before it is moved into place

    monkeypatch.setattr(train, "run_training", crash_after_training)
    with pytest.raises(KeyboardInterrupt):
        workshop.ensure_finetuned(recipe=RECIPE, home=tmp_path, log=None)
    folder = workshop.cache_dir(RECIPE, home=tmp_path)
    assert not folder.exists()
    assert [p.name for p in folder.parent.iterdir()] == [f".{folder.name}.lock"]  # scratch removed

    monkeypatch.setattr(train, "run_training", real)
    assert workshop.ensure_finetuned(recipe=RECIPE, home=tmp_path, log=None) == folder
    assert workshop.is_cached(folder)


def test_an_incomplete_folder_is_not_taken_for_a_checkpoint(tmp_path: Path, calls) -> None:
    folder = workshop.cache_dir(RECIPE, home=tmp_path)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")  # e.g. copied by hand, no finetuned.json
    assert not workshop.is_cached(folder)
    assert workshop.ensure_finetuned(recipe=RECIPE, home=tmp_path, log=None) == folder
    assert len(calls) == 1 and workshop.is_cached(folder)


def test_a_failed_run_raises_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    import dataclasses

    import workbench.train as train

    real = train.run_training

    def failing(cfg, backend, **kw):
        run = real(cfg, backend, **kw)
        return dataclasses.replace(run, status=train.RunStatus.FAILED, reason="out of memory (test)")

    monkeypatch.setattr(train, "run_training", failing)
    with pytest.raises(workshop.WorkshopError, match="out of memory \\(test\\)"):
        workshop.ensure_finetuned(recipe=RECIPE, home=tmp_path, log=None)
    assert not workshop.cache_dir(RECIPE, home=tmp_path).exists()


def test_the_default_recipe_is_the_demos() -> None:
    from workbench.workflows.demo import DemoConfig

    demo = DemoConfig.default().train
    recipe = workshop.workshop_recipe("minilm")
    assert recipe == demo.replace(save_graphs=False)
    assert workshop.workshop_recipe("tiny") == demo.replace(model="tiny", save_graphs=False)
    # the key follows the recipe: any change to the demo's numbers is a new checkpoint
    assert workshop.recipe_hash(recipe) != workshop.recipe_hash(recipe.replace(max_steps=(recipe.max_steps or 1) + 1))


def test_home_comes_from_the_argument_then_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(workshop.HOME_ENV, str(tmp_path / "env-home"))
    assert workshop.workbench_home() == tmp_path / "env-home"
    assert workshop.workbench_home(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(workshop.HOME_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert workshop.workbench_home() == tmp_path / "xdg" / "ort-workbench"


def test_the_old_home_variable_is_still_read_with_a_note(tmp_path: Path, monkeypatch, capsys) -> None:
    from workbench.core import home

    monkeypatch.delenv(home.HOME_ENV, raising=False)
    monkeypatch.setattr(home, "_NOTED", [])
    monkeypatch.setenv("ORT_WORKBENCH_HOME", str(tmp_path / "old"))
    assert home.HOME_ENV == "WORKBENCH_HOME"
    assert home.workbench_home() == tmp_path / "old"
    assert home.workbench_home() == tmp_path / "old"
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and "ORT_WORKBENCH_HOME is the old name of WORKBENCH_HOME" in note
    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "new"))
    assert home.workbench_home() == tmp_path / "new"  # the new name wins


def test_bad_input_says_what_to_do(tmp_path: Path) -> None:
    from workbench.models.load import ModelError

    with pytest.raises(ValueError, match="disagree"):
        workshop.ensure_finetuned("minilm", recipe=RECIPE, home=tmp_path)
    with pytest.raises(TypeError, match="TrainConfig"):
        workshop.ensure_finetuned(recipe={"model": "tiny"}, home=tmp_path)
    with pytest.raises(ModelError, match="neither a built-in model"):
        workshop.workshop_model(str(tmp_path / "no-such-model"))


def test_workshop_model_passes_a_folder_through(tiny_checkpoint: Path) -> None:
    assert workshop.workshop_model(str(tiny_checkpoint)) == str(tiny_checkpoint)


def test_the_cli_prepares_the_checkpoint(tmp_path: Path, capsys, monkeypatch) -> None:
    from workbench import cli

    monkeypatch.setattr(workshop, "workshop_recipe", lambda model="minilm": RECIPE.replace(model=model))
    assert cli.main(["workshop", "--model", "tiny", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    folder = workshop.cache_dir(RECIPE, home=tmp_path)
    assert str(folder) in out and workshop.is_cached(folder)
    assert cli.main(["workshop", "--model", "tiny", "--home", str(tmp_path)]) == 0
    assert "already prepared" in capsys.readouterr().out
