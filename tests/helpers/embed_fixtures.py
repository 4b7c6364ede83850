"""Tiny sentence-transformers folders (a 2-layer random BERT with MiniLM's tokenizer, any pooling),
saved with sentence-transformers itself, so the folder-reading and export code meets real files."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest


def make_tiny_st_folder(folder: Path, pooling: str = "mean", normalize: bool = True, dense: int = 0, seed: int = 0) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    from workbench.models.load import TINY_CONFIG, minilm_path

    torch.manual_seed(seed)
    folder = Path(folder)
    base = folder / "_base"
    tok = AutoTokenizer.from_pretrained(str(minilm_path()), local_files_only=True)
    BertModel(BertConfig(vocab_size=tok.vocab_size, **TINY_CONFIG)).save_pretrained(str(base))
    tok.save_pretrained(str(base))
    word = models.Transformer(str(base), max_seq_length=64)
    mods = [word, models.Pooling(word.get_embedding_dimension(), pooling_mode=pooling)]
    if dense:
        mods.append(models.Dense(word.get_embedding_dimension(), dense, activation_function=torch.nn.Tanh()))
    if normalize:
        mods.append(models.Normalize())
    out = folder / "model"
    SentenceTransformer(modules=mods, device="cpu").save(str(out))
    return out


# op types that only a quantized graph holds (QDQ, dynamic, integer and weight-only kernels)
QUANTIZED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                           "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearMatMul", "QGemm", "QAttention",
                           "MatMulNBits", "GatherBlockQuantized"})


def is_quantized_graph(path) -> bool:
    import onnx

    return any(n.op_type in QUANTIZED_OPS for n in onnx.load(str(path), load_external_data=False).graph.node)


@contextlib.contextmanager
def quantized_graphs_miss(docs, reference=None):
    """A scorer the test controls: while it is open, an embedding graph that holds a quantized node ranks
    every query's documents in the reverse of its own order (the documents' embeddings are negated, which
    negates every score exactly), so a document FP32 ranks in the top 10 of 40 falls out of them and every
    INT8 graph misses any NDCG@10 budget, whatever the CPU's integer arithmetic does to the embeddings.

    ``reference``: an FP32 graph whose embeddings every graph's are replaced with (its tokenizer, length and
    one thread, the texts in the order and batches asked for): then a graph with no quantized node left
    ranks exactly as the FP32 graph does, and an INT8 graph exactly in reverse. Without it, each graph's
    own embeddings are used (negated where it is quantized)."""
    from workbench.embed.encode import OnnxEncoder

    original = OnnxEncoder.encode
    docs = set(docs)
    quantized: dict[str, bool] = {}
    ref: dict[str, OnnxEncoder] = {}

    def encode(self, texts, batch_size=32):
        texts = list(texts)
        key = str(self.graph)
        if key not in quantized:
            quantized[key] = is_quantized_graph(self.graph)
        if reference is not None and key != str(reference):
            if "ref" not in ref:
                ref["ref"] = OnnxEncoder(reference, self.tokenizer, self.max_length, 1)
            emb = original(ref["ref"], texts, batch_size)
        else:
            emb = original(self, texts, batch_size)
        if quantized[key]:
            emb = emb.copy()
            rows = [i for i, t in enumerate(texts) if t in docs]
            emb[rows] = -emb[rows]
        return emb

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OnnxEncoder, "encode", encode)
        yield
