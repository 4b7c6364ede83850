"""EmbedSession without a widget: a tiny sentence-transformers folder exported, fused, quantized with
one preset and scored on a sliced built-in retrieval task through the session, into its run folder;
the search within an NDCG@10 budget kept on the session, written under the run folder while holding
its lock; a folder that is not an embedding model, or a search with nothing to search, refused in one
line before anything is written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.helpers.embed_fixtures import make_tiny_st_folder
from workbench.embed.audit import EmbedAuditConfig, EmbedQuantRun
from workbench.models.load import minilm_path
from workbench.quant import QuantConfig, SearchResult
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
                     progress=lambda done, total, eta, detail: steps.append((done, total, detail)))
    run = s.quantize(QUICK)
    assert isinstance(run, EmbedQuantRun) and s.result is run and s.history == [run]
    assert run.out_dir == run_dir / "embed" and run.export.validation.passed
    embed = (run_dir / "embed").resolve()
    assert Path(run.export.onnx_path).is_relative_to(embed)
    assert [v.name for v in run.evaluation.variants] == ["fused", "dynamic"]
    assert all(Path(v.path).is_file() and Path(v.path).resolve().is_relative_to(embed) for v in run.variants.variants)
    assert (run_dir / LOCK_FILE).read_text() == "", "the run folder's lock is released after the run"
    done = [d for d, total, _ in steps if total == len(STEPS)]
    assert len(done) == len(steps) >= 2 and done == sorted(done) and done[0] == 1 and done[-1] == len(STEPS), \
        f"the stages reached, in order, from the export to the end: {steps}"
    # while each graph encodes: its rows, rows per second and where, at the encoding step
    rows = [(d, detail) for d, _, detail in steps if detail.startswith("scoring dynamic: ")]
    assert rows and all(d == STEPS.index("encoding") + 1 for d, _ in rows), steps
    last = rows[-1][1]
    total = int(last.split(": ")[1].split("/")[1].split(" ")[0])
    assert last.startswith(f"scoring dynamic: {total}/{total} rows, ") and " rows/s, " in last and last.endswith("this process")

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


@pytest.mark.slow
def test_search_keeps_its_result_written_under_the_run_folder_while_holding_its_lock(tiny_folder: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    seen = []  # (done, total, detail, the lock file's text at that moment)

    def progress(done, total, eta, detail):
        lock = run_dir / LOCK_FILE
        seen.append((done, total, detail, lock.read_text() if lock.is_file() else ""))

    s = EmbedSession(model=tiny_folder, run_dir=run_dir, progress=progress)
    found = s.search(dataclasses.replace(QUICK, min_ndcg_ratio=0.5, max_slice_drop=0.5), max_excluded=2)
    assert isinstance(found, SearchResult) and s.search_result is found and found.metric == "ndcg@10"
    assert isinstance(s.result, EmbedQuantRun) and s.result.search is found, "the quantization it ran on is kept too"
    dynamic = f"model/{QuantConfig.preset('dynamic').label}"
    assert [c.name for c in found.candidates] == ["model/fp32", dynamic], "a loose budget: the preset as it is"
    assert found.out_dir == (run_dir / "embed" / "search").resolve() and (found.out_dir / "search.json").is_file()
    searching = [x for x in seen if x[2].startswith("search ")]
    assert [x[2].split(":")[0] for x in searching] == ["search 1/2", "search 2/2"], seen
    assert all(lock for *_, lock in searching), "the search writes while the run folder's lock is held"
    assert (run_dir / LOCK_FILE).read_text() == "", "and releases it after"
    assert seen[-1][0] == seen[-1][1] and seen[-1][2] == "done"


def test_a_search_with_nothing_to_search_is_refused_in_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    s = EmbedSession(model=minilm_path(), run_dir=run_dir)
    refused = [
        (lambda: EmbedSession(run_dir=run_dir).search(QUICK), "no embedding model: pass model= a sentence-transformers folder"),
        (lambda: s.search(dataclasses.replace(QUICK, presets=())), "search presets is empty: select at least one preset"),
        (lambda: s.search(QUICK, max_excluded=-1), r"max_excluded must be 0 or more \(nodes the search may leave in FP32\), got -1"),
        (lambda: s.search(dataclasses.replace(QUICK, data=str(tmp_path / "texts.csv"))),
         r"has no queries: give queries= a pairs file, or data='builtin'"),
    ]
    for call, message in refused:
        with pytest.raises(InputError, match=message) as exc:
            call()
        assert "\n" not in str(exc.value)
    assert s.search_result is None and s.result is None and not run_dir.exists(), "refused before anything was written"
