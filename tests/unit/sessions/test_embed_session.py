"""EmbedSession without a widget: a tiny sentence-transformers folder exported, fused, quantized with
one preset and scored on a sliced built-in retrieval task through the session, into its run folder;
a folder that is not an embedding model refused naming the model, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.embed_fixtures import make_tiny_st_folder
from workbench.embed.audit import EmbedAuditConfig, EmbedQuantRun
from workbench.models.load import minilm_path
from workbench.runs.lock import LOCK_FILE
from workbench.sessions.base import InputError
from workbench.sessions.embed import STEPS, EmbedSession

QUICK = EmbedAuditConfig(presets=("dynamic",), max_queries=4, max_docs=30, n_boot=100, time_speed=False,
                         reference_check=False)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return make_tiny_st_folder(tmp_path_factory.mktemp("tiny-st"))


@pytest.mark.slow
def test_quantize_keeps_the_run_written_into_the_run_folder(tiny_folder: Path, tmp_path: Path) -> None:
    steps = []
    run_dir = tmp_path / "run"
    s = EmbedSession(model=tiny_folder, run_dir=lambda: run_dir,  # given as a function, as a notebook Workbench shares it
                     progress=lambda done, total, eta, detail: steps.append((done, total)))
    run = s.quantize(QUICK)
    assert isinstance(run, EmbedQuantRun) and s.result is run and s.history == [run]
    assert run.out_dir == run_dir / "embed" and run.export.validation.passed
    embed = (run_dir / "embed").resolve()
    assert Path(run.export.onnx_path).is_relative_to(embed)
    assert [v.name for v in run.evaluation.variants] == ["fused", "dynamic"]
    assert all(Path(v.path).is_file() and Path(v.path).resolve().is_relative_to(embed) for v in run.variants.variants)
    assert (run_dir / LOCK_FILE).read_text() == "", "the run folder's lock is released after the run"
    done = [d for d, total in steps if total == len(STEPS)]
    assert len(done) == len(steps) >= 2 and done == sorted(done) and done[0] == 1 and done[-1] == len(STEPS), \
        f"the stages reached, in order, from the export to the end: {steps}"
    saved = json.loads((Path(run.export.onnx_path).parent / "embed_export.json").read_text())
    assert saved["validation"]["min_cosine"] >= saved["validation"]["threshold"], "the export is saved beside its graph"


def test_a_folder_that_is_not_an_embedding_model_is_refused_naming_the_model(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"model folder '.*no-such-folder' does not exist; give a sentence-transformers folder"):
        EmbedSession(model=tmp_path / "no-such-folder", run_dir=tmp_path / "run")
    s = EmbedSession(model=minilm_path(), run_dir=tmp_path / "run")
    not_st = tmp_path / "not-st"
    not_st.mkdir()
    with pytest.raises(InputError, match=r"modules.json \(not a sentence-transformers folder\)"):
        s.model = not_st
    assert s.model == minilm_path(), "a refused folder leaves the model as it was"
    with pytest.raises(InputError, match="no embedding model: pass model= a sentence-transformers folder"):
        EmbedSession(run_dir=tmp_path / "run").quantize(QUICK)
    assert not (tmp_path / "run").exists() and s.result is None
