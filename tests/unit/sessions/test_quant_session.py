"""QuantSession without a widget: quantize the fused tiny graph (its export found through the report),
score the FP32 graph once and reuse it, re-quantize without the worst nodes, search within budgets,
and load the data once."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench.sessions.quant as quant_session
from workbench.data.load import DataConfig
from workbench.quant import DEFAULT_BUDGET_PER_SLICE, QuantResult, SearchResult, worst_nodes
from workbench.sessions.base import InputError
from workbench.sessions.quant import QuantSession


@pytest.fixture(scope="module")
def session(tmp_path_factory, fused_tiny, quick_data) -> QuantSession:
    s = QuantSession(graph=fused_tiny, data=quick_data, run_dir=tmp_path_factory.mktemp("quant-session"))
    s.quantize("dynamic", n_boot=100)
    return s


def test_quantize_keeps_the_result_by_name(session: QuantSession, fused_tiny) -> None:
    r = session.history[0]  # the fixture's quantization (other tests here add to the history, in any order)
    assert isinstance(r, QuantResult) and r.name == "dynamic-qint8" and session.results[r.name] is r
    assert session.result is session.history[-1]
    assert list(session.results) == list(dict.fromkeys(h.name for h in session.history))
    assert Path(r.source_path) == Path(fused_tiny.fused_path)
    assert Path(r.out_dir).parent == Path(session.run_dir) / "quantize"


def test_the_fp32_baseline_is_scored_once(session: QuantSession, monkeypatch) -> None:
    def no(*args, **kwargs):
        raise AssertionError("the FP32 graph was scored again")

    monkeypatch.setattr(quant_session, "prepare_baseline", no)
    first = session.history[0]
    assert session.baseline() is not None
    again = session.requantize(worst_k=1, n_boot=100)
    assert again.excluded_nodes == worst_nodes(first.node_errors, 1)
    search = session.search(("dynamic",), n_boot=100)
    assert isinstance(search, SearchResult) and session.search_result is search
    assert session.result is again, "a search does not replace the quantization"
    assert search.budget_per_slice == DEFAULT_BUDGET_PER_SLICE
    assert set(session.results) == {first.name, again.name}


def test_inputs_are_checked_and_nothing_is_written_without_a_graph(tmp_path: Path) -> None:
    s = QuantSession(run_dir=tmp_path / "run")
    with pytest.raises(InputError, match="no FP32 graph to quantize"):
        s.quantize("dynamic")
    with pytest.raises(InputError, match="nothing to re-quantize yet"):
        s.requantize()
    s.graph = tmp_path / "model.onnx"
    with pytest.raises(InputError, match="search candidates is empty"):
        s.search(())
    with pytest.raises(TypeError, match="export must be a workbench.graph.export.ExportResult"):
        s.export = 3
    assert not (tmp_path / "run").exists()


def test_a_data_config_is_loaded_once(monkeypatch, quick_data) -> None:
    calls = []
    monkeypatch.setattr("workbench.data.load.load_data", lambda cfg: calls.append(cfg) or quick_data)  # what a session loads with
    s = QuantSession(data=DataConfig.quick())
    assert s.dataset() is quick_data and s.dataset() is quick_data and len(calls) == 1
    s.data = DataConfig.quick()  # new data: loaded again when next needed
    s.dataset()
    assert len(calls) == 2
