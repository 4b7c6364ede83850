"""The coverage matrix: every supported encoder type, with its own tokenizer class, through export,
validation, fusion, dynamic INT8 and per-slice evaluation (workbench.workflows.coverage builds the tiny models
offline). The fused-op counts below were measured with onnxruntime 1.19.2's transformer optimizer
(model_type 'bert') on these tiny 2-layer models; docs/encoders.md's coverage matrix lists the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.workflows import coverage as zoo
from workbench.models.load import SUPPORTED_MODEL_TYPES, ModelError, load_model

# What each type's graph takes: the model's forward() and its own tokenizer decide, not BERT's.
GRAPH_INPUTS = {
    "bert": ["input_ids", "attention_mask", "token_type_ids"],
    "roberta": ["input_ids", "attention_mask"],
    "distilbert": ["input_ids", "attention_mask"],
    "xlm-roberta": ["input_ids", "attention_mask"],
    "electra": ["input_ids", "attention_mask", "token_type_ids"],
    "mpnet": ["input_ids", "attention_mask"],
    # DeBERTa-v3's tokenizer produces token_type_ids, but with type_vocab_size 0 the model never
    # reads them and the exporter drops the input.
    "deberta-v2": ["input_ids", "attention_mask"],
    "modernbert": ["input_ids", "attention_mask"],
}
TOKENIZER_CLASS = {
    "bert": "BertTokenizerFast", "roberta": "RobertaTokenizerFast", "distilbert": "DistilBertTokenizerFast",
    "xlm-roberta": "XLMRobertaTokenizerFast", "electra": "ElectraTokenizerFast", "mpnet": "MPNetTokenizerFast",
    "deberta-v2": "DebertaV2TokenizerFast", "modernbert": "PreTrainedTokenizerFast",
}
# transformers 5 has one tokenizer class per family (no separate fast class); ELECTRA's is BERT's, and a
# tokenizer without a family class is the generic TokenizersBackend
TOKENIZER_CLASS_V5 = {**{t: c.removesuffix("Fast") for t, c in TOKENIZER_CLASS.items()},
                      "electra": "BertTokenizer", "modernbert": "TokenizersBackend"}


def loaded_tokenizer_class(model_type: str) -> str:
    """The class a saved tiny tokenizer loads as with this stack's transformers."""
    import transformers

    return (TOKENIZER_CLASS_V5 if int(transformers.__version__.split(".")[0]) >= 5 else TOKENIZER_CLASS)[model_type]


def trains_here() -> bool:
    from workbench.doctor.checks import stack

    return stack() == "training"


BERT_FUSIONS = {"EmbedLayerNormalization": 1, "Attention": 2, "SkipLayerNormalization": 4, "BiasGelu": 2}
# Measured (2 layers): what the optimizer fused, and the fusions it could not, with a word the
# diagnosis' cause must contain (the part of the architecture that prevents it).
FUSED = {
    "bert": (BERT_FUSIONS, {}),
    "distilbert": (BERT_FUSIONS, {}),
    "electra": ({**BERT_FUSIONS, "Gelu": 1}, {}),  # + the classification head's GELU
    "roberta": ({"Attention": 2, "SkipLayerNormalization": 4, "BiasGelu": 2},
                {"EmbedLayerNormalization": "padding id"}),
    "xlm-roberta": ({"Attention": 2, "SkipLayerNormalization": 4, "BiasGelu": 2},
                    {"EmbedLayerNormalization": "padding id"}),
    # The embedding sum (word + position, no segment) + LayerNormalization fuses as a fifth SkipLayerNormalization.
    "mpnet": ({"SkipLayerNormalization": 5, "BiasGelu": 2},
              {"Attention": "relative-position bias", "EmbedLayerNormalization": "padding id"}),
    "deberta-v2": ({"SkipLayerNormalization": 4, "BiasGelu": 2, "Gelu": 1},  # + the pooler's GELU
                   {"Attention": "disentangled", "EmbedLayerNormalization": "no absolute position embedding"}),
    # GeGLU's GELU has no bias (one per layer) + the head's GELU.
    "modernbert": ({"SkipLayerNormalization": 4, "Gelu": 3},
                   {"Attention": "rotary", "EmbedLayerNormalization": "no position embedding"}),
}


