"""Tiny randomly initialised encoders of every supported architecture, each with its own tokenizer.

``build_tiny(model_type, folder)`` writes an ordinary Hugging Face model folder (``config.json``,
``model.safetensors``, the tokenizer files) that :func:`workbench.models.load.load_model` and
``workbench export --model FOLDER`` load like any fine-tuned model. Nothing is downloaded: the
tokenizer vocabulary is trained on the built-in reviews with the ``tokenizers`` library, in the
style of the model family (WordPiece for BERT, DistilBERT, ELECTRA and MPNet; byte-level BPE for
RoBERTa and ModernBERT; a SentencePiece-style Unigram for XLM-RoBERTa and DeBERTa-v2), and wrapped
in the family's fast tokenizer class, so the inputs it produces are the ones that family's real
tokenizer produces (RoBERTa's has no ``token_type_ids``, DeBERTa-v2's has).

These models are what the coverage matrix is measured on (``tests/unit/workflows/test_zoo.py`` and
``benchmarks/zoo_matrix.py``): two layers, hidden size 32 (64 for ModernBERT), a vocabulary of
about 1,000 tokens, so every architecture goes through export, fusion, INT8 and evaluation in
seconds. They predict nothing useful: they prove the plumbing, not accuracy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from .. import runs
from ..models.architectures import (ARCHITECTURES, BPE_MODERNBERT, BPE_ROBERTA, HEADS, HIDDEN, INTERMEDIATE, LAYERS,  # noqa: F401
                            MAX_POSITIONS, UNIGRAM_DEBERTA, UNIGRAM_XLMR, VOCAB_SIZE, WORDPIECE_BERT, WORDPIECE_MPNET,
                            Architecture, TokenizerStyle)
from ..runs import layout

# Texts the vocabularies are trained on: the first reviews of the built-in data (enough for a
# 1,000-token vocabulary; training on all 12,800 takes longer and changes nothing the tests see).
TRAINING_TEXTS = 1000


def _special_kw(style: TokenizerStyle) -> dict:
    s = style.specials
    if style is WORDPIECE_BERT:
        return dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    if style is UNIGRAM_DEBERTA:
        return dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                    bos_token="[CLS]", eos_token="[SEP]")
    if style is BPE_MODERNBERT:
        return dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    unk = "[UNK]" if "[UNK]" in s else "<unk>"
    return dict(bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>", pad_token="<pad>",
                unk_token=unk, mask_token="<mask>")


ZOO = ARCHITECTURES  # the tiny builders are the registry's entries (workbench.models.architectures)
ZOO_TYPES = tuple(ZOO)


def training_texts(n: int = TRAINING_TEXTS) -> list[str]:
    """The first ``n`` texts of the built-in reviews (what the tiny vocabularies are trained on)."""
    from ..data.load import read_reviews_frame

    return [str(t) for t in read_reviews_frame()["text"].head(n)]


_BACKENDS: dict = {}


def train_backend(style: TokenizerStyle, texts: Optional[Sequence[str]] = None, vocab_size: int = VOCAB_SIZE):
    """A ``tokenizers.Tokenizer`` of ``style`` trained on ``texts`` (default: the reviews).

    Trained once per (style, vocab size) in a process when ``texts`` is None: the architectures
    that share a style share the trained vocabulary, which keeps the coverage matrix fast.
    """
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
    """The family's fast tokenizer class around a vocabulary trained offline (see module docs)."""
    import transformers

    entry = zoo_entry(model_type)
    backend = train_backend(entry.style, texts, vocab_size)
    cls = getattr(transformers, entry.tokenizer_class)
    kw = dict(tokenizer_object=backend, model_max_length=MAX_POSITIONS, **_special_kw(entry.style))
    if model_type == "modernbert":
        kw["model_input_names"] = ["input_ids", "attention_mask"]  # what ModernBERT's own tokenizer declares
    return cls(**kw)


def zoo_entry(model_type: str) -> Architecture:
    if model_type not in ZOO:
        raise ValueError(f"no tiny builder for model type {model_type!r}; types: {list(ZOO_TYPES)}")
    return ZOO[model_type]


def build_tiny(model_type: str, folder: str | os.PathLike, num_labels: int = 2, seed: int = 0,
               texts: Optional[Sequence[str]] = None, vocab_size: int = VOCAB_SIZE,
               id2label: Optional[dict[int, str]] = None) -> Path:
    """Write a tiny randomly initialised ``model_type`` sequence classifier and its own tokenizer
    to ``folder`` (an ordinary Hugging Face folder, written atomically); return the folder."""
    import torch
    from transformers import AutoModelForSequenceClassification

    entry = zoo_entry(model_type)
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


