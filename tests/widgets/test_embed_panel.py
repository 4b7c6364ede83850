"""The quantization panel given an embedding model: built by QuantPanel(model=...), runs the real
export / quantization / scoring on a sliced built-in task, and draws its figures."""

from __future__ import annotations

import pytest

from widgets.base import PanelInputError
from widgets.embed import EmbedQuantPanel
from widgets.quant import QuantPanel
from workbench.models.load import minilm_path


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
    r = panel.run()
    assert panel.error is None and r.evaluation is not None
    assert [v.name for v in r.evaluation.variants] == ["fused", "dynamic-per-channel"]
    assert "dynamic-per-channel" in panel.table_html.value
    assert {t.name for t in panel.figure.data} == {"fused", "dynamic-per-channel"}
    panel.set_values(figure="cosine")
    assert panel.figure.data[0].type == "box"
    panel.set_values(figure="speed")
    assert "Not timed" in panel.figure.layout.title.text
