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
def quantized_graphs_miss(task, reference=None):
    """A scorer the test controls: while it is open, an embedding graph that holds a quantized node gives
    the texts of ``task`` (a :class:`~workbench.embed.retrieval.RetrievalTask`) embeddings built so that, for
    every query, each of its relevant documents scores -1 and every other document +1 (query i is the i-th
    unit vector; a document holds -1 at the queries it is relevant to, +1 elsewhere). No relevant document
    is then in any query's top 10 (each query has 10 others or more), so an INT8 graph's NDCG@10 is 0 and
    it misses any budget that FP32 meets, whatever the CPU's integer arithmetic did to its real output.

    ``reference``: an FP32 graph whose embeddings every graph with no quantized node gives instead of its
    own (the reference's tokenizer, length and one thread, the texts in the order and batches asked for),
    so that it ranks exactly as the FP32 graph. Without it, such a graph's own embeddings are used."""
    import numpy as np

    from workbench.embed.encode import OnnxEncoder

    queries = {t: i for i, t in enumerate(task.queries)}
    docs = {t: j for j, t in enumerate(task.docs)}
    if queries.keys() & docs.keys():
        raise ValueError("quantized_graphs_miss tells queries from documents by their text: a text is both")
    n = len(queries)
    sign = np.ones((len(docs), n), dtype=np.float32)
    for i, rel in enumerate(task.relevant):
        if len(docs) - len(set(rel)) < 10:
            raise ValueError(f"query {i} has fewer than 10 documents that are not relevant to it")
        sign[list(rel), i] = -1.0
    original = OnnxEncoder.encode
    quantized: dict[str, bool] = {}
    ref: dict[str, OnnxEncoder] = {}

    def encode(self, texts, batch_size=32):
        texts = list(texts)
        key = str(self.graph)
        if key not in quantized:
            quantized[key] = is_quantized_graph(self.graph)
        if not quantized[key]:
            if reference is None or key == str(reference):
                return original(self, texts, batch_size)
            if "ref" not in ref:
                ref["ref"] = OnnxEncoder(reference, self.tokenizer, self.max_length, 1)
            return original(ref["ref"], texts, batch_size)
        emb = original(self, texts, batch_size).copy()
        if emb.shape[1] < n:
            raise ValueError(f"{n} queries need embeddings of {n} dimensions or more, the graph gives {emb.shape[1]}")
        for row, t in enumerate(texts):
            if t in queries:
                emb[row] = 0.0
                emb[row, queries[t]] = 1.0
            elif t in docs:
                emb[row] = 0.0
                emb[row, :n] = sign[docs[t]]
        return emb

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OnnxEncoder, "encode", encode)
        yield
