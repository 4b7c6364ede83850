"""Encoding texts with an embedding graph in ONNX Runtime: text in, sentence embedding out, as
``SentenceTransformer.encode`` does (tokenize with the model's tokenizer, pad each batch to its
longest text, batches formed in length order so little padding is computed)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..runtime.engine import RayPool


def length_order(tokenizer, texts: Sequence[str], max_length: int) -> np.ndarray:
    """Indices of ``texts`` from the longest to the shortest in tokens (what sentence-transformers
    does before batching, so a batch holds texts of similar length)."""
    lengths = [len(ids) for ids in tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]]
    return np.argsort(-np.asarray(lengths), kind="stable")


def longest_padded(tokenizer, texts: Sequence[str], max_length: int) -> dict:
    """One batch's tokenizer outputs, padded to its longest text (NumPy): what the encoder feeds the graph,
    here or on a Ray worker."""
    return dict(tokenizer(list(texts), truncation=True, max_length=max_length, padding="longest", return_tensors="np"))


class OnnxEncoder:
    """One ONNX Runtime session over an embedding graph, with its tokenizer.

    ``encode(texts, batch_size)`` returns one row per text, in the order given. ``threads``: intra-op
    threads (None: ONNX Runtime's default). ``pool`` (:func:`workbench.runtime.engine.active_pool`):
    ``encode`` sends the same batches' texts to that Ray pool's actors, each with ``graph`` open, which
    tokenize and pad them as :meth:`feed` does (the graph's output is the embedding);
    ``encode_batch`` (what the timing calls) always runs here. ``label``: the graph's name on the
    progress lines (:mod:`workbench.runtime.progress`)."""

    def __init__(self, graph: str | os.PathLike, tokenizer, max_length: int, threads: Optional[int] = None,
                 session=None, pool: Optional["RayPool"] = None, label: Optional[str] = None) -> None:
        from ..runtime.ortinfer import make_session

        self.graph = graph
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.session = session if session is not None else make_session(graph, threads=threads)
        self.output = self.session.get_outputs()[0].name
        self.pool = pool
        self.label = label

    def feed(self, texts: Sequence[str]) -> dict:
        from ..runtime.ortinfer import make_feed

        return make_feed(self.session, longest_padded(self.tokenizer, texts, self.max_length))

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        feed = self.feed(texts)
        return self.finish(feed, self.session.run([self.output], feed)[0])

    def finish(self, feed: dict, out: np.ndarray) -> np.ndarray:
        """The embeddings of a batch from the graph's first output (this graph's: as they are)."""
        return out

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        from ..runtime.progress import RowCounter, graph_label

        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        order = length_order(self.tokenizer, texts, self.max_length)
        batches = [order[start:start + batch_size] for start in range(0, len(texts), batch_size)]
        outs: Iterable[np.ndarray]  # the embeddings of each batch, in the batches' order
        if self.pool is not None:
            outs = self.pool.run_texts(self.graph, [[texts[i] for i in idx] for idx in batches], self.tokenizer, self.max_length,
                                       longest_padded, label=self.label)
        else:
            counter = RowCounter(graph_label(self.graph, self.label), len(texts))
            outs = (self._counted(self.feed([texts[i] for i in idx]), counter) for idx in batches)
        rows: list[Optional[np.ndarray]] = [None] * len(texts)
        for idx, out in zip(batches, outs):
            for i, row in zip(idx, out):
                rows[i] = row
        return np.stack(rows).astype(np.float32, copy=False)

    def _counted(self, feed: dict, counter) -> np.ndarray:
        out = self.finish(feed, self.session.run([self.output], feed)[0])
        counter.add(len(out))
        return out


class TokenGraphEncoder(OnnxEncoder):
    """A graph that returns token embeddings (``last_hidden_state``, as sentence-transformers' own ONNX
    export does), with the pooling and normalization done here in NumPy, as its Python side does.
    Mean pooling only (the anchor's model's)."""

    def __init__(self, graph, tokenizer, max_length: int, threads: Optional[int] = None, normalize: bool = True) -> None:
        super().__init__(graph, tokenizer, max_length, threads)
        self.normalize = normalize

    def finish(self, feed: dict, out: np.ndarray) -> np.ndarray:
        """Mean pooling of the token embeddings ``out`` over the feed's attention mask, normalized when asked."""
        mask = feed["attention_mask"][..., None].astype(out.dtype)
        pooled = (out * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        if self.normalize:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled
