"""Texts in, sentence embeddings out, with an embedding graph in ONNX Runtime, batched as
``SentenceTransformer.encode`` does: in length order, each padded to its longest text, so little padding is computed."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..perf.speed import SpeedRun
    from ..runtime.engine import RayPool


def longest_padded(tokenizer, texts: Sequence[str], max_length: int) -> dict:
    """One batch padded to its longest text, here or on a Ray worker."""
    return dict(tokenizer(list(texts), truncation=True, max_length=max_length, padding="longest", return_tensors="np"))


class OnnxEncoder:
    """An embedding graph's session and tokenizer. With ``pool`` ``encode`` runs on that Ray pool's actors;
    ``encode_batch`` (what the timing calls) always runs here."""

    def __init__(self, graph: str | os.PathLike, tokenizer, max_length: int, threads: Optional[int] = None,
                 pool: Optional["RayPool"] = None, label: Optional[str] = None) -> None:
        from ..runtime.ortinfer import make_session

        self.graph, self.tokenizer, self.max_length = graph, tokenizer, int(max_length)
        self.session = make_session(graph, threads=threads)
        self.output = self.session.get_outputs()[0].name
        self.pool, self.label = pool, label

    def feed(self, texts: Sequence[str]) -> dict:
        from ..runtime.ortinfer import make_feed

        return make_feed(self.session, longest_padded(self.tokenizer, texts, self.max_length))

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        feed = self.feed(texts)
        return self.finish(feed, self.session.run([self.output], feed)[0])

    def finish(self, feed: dict, out: np.ndarray) -> np.ndarray:
        """A batch's embeddings from the graph's first output (a token-embedding graph pools here)."""
        return out

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        from ..data.token_lengths import token_lengths
        from ..runtime.progress import RowCounter, graph_label

        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        order = np.argsort(-token_lengths(self.tokenizer, texts, self.max_length), kind="stable")  # longest first
        batches = [[texts[i] for i in order[start:start + batch_size]] for start in range(0, len(texts), batch_size)]
        outs: Iterable[np.ndarray]  # the embeddings of each batch, in the batches' order
        if self.pool is not None:
            outs = self.pool.run_texts(self.graph, batches, self.tokenizer, self.max_length, longest_padded, label=self.label)
        else:
            counter = RowCounter(graph_label(self.graph, self.label), len(texts))
            outs = (counter.counted(self.encode_batch(batch)) for batch in batches)
        rows = np.concatenate(list(outs)).astype(np.float32, copy=False)
        return rows[np.argsort(order, kind="stable")]


ST_ENCODE = "sentence-transformers encode (PyTorch FP32)"


def median_length_texts(tokenizer, texts: Sequence[str], max_length: int, n: int) -> tuple[list[str], int]:
    """``n`` texts nearest the data's median token length (repeated when the data holds fewer), and that median."""
    from ..data.token_lengths import token_lengths
    from .folder import EmbedError

    texts = [t for t in texts if t.strip()]
    if not texts:
        raise EmbedError("timing needs texts: the data holds none")
    lengths = token_lengths(tokenizer, texts, max_length)
    med = int(np.median(lengths))
    return [texts[i] for i in np.resize(np.argsort(np.abs(lengths - med), kind="stable")[:n], n)], med


def st_encoder(folder, threads: Optional[int] = None):
    """``SentenceTransformer`` on the CPU (eager PyTorch FP32, as users run it), with ``threads`` PyTorch threads."""
    from .folder import EmbedError

    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbedError("an embedding model's reference needs sentence-transformers: pip install sentence-transformers") from exc
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


def encode_fns(encoders: Mapping[str, OnnxEncoder], st_model, texts_by_batch: Mapping[int, Sequence[str]]) -> dict:
    """Per batch size, name -> one call encoding that batch (``st_model.encode``, when given, as :data:`ST_ENCODE`)."""
    out: dict[int, dict[str, Callable[[], object]]] = {}
    for batch, texts in texts_by_batch.items():
        fns: dict[str, Callable[[], object]] = {}
        if st_model is not None:
            fns[ST_ENCODE] = (lambda m=st_model, t=list(texts), b=batch: m.encode(t, batch_size=b, convert_to_numpy=True,
                                                                                  show_progress_bar=False))
        fns.update({name: (lambda e=enc, t=list(texts): e.encode_batch(t)) for name, enc in encoders.items()})
        out[batch] = fns
    return out


def time_encoders(fns_by_batch: Mapping[int, Mapping[str, Callable[[], object]]], base: str, tokens: int, threads: int,
                  graphs: Optional[Mapping[str, str]] = None, *, floors: bool = True, load_check: bool = True,
                  retimes: Optional[int] = None, **rounds) -> "SpeedRun":
    """:func:`encode_fns`' calls timed by :func:`workbench.perf.speed.time_callables` (``rounds``: its keywords,
    max_seconds 60 s by default); ``graphs`` (name -> ONNX path) get a floor."""
    from ..perf.machine_profile import machine_profile
    from ..perf.speed import RETIMES, time_callables
    from .folder import as_embed_error

    profile = machine_profile(threads) if (floors or load_check) else None
    with as_embed_error(ValueError):
        return time_callables({(b, tokens): fns for b, fns in fns_by_batch.items()}, base, graphs, profile=profile, floors=floors,
                              load_check=load_check, threads=threads, pytorch_threads=threads,
                              retimes=RETIMES if retimes is None else retimes, **{"max_seconds": 60.0, **rounds})


def speed_of(run: "SpeedRun", name: str, batch: int, over: Optional[str] = None) -> dict:
    """``name``'s timing at ``batch`` and its speed-up over the run's base (or ``over``) from the same rounds."""
    from ..core.latency import Ratio, paired_ratio

    lat = {n: next(x for x in shapes if x.batch == batch) for n, shapes in run.latency.items()}
    if name not in lat:
        raise KeyError(f"no timing for {name!r} at batch {batch}")
    base = over or next((s.base for s in run.speeds), name)
    ratio = Ratio(1.0, 1.0, 1.0, 0) if name == base else paired_ratio(lat[base].stats.samples_ms, lat[name].stats.samples_ms)
    x = lat[name]
    return {"name": name, "batch": batch, "tokens": x.seq, "ms_per_text": x.stats.median_ms / batch,
            "ms_per_batch": x.stats.median_ms, "speedup": ratio.value, "lo": ratio.lo, "hi": ratio.hi,
            "floor_ms": x.floor_ms, "rounds": ratio.rounds, "ratio": ratio}


def speed_summary(run: "SpeedRun") -> dict:
    """The run as summary.json, the report and the speed figure hold it (every name at every batch size, over the base)."""
    batches = [x.batch for x in next(iter(run.latency.values()), [])]
    rows = [{k: v for k, v in speed_of(run, n, b).items() if k != "ratio"} for b in batches for n in run.latency]
    return {"base": next((s.base for s in run.speeds), rows[0]["name"] if rows else ""), "threads": run.threads, "cpu": run.cpu,
            "load": run.load.text() if run.load else "", "contended": run.contended, "notes": list(run.notes), "speeds": rows}
