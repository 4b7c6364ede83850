"""The Workbench's panels with an encoder other than BERT: the case users hit, a DistilBERT saved
with a BERT WordPiece tokenizer (which produces token_type_ids that DistilBERT's forward() does
not take), fine-tuned with eager PyTorch and ORTModule, exported, fused and quantized from the
panels, without a browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from widgets import Workbench
from widgets.workbench import DONE


@pytest.fixture(scope="module")
def distil_with_bert_tokenizer(tmp_path_factory) -> Path:
    from transformers import AutoModelForSequenceClassification

    from workbench.workflows import coverage as zoo

    root = tmp_path_factory.mktemp("distil")
    folder = zoo.build_tiny("distilbert", root / "distilbert")
    mixed = root / "distilbert-bert-tokenizer"
    AutoModelForSequenceClassification.from_pretrained(str(folder)).save_pretrained(str(mixed))
    tok = zoo.build_tokenizer("bert")
    assert "token_type_ids" in tok(["a film"])  # what used to reach forward() and fail
    tok.save_pretrained(str(mixed))
    return mixed


def test_every_step_of_the_workbench_runs_a_distilbert_with_a_bert_tokenizer(distil_with_bert_tokenizer, tmp_path):
    wb = Workbench(model=str(distil_with_bert_tokenizer), backends=("eager", "ortmodule"), max_steps=2, n_boot=100,
                   fusion_preset="inspect_only", runs_root=tmp_path, background=False)
    wb.run_all()
    titles = [wb.accordion.get_title(i) for i in range(len(wb.steps))]
    assert all(t.startswith(DONE) for t in titles[1:]), titles
    runs = {r.backend.value: r for r in wb.train.result.runs}
    assert set(runs) == {"eager", "ortmodule"} and all(r.status == "ok" for r in runs.values()), \
        {b: r.reason for b, r in runs.items()}
    assert runs["ortmodule"].executed_in_onnxruntime

    export = wb.graph.export_result
    assert export.model_info.model_type == "distilbert"
    assert export.input_names == ["input_ids", "attention_mask"]
    assert export.validation.passed, export.validation.message
    html = wb.graph.summary_html.value
    assert "distilbert" in html and "<code>input_ids, attention_mask</code>" in html
    assert wb.graph.result.fused_op_counts.get("Attention") == 2 and wb.graph.result.diagnoses == []

    quant = wb.quant.result
    assert Path(quant.source_path) == Path(wb.graph.result.fused_path)
    assert quant.validation.passed and quant.validation.n_examples > 0
    assert {"negation", "class:rotten", "class:fresh"} <= {d.slice for d in quant.report.slices}
