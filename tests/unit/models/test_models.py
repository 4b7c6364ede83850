"""Model loading: the tiny random BERT, the real MiniLM, and user folders (with clear errors)."""

from __future__ import annotations

import json

import pytest
import torch

from workbench.models.load import ModelError, load_for_data, load_model


def test_tiny_model_is_small_eager_and_seeded():
    a = load_model("tiny", seed=3)
    b = load_model("tiny", seed=3)
    assert a.model.config.model_type == "bert"
    assert a.model.config._attn_implementation == "eager"
    assert a.num_parameters < 2_000_000
    assert a.tokenizer.vocab_size == a.model.config.vocab_size
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)


def test_dropout_off_zeroes_every_dropout():
    lm = load_model("tiny", dropout=False)
    cfg = lm.model.config
    assert cfg.hidden_dropout_prob == 0.0 and cfg.attention_probs_dropout_prob == 0.0


@pytest.mark.slow
def test_minilm_loads_offline_with_eager_attention(minilm):
    assert minilm.model.config.model_type == "bert"
    assert minilm.model.config.num_hidden_layers == 6 and minilm.model.config.hidden_size == 384
    assert minilm.model.config._attn_implementation == "eager"
    assert 22_000_000 < minilm.num_parameters < 23_500_000  # 22.7M with the classifier head
    enc = minilm.tokenizer(["a fine film"], return_tensors="pt")
    with torch.no_grad():
        logits = minilm.model(**enc).logits
    assert logits.shape == (1, 2)


def test_labels_follow_the_data():
    lm = load_for_data("tiny", ["neg", "neutral", "pos"])
    assert lm.model.config.num_labels == 3
    assert lm.model.config.id2label == {0: "neg", 1: "neutral", 2: "pos"}


def test_user_folder_round_trip(tmp_path, tiny):
    folder = tmp_path / "mine"
    tiny.model.save_pretrained(folder)
    tiny.tokenizer.save_pretrained(folder)
    back = load_model(str(folder), dropout=False)
    assert back.source == str(folder)
    for pa, pb in zip(tiny.model.parameters(), back.model.parameters()):
        assert torch.equal(pa, pb)


def test_a_folder_keeps_its_own_label_count(tmp_path):
    three = load_for_data("tiny", ["neg", "neutral", "pos"])
    folder = tmp_path / "three"
    three.model.save_pretrained(folder)
    three.tokenizer.save_pretrained(folder)
    back = load_model(str(folder))
    assert back.num_labels == 3 and back.model.config.id2label[1] == "neutral"
    assert load_model("tiny").num_labels == 2


def test_bad_model_inputs_say_what_to_do(tmp_path):
    with pytest.raises(ModelError, match="neither a built-in model"):
        load_model(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelError, match="no config.json.*weights.bin"):
        load_model(str(tmp_path / "empty"))
    gpt = tmp_path / "gpt"
    gpt.mkdir()
    (gpt / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 10}))
    load_model("tiny").tokenizer.save_pretrained(gpt)
    with pytest.raises(ModelError, match="model type 'gpt2'.*not supported"):
        load_model(str(gpt))
    with pytest.raises(ModelError, match="attn_implementation"):
        load_model("tiny", attn_implementation="flash")
