"""The encoder architectures the workbench supports, one entry each: adding a type is one :class:`Architecture`
in :data:`ARCHITECTURES` (plus its row in ``tests/unit/workflows/test_zoo.py``); every module that differs per
architecture (optimizer model type, fusion diagnoses, graph inputs, tiny models) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# The tiny models' sizes (workbench.workflows.tiny builds them): two layers, hidden size 32 (64 for ModernBERT).
VOCAB_SIZE = 1000
HIDDEN = 32
LAYERS = 2
HEADS = 2
INTERMEDIATE = 64
MAX_POSITIONS = 512


@dataclass(frozen=True)
class TokenizerStyle:
    """How a family tokenizes: the subword algorithm and its special tokens, in id order."""

    algorithm: str  # "wordpiece", "bpe" (byte-level) or "unigram" (SentencePiece-style, Metaspace)
    specials: tuple[str, ...]
    cls: str
    sep: str
    pair_separator: bool  # RoBERTa-style pairs: <s> A </s></s> B </s>
    lowercase: bool


WORDPIECE_BERT = TokenizerStyle("wordpiece", ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), "[CLS]", "[SEP]", False, True)
WORDPIECE_MPNET = TokenizerStyle("wordpiece", ("<s>", "<pad>", "</s>", "[UNK]", "<mask>"), "<s>", "</s>", True, True)
BPE_ROBERTA = TokenizerStyle("bpe", ("<s>", "<pad>", "</s>", "<unk>", "<mask>"), "<s>", "</s>", True, False)
BPE_MODERNBERT = TokenizerStyle("bpe", ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), "[CLS]", "[SEP]", False, False)
UNIGRAM_XLMR = TokenizerStyle("unigram", ("<s>", "<pad>", "</s>", "<unk>", "<mask>"), "<s>", "</s>", True, False)
UNIGRAM_DEBERTA = TokenizerStyle("unigram", ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"), "[CLS]", "[SEP]", False, False)


def _config(cls_name: str, token_ids: Callable[[Any], dict] = lambda tok: {}, **own) -> Callable:
    """A maker of ``transformers.<cls_name>`` at the tiny sizes for a tokenizer; ``own`` overrides a size or adds
    a setting, ``token_ids(tok)`` the special-token ids the family's config names."""
    def make(tok):
        import transformers

        sizes = dict(vocab_size=len(tok), hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                     intermediate_size=INTERMEDIATE, max_position_embeddings=MAX_POSITIONS, pad_token_id=tok.pad_token_id)
        return getattr(transformers, cls_name)(**{**sizes, **own, **token_ids(tok)})

    return make


def _bos_eos(tok) -> dict:
    return dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)


def _cls_sep(tok) -> dict:
    return dict(bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id, cls_token_id=tok.cls_token_id,
                sep_token_id=tok.sep_token_id)


def _distilbert(tok):
    from transformers import DistilBertConfig

    return DistilBertConfig(vocab_size=len(tok), dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=INTERMEDIATE,
                            max_position_embeddings=MAX_POSITIONS, pad_token_id=tok.pad_token_id)


_bert = _config("BertConfig")
_electra = _config("ElectraConfig", embedding_size=HIDDEN)
# RoBERTa and MPNet number positions from padding_idx + 1, so they need two more position rows.
_mpnet = _config("MPNetConfig", _bos_eos, max_position_embeddings=MAX_POSITIONS + 2)
# DeBERTa-v3's settings (what fine-tuned v2/v3 checkpoints use): disentangled c2p/p2c attention,
# log-bucketed relative positions, no absolute position embedding.
_deberta_v2 = _config("DebertaV2Config", relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=64,
                      max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True,
                      position_biased_input=False, type_vocab_size=0)
_modernbert = _config("ModernBertConfig", _cls_sep, hidden_size=2 * HIDDEN, intermediate_size=2 * INTERMEDIATE,
                      global_attn_every_n_layers=2, local_attention=64)


def _roberta(cls_name: str) -> Callable:
    return _config(cls_name, _bos_eos, max_position_embeddings=MAX_POSITIONS + 2, type_vocab_size=1)


_ARCH_LIMIT_FIX = ("nothing to fix in the export: this is what onnxruntime 1.19.2's optimizer does for this "
                   "architecture, and the unfused operators still run and validate. ")
_ROBERTA_POSITIONS = (
    "RoBERTa-style position ids are counted from the padding id (cumulative sum of input_ids != padding_idx, "
    "plus padding_idx), and onnxruntime 1.19.2 switches that match off in fusion_embedlayer.py ('TODO: Support "
    "roberta (position starts from 2 instead of 0) in EmbedLayerNormalization kernel'), so the word + position "
    "embedding sum and its LayerNormalization stay separate ops.")

