"""Tiny randomly initialised encoders of every supported architecture, each an ordinary Hugging Face model folder.

Nothing is downloaded: each vocabulary is trained on the built-in reviews in its family's style and wrapped in the
family's fast tokenizer class, so the inputs match the real tokenizer's (RoBERTa's has no ``token_type_ids``).
Two layers, about 1,000 tokens: every architecture runs the coverage stages in seconds (plumbing, not accuracy).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

from .. import runs
from ..models.architectures import (BPE_MODERNBERT, MAX_POSITIONS, UNIGRAM_DEBERTA, VOCAB_SIZE, WORDPIECE_BERT, TokenizerStyle,
                                    architecture)

# the first reviews train the vocabularies: enough for 1,000 tokens; all 12,800 take longer and change nothing tested
TRAINING_TEXTS = 1000


def _special_kw(style: TokenizerStyle) -> dict:
    s = style.specials
    bracketed = dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    if style in (WORDPIECE_BERT, BPE_MODERNBERT):
        return bracketed
    if style is UNIGRAM_DEBERTA:
        return dict(bracketed, bos_token="[CLS]", eos_token="[SEP]")
    unk = "[UNK]" if "[UNK]" in s else "<unk>"
    return dict(bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>", pad_token="<pad>",
                unk_token=unk, mask_token="<mask>")


def training_texts(n: int = TRAINING_TEXTS) -> list[str]:
    from ..data.load import read_reviews_frame

    return [str(t) for t in read_reviews_frame()["text"].head(n)]


_BACKENDS: dict = {}


def train_backend(style: TokenizerStyle, texts: Optional[Sequence[str]] = None, vocab_size: int = VOCAB_SIZE):
    """A ``tokenizers.Tokenizer`` of ``style``; on the reviews, trained once per (style, vocab size) in a process
    (architectures sharing a style share it, which keeps the coverage matrix fast)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    key = (style, vocab_size)
    if texts is None and key in _BACKENDS:
        return Tokenizer.from_str(_BACKENDS[key])
    corpus = list(texts) if texts is not None else training_texts()
    specials = list(style.specials)
    unk = next(s for s in specials if "unk" in s.lower())
    if style.algorithm == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=unk))
        tok.normalizer = normalizers.BertNormalizer(lowercase=style.lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, min_frequency=1,
                                           show_progress=False)
    elif style.algorithm == "bpe":
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    elif style.algorithm == "unigram":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Sequence([normalizers.NFKC()])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token=unk, show_progress=False,
                                          shrinking_factor=0.75, max_piece_length=12)
    else:
        raise ValueError(f"unknown tokenizer algorithm {style.algorithm!r}; use wordpiece, bpe or unigram")
    tok.train_from_iterator(corpus, trainer=trainer)
    cls_id, sep_id = tok.token_to_id(style.cls), tok.token_to_id(style.sep)
    if style.algorithm == "bpe" and style.pair_separator:
        tok.post_processor = processors.RobertaProcessing((style.sep, sep_id), (style.cls, cls_id),
                                                          trim_offsets=True, add_prefix_space=False)
    elif style.pair_separator:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{style.cls} $A {style.sep}", pair=f"{style.cls} $A {style.sep} {style.sep} $B {style.sep}",
            special_tokens=[(style.cls, cls_id), (style.sep, sep_id)])
    else:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{style.cls}:0 $A:0 {style.sep}:0", pair=f"{style.cls}:0 $A:0 {style.sep}:0 $B:1 {style.sep}:1",
            special_tokens=[(style.cls, cls_id), (style.sep, sep_id)])
    if texts is None:
        _BACKENDS[key] = tok.to_str()
    return tok


def build_tokenizer(model_type: str, texts: Optional[Sequence[str]] = None, vocab_size: int = VOCAB_SIZE):
    import transformers

    entry = architecture(model_type)  # the tiny builders are the registry's entries
    backend = train_backend(entry.style, texts, vocab_size)
    cls = getattr(transformers, entry.tokenizer_class)
    kw = dict(tokenizer_object=backend, model_max_length=MAX_POSITIONS, **_special_kw(entry.style))
    if model_type == "modernbert":
        kw["model_input_names"] = ["input_ids", "attention_mask"]  # what ModernBERT's own tokenizer declares
    return cls(**kw)


def build_tiny(model_type: str, folder: str | os.PathLike, num_labels: int = 2, seed: int = 0,
               texts: Optional[Sequence[str]] = None, vocab_size: int = VOCAB_SIZE,
               id2label: Optional[dict[int, str]] = None) -> Path:
    """Write a tiny ``model_type`` sequence classifier and its tokenizer into ``folder``, atomically."""
    import torch
    from transformers import AutoModelForSequenceClassification

    entry = architecture(model_type)  # the tiny builders are the registry's entries
    tokenizer = build_tokenizer(model_type, texts, vocab_size)
    config = entry.make_config(tokenizer)
    labels = id2label or ({0: "rotten", 1: "fresh"} if num_labels == 2 else {i: str(i) for i in range(num_labels)})
    config.num_labels = len(labels)
    config.id2label = {int(k): v for k, v in labels.items()}
    config.label2id = {v: int(k) for k, v in labels.items()}
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    folder = Path(folder)
    with runs.atomic_dir(folder) as tmp:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
    return folder