# ---- the coverage matrix -----------------------------------------------------------------------
@dataclass(frozen=True)
class CoverageRow:
    """One architecture through every stage: what its graph takes, what fused, what INT8 did."""

    model_type: str
    tokenizer_class: str
    graph_inputs: list[str]
    export_max_abs_diff: float
    export_passed: bool
    optimizer_model_type: str
    fused_ops: dict[str, int]
    expected_fusions: dict[str, int]
    not_fused: dict[str, str]  # fusion -> the diagnosis' cause
    fused_max_abs_diff: float
    fused_passed: bool
    int8_passed: bool
    int8_max_abs_diff: float
    int8_agreement: float
    int8_quantized_nodes: int
    slices: list[str]
    seconds: float
    # Fine-tuning under ORTModule (``run_coverage(train_steps=N)``): "ok" when N steps ran in
    # ONNX Runtime, "failed: <the run's reason>" otherwise, "not run" when not asked for.
    ortmodule: str = "not run"

    @property
    def ok(self) -> bool:
        return self.export_passed and self.fused_passed and self.int8_passed


def run_coverage(model_type: str, out_dir: str | os.PathLike, data=None, seed: int = 0,
                 train_steps: int = 0) -> CoverageRow:
    """Build the tiny ``model_type`` model in ``out_dir/model`` and take it through export
    (validated against PyTorch), the transformer optimizer (validated, diagnosed), dynamic INT8 of
    the fused graph and per-slice evaluation against FP32, the way a user's folder goes through
    ``workbench export``, ``fuse`` and ``quantize``. With ``train_steps`` > 0, first fine-tune it
    that many steps under ORTModule (``workbench train --backend ortmodule``; its fallback to
    PyTorch disabled, so "ok" means the steps ran in ONNX Runtime). Stages write their usual
    results in ``out_dir``; the row sums them up."""
    import time

    from ..data.load import DataConfig, load_data
    from ..graph import ExportConfig, run_export
    from ..graph import FusionConfig, optimizer_model_type, run_fusion
    from ..flow.handoffs import graph_to_quantize
    from ..quant import BaselineConfig, EvalConfig, QuantConfig, TimingConfig, prepare_baseline, run_quantization
    from ..flow.sequence import Stage, run_stages

    t0 = time.perf_counter()
    out = Path(out_dir)
    data = data if data is not None else load_data(DataConfig.quick())
    lines: list[str] = []

    def build(st):
        return build_tiny(model_type, out / "model", seed=seed)

    def fine_tune(st):
        from ..train import TrainConfig, run_training

        # the quick reviews (TrainConfig.quick's data); fallback to PyTorch is disabled by default
        cfg = TrainConfig.quick(model=str(st.inputs["build"]), max_steps=train_steps, eval_every=train_steps, save_graphs=False)
        run = run_training(cfg, "ortmodule", run_dir=out / layout.TRAIN_DIR)
        return "ok" if run.ok and run.executed_in_onnxruntime else f"failed: {run.reason}"

    def export_stage(st):
        return run_export(str(st.inputs["build"]), ExportConfig.quick(), out / layout.EXPORT_DIR, data=data)

    def fuse(st):
        return run_fusion(st.inputs["export"], FusionConfig.inspect_only(variants=("unoptimized", "transformer")),
                          out / layout.FUSION_DIR)

    def quantize(st):
        # the graph to quantize by flow's rule: the fused graph only when it passed validation
        pick = graph_to_quantize(st.inputs["export"], st.inputs.get("fuse"))
        baseline = prepare_baseline(pick.path, data, out / layout.BASELINE,
                                    BaselineConfig(golden=False, timing=TimingConfig.quick(repeats=1, warmup=0), calibration_samples=8),
                                    export=st.inputs["export"])
        return run_quantization(baseline, QuantConfig.dynamic_int8(), out / layout.quantize_dir("dynamic"),
                                evaluation=EvalConfig(n_boot=100, node_error_samples=4))

    # the coverage's list, through the one sequencer; a stage that fails raises as it is (the row needs every stage)
    stages = [Stage("build", build)]
    if train_steps > 0:
        stages.append(Stage("fine-tune", fine_tune, needs=("build",)))
    stages += [Stage("export", export_stage, needs=("build",)), Stage("fuse", fuse, needs=("export",)),
               Stage("quantize", quantize, needs=("export", "fuse"))]
    done = run_stages(stages, log=lines.append, fatal=(Exception,))
    export, fusion, quant = done.results["export"], done.results["fuse"], done.results["quantize"]
    ortmodule = done.results.get("fine-tune", "not run")
    return CoverageRow(
        model_type=model_type,
        tokenizer_class=type(export.load_tokenizer()).__name__,
        graph_inputs=list(export.input_names),
        export_max_abs_diff=export.validation.max_abs_diff,
        export_passed=export.validation.passed,
        optimizer_model_type=optimizer_model_type(model_type),
        fused_ops=fusion.fused_op_counts,
        expected_fusions=dict(fusion.expected_fusions),
        not_fused={d.fusion: d.cause for d in fusion.diagnoses},
        fused_max_abs_diff=fusion.fused.validation.max_abs_diff,
        fused_passed=fusion.fused.validation.passed,
        int8_passed=quant.validation.passed,
        int8_max_abs_diff=quant.validation.max_abs_diff,
        int8_agreement=quant.report.overall.candidate.agreement,
        int8_quantized_nodes=len(quant.quantized_nodes),
        slices=[d.slice for d in quant.report.slices],
        seconds=time.perf_counter() - t0,
        ortmodule=ortmodule,
    )