# Why the BERT fusions cannot fire for an architecture, read off its exported graph (opset 17,
# eager attention, transformers 4.57.6) and onnxruntime 1.19.2's fusion code: {fused op: (cause, fix)}.
_LIMITS: dict[tuple[str, str], tuple[str, str]] = {
    ("roberta", "EmbedLayerNormalization"): (_ROBERTA_POSITIONS, _ARCH_LIMIT_FIX + "It would take the kernel "
                                             "supporting a position offset (the TODO above)."),
    ("xlm-roberta", "EmbedLayerNormalization"): (_ROBERTA_POSITIONS, _ARCH_LIMIT_FIX + "It would take the kernel "
                                                 "supporting a position offset (the TODO above)."),
    ("mpnet", "Attention"): (
        "MPNet adds a relative-position bias (bucketed relative positions, shared by every layer) to the scores "
        "before the mask: MatMul -> Div -> Add(position bias) -> Add(mask) -> Softmax. The BERT attention fusion "
        "expects the mask Add right after the scaling and does not match the extra Add.",
        _ARCH_LIMIT_FIX + "It would take fusing to MultiHeadAttention with the bias as its attention_bias input "
                          "(a pattern onnxruntime 1.19.2's BERT fusion does not write)."),
    ("mpnet", "EmbedLayerNormalization"): (
        "MPNet's position ids are counted from the padding id as in RoBERTa (not matched by onnxruntime 1.19.2), "
        "and the embedding fusion also needs a fused Attention after the LayerNormalization, which MPNet has not.",
        _ARCH_LIMIT_FIX.rstrip() + ""),
    ("deberta-v2", "Attention"): (
        "DeBERTa-v2/v3 attention is disentangled: the scores add content-to-position and position-to-content "
        "terms (relative-position embeddings gathered with GatherElements), scaled by sqrt(3 x head size), and "
        "masked with Where. onnxruntime 1.19.2's optimizer has no fusion for that pattern.",
        _ARCH_LIMIT_FIX + "It would take a DeBERTa attention fusion in ONNX Runtime; the FP32 graph runs "
                          "unfused, and dynamic INT8 still quantizes its MatMuls."),
    ("deberta-v2", "EmbedLayerNormalization"): (
        "DeBERTa-v3 has no absolute position embedding (position_biased_input=False): the embedding is a word "
        "Gather + LayerNormalization, not the word + position (+ segment) sum the fusion matches; it also needs "
        "a fused Attention after it.",
        _ARCH_LIMIT_FIX.rstrip()),
    ("modernbert", "Attention"): (
        "ModernBERT projects Q, K and V with one Linear and Splits it, applies rotary position embeddings to Q "
        "and K (Sin/Cos, Neg, Concat, Mul, Add), scales with Mul and picks a global or sliding-window mask with "
        "Where. The BERT attention fusion matches none of that, and the optimizer's RotaryEmbedding fusion "
        "(its patterns are those of decoder models such as LLaMA and Phi) did not match the in-graph Sin/Cos "
        "either: the fused graph has no RotaryEmbedding node.",
        _ARCH_LIMIT_FIX + "It would take a ModernBERT attention fusion (rotary + packed QKV + local window) in "
                          "ONNX Runtime."),
    ("modernbert", "EmbedLayerNormalization"): (
        "ModernBERT has no position embedding (rotary attention instead) and its LayerNormalization has no bias: "
        "the embedding is a word Gather + LayerNormalization, not the sum the fusion matches; it also needs a "
        "fused Attention after it.",
        _ARCH_LIMIT_FIX.rstrip()),
}


@dataclass(frozen=True)
class Architecture:
    """What one encoder architecture (a Hugging Face ``config.model_type``) needs.

    ``optimizer_model_type`` is "bert" for all: onnxruntime 1.19.2's encoder fusions all live in
    ``BertOnnxModel``, which matches DistilBERT's and RoBERTa's patterns too. ``position_offset``:
    position ids counted from the padding id (RoBERTa style), which EmbedLayerNormalization does not match.
    """

    model_type: str
    graph_inputs: tuple[str, ...]
    tokenizer_class: str
    style: TokenizerStyle
    make_config: Callable  # (tokenizer) -> transformers.PretrainedConfig
    optimizer_model_type: str = "bert"
    position_offset: bool = False
    fusion_limits: dict[str, tuple[str, str]] = field(default_factory=dict)


def _limits(model_type: str) -> dict[str, tuple[str, str]]:
    return {op: v for (arch, op), v in _LIMITS.items() if arch == model_type}


_WITH_SEGMENTS = ("input_ids", "attention_mask", "token_type_ids")
_NO_SEGMENTS = ("input_ids", "attention_mask")

ARCHITECTURES: dict[str, Architecture] = {a.model_type: a for a in (
    Architecture("bert", _WITH_SEGMENTS, "BertTokenizerFast", WORDPIECE_BERT, _bert),
    Architecture("roberta", _NO_SEGMENTS, "RobertaTokenizerFast", BPE_ROBERTA, _roberta("RobertaConfig"),
                 position_offset=True, fusion_limits=_limits("roberta")),
    Architecture("distilbert", _NO_SEGMENTS, "DistilBertTokenizerFast", WORDPIECE_BERT, _distilbert),
    Architecture("xlm-roberta", _NO_SEGMENTS, "XLMRobertaTokenizerFast", UNIGRAM_XLMR, _roberta("XLMRobertaConfig"),
                 position_offset=True, fusion_limits=_limits("xlm-roberta")),
    Architecture("electra", _WITH_SEGMENTS, "ElectraTokenizerFast", WORDPIECE_BERT, _electra),
    Architecture("mpnet", _NO_SEGMENTS, "MPNetTokenizerFast", WORDPIECE_MPNET, _mpnet,
                 position_offset=True, fusion_limits=_limits("mpnet")),
    # DeBERTa-v3's tokenizer produces token_type_ids, but with type_vocab_size 0 the model never
    # reads them and the exporter drops the input.
    Architecture("deberta-v2", _NO_SEGMENTS, "DebertaV2TokenizerFast", UNIGRAM_DEBERTA, _deberta_v2,
                 fusion_limits=_limits("deberta-v2")),
    Architecture("modernbert", _NO_SEGMENTS, "PreTrainedTokenizerFast", BPE_MODERNBERT, _modernbert,
                 fusion_limits=_limits("modernbert")),
)}
SUPPORTED_MODEL_TYPES = tuple(ARCHITECTURES)


def architecture(model_type: str) -> Architecture:
    if model_type not in ARCHITECTURES:
        raise ValueError(f"model type {model_type!r} is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    return ARCHITECTURES[model_type]