# ORTModule fine-tuning (2 steps, fallback disabled), measured for every type by the benchmark and
# the slow test below; the matrix test trains the two that show both outcomes.
ORTMODULE = {t: "ok" for t in SUPPORTED_MODEL_TYPES if t != "modernbert"}
ORTMODULE["modernbert"] = "failed"
ORTMODULE_IN_MATRIX = ("distilbert", "modernbert")


def test_the_matrix_covers_every_supported_type():
    assert set(zoo.ZOO_TYPES) == set(SUPPORTED_MODEL_TYPES) == set(FUSED) == set(GRAPH_INPUTS)


def test_the_registry_entries_agree_with_what_was_measured():
    """One entry per architecture (workbench.models.architectures) feeds the models, the zoo, the optimizer's
    model type and the diagnosis; its claims must be what the exported graphs and fusions showed."""
    from workbench.models.architectures import ARCHITECTURES
    from workbench.graph.variants import optimizer_model_type

    for model_type, arch in ARCHITECTURES.items():
        assert list(arch.graph_inputs) == GRAPH_INPUTS[model_type], model_type
        assert set(arch.fusion_limits) == set(FUSED[model_type][1]), model_type
        assert arch.tokenizer_class == TOKENIZER_CLASS[model_type]
        assert optimizer_model_type(model_type) == arch.optimizer_model_type == "bert"
        # the offset quirk is the cause the diagnosis names for the missing embedding fusion
        assert arch.position_offset == ("padding id" in FUSED[model_type][1].get("EmbedLayerNormalization", "")), model_type


@pytest.fixture(scope="module")
def coverage(tmp_path_factory, quick_data):
    """run_coverage per type, computed once (the tokenizer vocabularies are trained once per style)."""
    rows = {}

    def get(model_type: str):
        if model_type not in rows:
            rows[model_type] = zoo.run_coverage(model_type, tmp_path_factory.mktemp(f"zoo-{model_type}"), quick_data,
                                                train_steps=2 if model_type in ORTMODULE_IN_MATRIX and trains_here() else 0)
        return rows[model_type]

    return get


@pytest.mark.parametrize("model_type", zoo.ZOO_TYPES)
def test_every_type_goes_through_export_fusion_int8_and_slices(coverage, model_type):
    row = coverage(model_type)
    assert row.tokenizer_class == loaded_tokenizer_class(model_type)
    assert row.graph_inputs == GRAPH_INPUTS[model_type]
    assert row.export_passed and row.export_max_abs_diff < 1e-5, row
    assert row.optimizer_model_type == "bert"
    fused, missing = FUSED[model_type]
    assert row.fused_ops == fused
    assert row.fused_passed
    assert set(row.not_fused) == set(missing)
    for fusion, word in missing.items():
        assert word in row.not_fused[fusion], row.not_fused[fusion]
    assert row.int8_passed and row.int8_quantized_nodes > 0
    assert 0.0 <= row.int8_agreement <= 1.0
    assert {"negation", "length:short", "class:rotten", "class:fresh"} <= set(row.slices)
    if model_type in ORTMODULE_IN_MATRIX and trains_here():  # the current stack has no ORTModule: export onwards only
        assert row.ortmodule.split(":")[0] == ORTMODULE[model_type], row.ortmodule
    else:
        assert row.ortmodule == "not run"


@pytest.mark.parametrize("model_type", zoo.ZOO_TYPES)
def test_each_family_tokenizer_is_its_own_class(tmp_path, model_type):
    from transformers import AutoTokenizer

    folder = zoo.build_tiny(model_type, tmp_path / model_type)
    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    assert type(tok).__name__ == loaded_tokenizer_class(model_type)
    enc = tok(["a dull, lifeless film"])
    ids = enc["input_ids"][0]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert tok.unk_token_id not in ids  # the vocabulary was trained on these reviews
    assert ("token_type_ids" in enc) == (model_type in ("bert", "electra", "deberta-v2"))
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == model_type and config["vocab_size"] == len(tok)


