"""The quantization panel given an embedding model: built by QuantPanel(model=...), runs the real
export / quantization / scoring on a sliced built-in task, and draws its figures; its "Search within
budget" button runs the search on the session and shows every candidate and the winner, and a search
with nothing to search is one line in the panel, which keeps working."""

from __future__ import annotations

import html

import pytest

from tests.helpers.embed_fixtures import make_tiny_st_folder, quantized_graphs_miss
from tests.widgets.test_panels_keep_no_results import results_held
from widgets.base import PanelInputError
from widgets.embed import EmbedQuantPanel
from widgets.quant import QuantPanel
from workbench.core.options import field_help
from workbench.embed.audit import EmbedAuditConfig
from workbench.models.load import minilm_path
from workbench.quant import SearchResult
from workbench.sessions.base import InputError


def test_quant_panel_with_an_embedding_model_is_the_embedding_panel():
    panel = QuantPanel(model=minilm_path(), presets=("dynamic",), background=False)
    assert isinstance(panel, EmbedQuantPanel) and not panel.blocked


def test_bad_options_name_the_fix(tmp_path):
    with pytest.raises(PanelInputError, match="presets"):
        EmbedQuantPanel(model=minilm_path(), presets=("int3",))
    (tmp_path / "modules.json").write_text("[]")
    with pytest.raises(PanelInputError, match="list of modules"):
        EmbedQuantPanel(model=tmp_path)
    assert EmbedQuantPanel().blocked


@pytest.mark.slow
@pytest.mark.heavy
def test_panel_runs_and_draws(tmp_path):
    panel = EmbedQuantPanel(model=minilm_path(), presets=("dynamic-per-channel",), max_queries=4, max_docs=30, n_boot=100,
                            time_speed=False, run_dir=tmp_path, background=False)
    labels: list = []
    panel.progress.label.observe(lambda change: labels.append(change["new"]), names="value")
    r = panel.run()
    assert panel.error is None and r.evaluation is not None
    # while a graph encoded, the bar's line said its rows, rows per second and where
    assert any(v.startswith("step 3/4 · scoring dynamic-per-channel: ") and " rows/s, this process" in v for v in labels), labels
    assert [v.name for v in r.evaluation.variants] == ["fused", "dynamic-per-channel"]
    assert "dynamic-per-channel" in panel.table_html.value
    assert {t.name for t in panel.figure.data} == {"fused", "dynamic-per-channel"}
    panel.set_values(figure="cosine")
    assert panel.figure.data[0].type == "box"
    panel.set_values(figure="speed")
    assert "Not timed" in panel.figure.layout.title.text


def test_a_search_with_no_preset_is_one_line_in_the_panel_which_keeps_working():
    panel = EmbedQuantPanel(model=minilm_path(), presets=("dynamic",), background=False)
    panel.set_values(presets=())
    panel.search_button.click()  # the button keeps the error in the panel
    assert isinstance(panel.error, InputError) and "\n" not in str(panel.error)
    assert "search presets is empty: select at least one preset" in panel.error_box.value
    assert panel.search is None and panel.result is None
    assert not panel.busy and not panel.search_button.disabled and not panel.run_button.disabled
    with pytest.raises(PanelInputError, match="max_excluded"):
        EmbedQuantPanel(model=minilm_path(), max_excluded=-1)
    # the search's limit is the config's field: its default and its help, not written twice
    assert panel.controls["max_excluded"].value == EmbedAuditConfig().max_excluded
    assert panel.controls["max_excluded"].tooltip == field_help(EmbedAuditConfig, "max_excluded")


@pytest.mark.slow
def test_search_button_shows_every_candidate_and_the_winner(tmp_path):
    from workbench.quant.choice import left_all_in_fp32

    from workbench.embed.retrieval import builtin_task

    folder = make_tiny_st_folder(tmp_path / "tiny")
    # a budget no change in the rankings meets, and a scorer under which every graph that still holds a quantized node
    # ranks the relevant documents last (whether a real INT8 graph moves a ranking depends on the CPU): static INT8
    # misses the budget until every quantized node is back in FP32
    panel = EmbedQuantPanel(model=folder, presets=("static",), max_queries=24, max_docs=60, n_boot=100, time_speed=False,
                            min_ndcg_ratio=1.0, max_slice_drop=0.0, max_excluded=64, run_dir=tmp_path / "run", background=False)
    with quantized_graphs_miss(builtin_task("plots", 24, 60, 0)):  # the panel's task: its defaults, 24 queries, 60 documents
        panel.search_button.click()
    assert panel.error is None, panel.error_box.value
    found = panel.search
    assert isinstance(found, SearchResult) and found is panel.session.search_result and results_held(panel) == []
    table = html.unescape(panel.search_html.value)
    assert table.count("<tr>") == 1 + len(found.candidates) >= 4  # the header, FP32, the preset and its re-quantizations
    for c in found.candidates:
        assert f">{c.name}<" in table
    assert "NDCG@10 of FP32's" in table and "reference" in table and found.message in table
    whole = [c for c in found.candidates if left_all_in_fp32(c)]
    assert len(whole) == 1 and whole[0] is found.candidates[-1] and found.chosen == "model/fp32"
    said = "with every quantized MatMul left in FP32 the graph is the FP32 graph"
    assert f"not an INT8 variant: {said} (not timed)" in table, "its speed cell says what it is, not a speed-up"
    assert found.message.startswith(f"no INT8 variant fits the budget: {said}")
    assert "search: no INT8 variant fits the budget" in panel.status.value and said in panel.status.value
    assert "static" in panel.table_html.value, "the quantization the search ran on is drawn too"
