"""Inference with ONNX Runtime, the same for every stage: one session setup (:func:`make_session`), int64
feeds of exactly the inputs a graph declares, one timing discipline. Heavy imports happen inside functions.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, NamedTuple, Optional, Protocol, Sequence, Union

import numpy as np

from ..core.latency import LatencyStats, measure
from .session import GRAPH_OPTIMIZATION_LEVELS, InferenceError, make_session  # noqa: F401 (importable from here too)

if TYPE_CHECKING:
    from .device import PlacementReport

SessionOrPath = Union[str, os.PathLike, Any]  # Any: an onnxruntime.InferenceSession


class BatchPool(Protocol):
    """Runs a graph's scoring batches somewhere else (:class:`workbench.runtime.engine.RayPool`)."""

    text: str

    def run_texts(self, graph: str | os.PathLike, texts: Sequence[Sequence[str]], tokenizer: Any, max_length: int,
                  featurize: Any, label: Optional[str] = None) -> list[np.ndarray]: ...


@dataclass(frozen=True)
class ShapeLatency:
    """Latency of one input shape: ``batch`` sequences of ``seq`` tokens each."""

    batch: int
    seq: int
    stats: LatencyStats
    floor_ms: Optional[float] = None  # this machine's floor for the graph at this shape (workbench.perf.work.floor_for)

    @property
    def median_ms(self) -> float:
        return self.stats.median_ms

    @property
    def of_floor(self) -> Optional[float]:
        """``floor_ms / median_ms`` (1.0 = at this machine's floor), or None without a floor."""
        if self.floor_ms is None or not self.stats.median_ms:
            return None
        return self.floor_ms / self.stats.median_ms


def as_session(session_or_path: SessionOrPath, **kw):
    """A session for a path (opened with ``make_session(**kw)``), or the session itself."""
    if isinstance(session_or_path, (str, os.PathLike)):
        return make_session(session_or_path, **kw)
    if not hasattr(session_or_path, "run") or not hasattr(session_or_path, "get_inputs"):
        raise InferenceError(
            f"expected an ONNX file path or an onnxruntime.InferenceSession, got {type(session_or_path).__name__}"
        )
    return session_or_path


def _to_int64(value) -> np.ndarray:
    if hasattr(value, "detach"):  # torch tensor
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(value), dtype=np.int64)