@pytest.mark.parametrize("style", [zoo.WORDPIECE_BERT, zoo.BPE_ROBERTA, zoo.UNIGRAM_XLMR], ids=lambda s: s.algorithm)
def test_training_a_vocabulary_prints_nothing(capfd, style):
    """The tokenizers trainers draw progress bars by default: off a terminal they print blank
    lines into the benchmark's table and the CLI's output."""
    texts = zoo.training_texts(200)
    tok = zoo.train_backend(style, texts, vocab_size=300)
    assert tok.get_vocab_size() > len(style.specials)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_inputs_follow_the_model_not_the_tokenizer(tmp_path, quick_data):
    """The case users hit: a DistilBERT saved with a BERT tokenizer (which produces token_type_ids)
    used to fail with "forward() got an unexpected keyword argument 'token_type_ids'"."""
    from transformers import AutoModelForSequenceClassification

    from workbench.graph import ExportConfig, run_export
    from workbench.graph import FusionConfig, run_fusion
    from workbench.train import TrainConfig, run_training

    folder = zoo.build_tiny("distilbert", tmp_path / "distil")
    bert_tok = zoo.build_tokenizer("bert")
    assert "token_type_ids" in bert_tok(["x"])
    mixed = tmp_path / "distil-bert-tokenizer"
    AutoModelForSequenceClassification.from_pretrained(str(folder)).save_pretrained(str(mixed))
    bert_tok.save_pretrained(str(mixed))

    result = run_export(str(mixed), ExportConfig.quick(validation_examples=8), tmp_path / "export", data=quick_data)
    assert result.input_names == ["input_ids", "attention_mask"]
    assert result.validation.passed, result.validation.message
    report = run_fusion(result, FusionConfig.inspect_only(variants=("unoptimized", "transformer")), tmp_path / "export")
    assert report.fused_op_counts == BERT_FUSIONS and report.all_passed
    run = run_training(TrainConfig.quick(model=str(mixed), max_steps=2, eval_every=2, save_graphs=False), "eager",
                       run_dir=tmp_path / "train")
    assert run.status == "ok", run.reason
    # trained with dropout off (DistilBERT's names: dropout, attention_dropout, seq_classif_dropout),
    # saved with the model's own values back, so a later fine-tune of the checkpoint has dropout
    original = json.loads((mixed / "config.json").read_text())
    saved = json.loads((Path(run.checkpoint_dir) / "config.json").read_text())
    for key in ("dropout", "attention_dropout", "seq_classif_dropout"):
        assert original[key] > 0 and saved[key] == original[key], key


def test_model_inputs_follow_forward_and_see_through_wrappers(tmp_path):
    import torch

    from workbench.data.batches import forward_parameters, model_inputs

    distil = load_model(str(zoo.build_tiny("distilbert", tmp_path / "d"))).model
    enc = {"token_type_ids": torch.zeros(1, 3), "attention_mask": torch.ones(1, 3), "input_ids": torch.ones(1, 3)}
    assert list(model_inputs(distil, enc)) == ["input_ids", "attention_mask"]

    class Wrap(torch.nn.Module):  # stands for DDP and ORTModule: the real model is ``.module``
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *args, **kwargs):
            return self.module(*args, **kwargs)

    assert forward_parameters(Wrap(distil)) == forward_parameters(distil)
    assert list(model_inputs(Wrap(distil), enc)) == ["input_ids", "attention_mask"]

    class AnyKeywords(torch.nn.Module):
        def forward(self, **kwargs):
            return kwargs

    assert set(model_inputs(AnyKeywords(), {**enc, "special_tokens_mask": enc["input_ids"]})) == set(enc)


@pytest.mark.parametrize("model_type", ["gpt2", "llama", "not-a-model", None])
def test_a_type_outside_the_list_gets_one_line_naming_the_types_that_work(tmp_path, capsys, monkeypatch, model_type):
    import workbench.data.load
    from workbench.cli import main

    def no_data(*args, **kwargs):
        raise AssertionError("the model type is checked before any data is read")

    monkeypatch.setattr(workbench.data.load, "load_data", no_data)
    folder = tmp_path / "m"
    folder.mkdir()
    config = {"vocab_size": 10} if model_type is None else {"model_type": model_type, "vocab_size": 10}
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["export", "--model", str(folder), "--preset", "quick", "--run-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"model type {model_type!r}" in err and "not supported" in err
    assert all(t in err for t in SUPPORTED_MODEL_TYPES)
    with pytest.raises(ModelError, match=f"model type {model_type!r}.*bert, roberta, distilbert"):
        load_model(str(folder))


@pytest.mark.parametrize("command", ["train", "compare"])
def test_training_commands_refuse_a_type_outside_the_list_in_one_line(tmp_path, capsys, monkeypatch, command):
    import workbench.data.load
    from workbench.cli import main

    def no_data(*args, **kwargs):
        raise AssertionError("the model type is checked before any data is read")

    monkeypatch.setattr(workbench.data.load, "load_data", no_data)
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 10}))
    assert main([command, "--model", str(folder), "--steps", "1", "--run-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "model type 'gpt2'" in err and all(t in err for t in SUPPORTED_MODEL_TYPES)
    assert not (tmp_path / "out").exists()


def test_modernbert_trains_eagerly_and_ortmodule_says_why_it_cannot(tmp_path, coverage):
    """Measured: ORTModule 1.19.2 cannot build ModernBERT's gradient graph (bias-free LayerNorms
    export with an empty bias input; every empty input's gradient is named '_grad'). The run
    fails with that reason and the fix, instead of a bare ONNX Runtime error; eager PyTorch trains it."""
    from workbench.train import TrainConfig, run_training

    row = coverage("modernbert")  # its ORTModule run (2 steps, fallback disabled)
    assert row.ortmodule.startswith("failed: ")
    assert "LayerNorms without a bias" in row.ortmodule and "eager or compile backend" in row.ortmodule
    folder = tmp_path / "mb"
    zoo.build_tiny("modernbert", folder)
    eager = run_training(TrainConfig.quick(model=str(folder), max_steps=2, eval_every=2, save_graphs=False), "eager",
                         run_dir=tmp_path / "eager")
    assert eager.status == "ok" and eager.final_accuracy is not None, eager.reason


@pytest.mark.slow
@pytest.mark.parametrize("model_type", [t for t in zoo.ZOO_TYPES if ORTMODULE[t] == "ok"])
def test_ortmodule_fine_tunes_every_other_type_in_onnxruntime(tmp_path, model_type):
    """Two ORTModule steps per type with the fallback to PyTorch disabled (conftest): the steps ran
    in ONNX Runtime, with finite losses."""
    import math

    from workbench.train import TrainConfig, run_training

    folder = zoo.build_tiny(model_type, tmp_path / model_type)
    run = run_training(TrainConfig.quick(model=str(folder), max_steps=2, eval_every=2, save_graphs=False), "ortmodule",
                       run_dir=tmp_path / "ort")
    assert run.status == "ok" and run.executed_in_onnxruntime, run.reason
    assert len(run.steps) == 2 and all(math.isfinite(s.loss) for s in run.steps)


@pytest.mark.slow
def test_modernbert_with_zero_layernorm_biases_trains_under_ortmodule(tmp_path, quick_data):
    """The workaround the failure message gives, measured: "norm_bias": true adds LayerNorm biases
    initialised to zero, so the model computes exactly what it did, and ORTModule trains it."""
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification

    from workbench.data.batches import encode
    from workbench.train import TrainConfig, run_training

    folder = zoo.build_tiny("modernbert", tmp_path / "mb")
    biased = tmp_path / "mb-norm-bias"
    shutil.copytree(folder, biased)
    config = json.loads((biased / "config.json").read_text())
    assert config["norm_bias"] is False
    (biased / "config.json").write_text(json.dumps({**config, "norm_bias": True}))

    before, after = (AutoModelForSequenceClassification.from_pretrained(str(f), attn_implementation="eager").eval()
                     for f in (folder, biased))
    enc = encode(load_model(str(folder)).tokenizer, quick_data["test"]["text"][:8], 64)
    with torch.no_grad():
        assert torch.equal(before(**enc).logits, after(**enc).logits)
    run = run_training(TrainConfig.quick(model=str(biased), max_steps=2, eval_every=2, save_graphs=False), "ortmodule",
                       run_dir=tmp_path / "ort")
    assert run.status == "ok" and run.executed_in_onnxruntime, run.reason


def test_the_documented_matrix_is_the_committed_measurement_and_what_these_tests_assert():
    """The coverage table of docs/encoders.md, the benchmark run committed beside it and the expectations above
    say the same thing, type by type (fused-op counts, what did not fuse, graph inputs, ORTModule)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    measured = {r["model_type"]: r for r in json.loads((root / "benchmarks/results/zoo_matrix.json").read_text())["rows"]}
    section = (root / "docs" / "encoders.md").read_text()
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] in SUPPORTED_MODEL_TYPES:
            table[cells[0]] = cells
    assert set(table) == set(measured) == set(SUPPORTED_MODEL_TYPES)
    for model_type, (_, tok_class, inputs, fused, not_fused, int8, ortmodule) in table.items():
        row, (expected_fused, expected_missing) = measured[model_type], FUSED[model_type]
        readme_ops = {op: int(n) for op, n in re.findall(r"(\w+) (\d+)", fused)}
        assert readme_ops == row["fused_ops"] == expected_fused, model_type
        assert set(row["not_fused"]) == set(expected_missing)
        assert (set(not_fused.split(", ")) - {"-"}) == set(expected_missing), model_type
        assert inputs.split(", ") == row["graph_inputs"] == GRAPH_INPUTS[model_type]
        assert tok_class == row["tokenizer_class"] == TOKENIZER_CLASS[model_type]
        assert int8 == "ok" and row["int8_passed"] and row["export_passed"] and row["fused_passed"]
        assert row["ortmodule"].split(":")[0] == ORTMODULE[model_type]
        assert ortmodule.split(",")[0] == ("ok" if ORTMODULE[model_type] == "ok" else "fails")


def test_modernbert_graph_keeps_its_sliding_window_beyond_the_traced_length(tmp_path, quick_data):
    """ModernBERT's local layers mask keys further than local_attention/2 tokens away, a mask built
    from the sequence length inside forward(): the graph, traced on short reviews, must give
    PyTorch's logits on texts several windows long too."""
    import datasets
    import numpy as np

    from workbench.graph import ExportConfig, run_export
    from workbench.runtime.ortinfer import predict_dataset, torch_predict_dataset

    folder = zoo.build_tiny("modernbert", tmp_path / "mb")
    export = run_export(str(folder), ExportConfig.quick(validation_examples=8), tmp_path / "export", data=quick_data)
    loaded = load_model(str(folder))
    window = loaded.model.config.local_attention
    texts = list(quick_data["test"]["text"])
    long = datasets.Dataset.from_dict({"text": [" ".join(texts[i:i + 12]) for i in range(0, 48, 12)], "label": [0] * 4})
    for max_length in (window // 2, 5 * window):
        lengths = [len(loaded.tokenizer(t, truncation=True, max_length=max_length)["input_ids"]) for t in long["text"]]
        assert min(lengths) == max_length  # every text fills the length
        onnx_logits = predict_dataset(str(export.onnx_path), export.load_tokenizer(), long, max_length, 4)
        torch_logits = torch_predict_dataset(loaded.model, loaded.tokenizer, long, max_length, 4)
        assert np.abs(onnx_logits - torch_logits).max() < 1e-5, max_length