def make_feed(session, encoded: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Only the inputs the graph declares, as int64; missing ``token_type_ids`` are zeros (BERT's default)."""
    feed = {}
    for name in (i.name for i in session.get_inputs()):
        if name in encoded:
            feed[name] = _to_int64(encoded[name])
        elif name == "token_type_ids" and "input_ids" in encoded:
            feed[name] = np.zeros_like(_to_int64(encoded["input_ids"]))
        else:
            raise InferenceError(
                f"the graph needs input {name!r} but the batch has only {sorted(encoded)}; "
                "tokenize with the tokenizer the model was exported with"
            )
    return feed


def predict_logits(session_or_path: SessionOrPath, encoded: Mapping[str, Any]) -> np.ndarray:
    """Logits (first graph output) for one encoded batch (torch tensors or NumPy arrays)."""
    session = as_session(session_or_path)
    out = session.run([session.get_outputs()[0].name], make_feed(session, encoded))[0]
    return np.asarray(out)


def scoring_batches(tokenizer, dataset, max_length: int, batch_size: int, order: str = "length",
                    lengths: Optional[np.ndarray] = None) -> list[np.ndarray]:
    """The index batches :func:`predict_dataset` scores in (``"length"``: sorted, each padded to its own longest row).
    Deterministic, so FP32 and INT8 scored on the same data see the same batches."""
    from ..data.token_lengths import ORDERS, file_order_batches, length_sorted_batches

    if order not in ORDERS:
        raise InferenceError(f"order must be one of {list(ORDERS)}, got {order!r}")
    if batch_size < 1:
        raise InferenceError(f"batch_size must be at least 1, got {batch_size}")
    if order == "file" or batch_size == 1:
        return file_order_batches(len(dataset), batch_size)
    if lengths is None:
        lengths = row_lengths(tokenizer, dataset["text"], max_length)
    return length_sorted_batches(lengths, batch_size)


def row_lengths(tokenizer, texts, max_length: int, pool: Optional[BatchPool] = None) -> np.ndarray:
    """Each text's token length (counted alone when a Ray ``pool`` pads the batches on its workers)."""
    if pool is not None:
        from ..data.token_lengths import token_lengths

        return token_lengths(tokenizer, texts, max_length)
    from ..data.batches import encoded_rows

    return encoded_rows(tokenizer, texts, max_length).lengths


def predict_dataset(
    session_or_path: SessionOrPath,
    tokenizer,
    dataset,
    max_length: int,
    batch_size: int = 32,
    order: str = "length",
    pool: Optional[BatchPool] = None,
    label: Optional[str] = None,
    batches: Optional[Sequence[np.ndarray]] = None,
) -> np.ndarray:
    """Logits for every ``text`` of a dataset, in dataset order. Dynamic INT8 computes activation scales per
    batch, so predictions depend on batch-mates (``SORTED_NOTE``); ``pool`` runs the same batches on Ray."""
    from ..data.batches import encoded_rows, padded_batch
    from .progress import RowCounter, graph_label

    if len(dataset) == 0:
        raise InferenceError("the dataset is empty: nothing to predict")
    texts = list(dataset["text"])
    if batches is None:
        batches = scoring_batches(tokenizer, dataset, max_length, batch_size, order,
                                  lengths=row_lengths(tokenizer, texts, max_length, pool) if order == "length" else None)
    if pool is not None:
        if not isinstance(session_or_path, (str, os.PathLike)):
            raise InferenceError("scoring on a Ray pool needs the graph's path (each actor opens it), not a session")
        parts: Iterator[np.ndarray] = iter(pool.run_texts(session_or_path, [[texts[i] for i in idx] for idx in batches],
                                                          tokenizer, max_length, padded_batch, label=label))
    else:
        session, rows = as_session(session_or_path), encoded_rows(tokenizer, texts, max_length)
        counter = RowCounter(graph_label(session_or_path, label), len(dataset))
        parts = (counter.counted(predict_logits(session, rows.batch(idx))) for idx in batches)
    return in_row_order(len(dataset), zip(batches, parts))


def in_row_order(n: int, parts) -> np.ndarray:
    """The rows of ``(row indices, outputs)`` batches put back in row order."""
    out: Optional[np.ndarray] = None
    for idx, part in parts:
        if out is None:
            out = np.empty((n,) + part.shape[1:], dtype=part.dtype)
        out[idx] = part
    return out


def torch_predict_dataset(model, tokenizer, dataset, max_length: int, batch_size: int = 32, order: str = "length") -> np.ndarray:
    """The PyTorch counterpart of :func:`predict_dataset` (same batches, eval mode, no grad)."""
    import torch

    from ..data.batches import iter_encoded, model_inputs

    model.eval()
    batches = scoring_batches(tokenizer, dataset, max_length, batch_size, order)
    with torch.inference_mode():
        return in_row_order(len(dataset), ((idx, model(**model_inputs(model, enc)).logits.float().cpu().numpy())
                                           for enc, _, idx in iter_encoded(dataset, tokenizer, batch_size, max_length,
                                                                           batches=batches)))


# ---- timing ------------------------------------------------------------------------------------
def synthetic_batch(batch: int, seq: int, vocab_size: int = 1000, seed: int = 0) -> dict[str, np.ndarray]:
    """A deterministic ``(batch, seq)`` batch for timing (latency depends on the shape, not the tokens)."""
    if batch < 1 or seq < 2:
        raise InferenceError(f"a timing shape needs batch >= 1 and seq >= 2, got ({batch}, {seq})")
    if vocab_size < 200:
        raise InferenceError(f"vocab_size must be at least 200 for synthetic timing batches, got {vocab_size}")
    rng = np.random.default_rng(seed)
    low = 1000 if vocab_size > 2000 else 200  # skip the special and unused tokens at the start
    ids = rng.integers(low, vocab_size, size=(batch, seq), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    return {
        "input_ids": ids,
        "attention_mask": np.ones((batch, seq), dtype=np.int64),
        "token_type_ids": np.zeros((batch, seq), dtype=np.int64),
    }


def check_shapes(shapes: Sequence[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    """Validate ``[(batch, seq), ...]`` (or ``"1x128,..."``) and return it as a tuple of int pairs."""
    from ..core.options import parse_shapes

    return parse_shapes(shapes, error=InferenceError)


class BoundRunner:
    """One graph and input shape through I/O binding: no host-device copies in the timed call. With ``cuda_graph``
    outputs sit at fixed addresses, as replay requires: the first :meth:`run` captures, later ones replay."""

    def __init__(self, session, feed: Mapping[str, np.ndarray], device: str = "cpu", cuda_graph: bool = False):
        import onnxruntime as ort

        from .device import device_index, normalize_device

        self.session, self.device = session, normalize_device(device)
        dev_type, dev_id = self.device.split(":")[0], device_index(self.device)
        self.binding = session.io_binding()
        # keep the OrtValues alive: the binding refers to their buffers
        self.inputs = {k: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v), dev_type, dev_id) for k, v in feed.items()}
        for name, value in self.inputs.items():
            self.binding.bind_ortvalue_input(name, value)
        self.outputs = {}
        for out in session.get_outputs():
            if cuda_graph:
                dtype = np.float16 if out.type == "tensor(float16)" else np.float32
                self.outputs[out.name] = ort.OrtValue.ortvalue_from_shape_and_type(_output_shape(out, feed), dtype, dev_type, dev_id)
                self.binding.bind_ortvalue_output(out.name, self.outputs[out.name])
            else:
                self.binding.bind_output(out.name, dev_type, dev_id)

    def run(self) -> None:
        try:
            self.session.run_with_iobinding(self.binding)
        except Exception as exc:  # onnxruntime's own error types; the text says what failed
            raise InferenceError(f"ONNX Runtime failed to run with I/O binding on {self.device}: {exc}") from exc


def _output_shape(out, feed: Mapping[str, np.ndarray]) -> list[int]:
    """A graph output's concrete shape for a feed: symbolic leading dims are batch, then sequence."""
    first = next(iter(feed.values()))
    dims = []
    for i, d in enumerate(out.shape):
        if isinstance(d, int) and d > 0:
            dims.append(d)
        elif i < first.ndim:
            dims.append(int(first.shape[i]))
        else:
            raise InferenceError(f"cannot tell the shape of output {out.name!r} {out.shape} for CUDA-graph binding: "
                                 "its dimensions past batch and sequence must be fixed numbers; time it without cuda_graph")
    return dims


def latency_by_shape(
    onnx_or_session: SessionOrPath,
    shapes: Sequence[Sequence[int]] = ((1, 128),),
    warmup: int = 3,
    repeats: int = 20,
    threads: Optional[int] = None,
    graph_optimization: str = "all",
    max_seconds: Optional[float] = None,
    vocab_size: int = 1000,
    device: str = "cpu",
    io_binding: Optional[bool] = None,
    cuda_graph: bool = False,
) -> list[ShapeLatency]:
    """Median latency of one run per shape (warm-up first). ``io_binding`` (default on for CUDA) makes a GPU figure
    the graph's time, not the host copies'. ``cuda_graph=True`` opens one session per shape and times replays."""
    from .device import normalize_device

    device = normalize_device(device)
    bind = cuda_graph or ((device != "cpu") if io_binding is None else bool(io_binding))
    if cuda_graph and not isinstance(onnx_or_session, (str, os.PathLike)):
        raise InferenceError("cuda_graph timing opens its own session per shape: pass the graph's path, not a session")
    open_kw = {"threads": threads, "graph_optimization": graph_optimization, "device": device}
    session = None if cuda_graph else as_session(onnx_or_session, **open_kw)
    results = []
    for batch, seq in check_shapes(shapes):
        if cuda_graph:  # a CUDA graph holds one shape: a session of its own per shape, the last one freed first
            run = session = None
            session = make_session(onnx_or_session, **open_kw, cuda_graph=True)
        feed = make_feed(session, synthetic_batch(batch, seq, vocab_size))
        run = (BoundRunner(session, feed, device, cuda_graph=cuda_graph).run if bind
               else functools.partial(session.run, [session.get_outputs()[0].name], feed))
        stats = measure(run, warmup=max(warmup, 2) if cuda_graph else warmup, repeats=repeats, max_seconds=max_seconds)
        results.append(ShapeLatency(batch, seq, stats))
    return results


@contextlib.contextmanager
def torch_threads(threads: Optional[int]) -> Iterator[None]:
    """PyTorch's intra-op thread count set for the block (None: left as it is)."""
    import torch

    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _profile(onnx_path: str | os.PathLike, feed_for: Any, runs: int, optimized: bool = False, **session_kw):
    """(profile events, the session's providers, Memcpy counts or None) of ``runs`` profiled runs."""
    import json
    import tempfile

    from .device import memcpy_counts

    with tempfile.TemporaryDirectory(prefix="wb-profile-") as tmp:
        opt_path = Path(tmp) / "optimized.onnx" if optimized else None
        session = make_session(onnx_path, optimized_model_path=opt_path, profile_prefix=str(Path(tmp) / "profile"), **session_kw)
        feed = feed_for(session)
        for _ in range(runs):
            session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
        return events, session.get_providers(), memcpy_counts(opt_path) if optimized else None


def probe_placement(onnx_path: str | os.PathLike, device: Any, feed: Mapping[str, Any],
                    graph_optimization: str = "all", try_graph_capture: bool = False) -> "PlacementReport":
    """Run ``feed`` once, profiled: where every node ran, the Memcpy nodes, and whether a CUDA graph was accepted."""
    from .device import analyze_placement, placements_from_profile, require_device

    d = require_device(device)
    events, providers, memcpy = _profile(onnx_path, lambda _: dict(feed), 1, optimized=True,
                                         graph_optimization=graph_optimization, device=d)
    captured, error = None, None
    if try_graph_capture and d != "cpu":
        try:
            runner = BoundRunner(make_session(onnx_path, graph_optimization=graph_optimization, device=d, cuda_graph=True),
                                 dict(feed), d, cuda_graph=True)
            runner.run()
            runner.run()
            captured = True
        except (InferenceError, RuntimeError) as exc:  # the refusal is what is being measured
            captured, error = False, str(exc)
    return analyze_placement(placements_from_profile(events), d, providers, memcpy, error, captured)


class OpTime(NamedTuple):
    """Where a graph's time goes: one op type's time per run (ONNX Runtime's profiler) and its share."""

    op_type: str
    ms: float  # per run, summed over the op type's nodes
    share: float  # of the time spent in all nodes (0..1)


def profile_ops(onnx_path: str | os.PathLike, batch: int = 1, seq: int = 128, threads: Optional[int] = None,
                runs: int = 10, warmup: int = 3, vocab_size: int = 1000,
                graph_optimization: str = "all") -> list[OpTime]:
    """Which ops take a graph's time at ``(batch, seq)``: profiled kernel times summed by op type (after fusions),
    largest first; shares sum to 1 over the nodes' time (the gaps between nodes are not in it)."""
    from .device import kernel_events

    if runs < 1:
        raise InferenceError(f"runs must be at least 1, got {runs}")
    events, _, _ = _profile(onnx_path, lambda s: make_feed(s, synthetic_batch(batch, seq, vocab_size)), max(0, warmup) + runs,
                            threads=threads, graph_optimization=graph_optimization)
    # the warm-up runs are in the profile too: count only the last ``runs`` model_run events' nodes
    timed = sorted((e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"))[-runs:]
    if not timed:
        raise InferenceError("ONNX Runtime's profile has no model runs: nothing to attribute")
    by_op: Counter[str] = Counter()
    for _, e in kernel_events(events):
        if e.get("ts", 0) >= timed[0]:
            by_op[e.get("args", {}).get("op_name", "?")] += float(e.get("dur", 0))
    total = sum(by_op.values())
    if total <= 0:
        raise InferenceError("ONNX Runtime's profile has no node times: nothing to attribute")
    return sorted((OpTime(op, us / 1000.0 / len(timed), us / total) for op, us in by_op.items()), key=lambda r: -r.ms)
