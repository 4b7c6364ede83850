"""Inference with ONNX Runtime, and timing that is the same for every stage.

Every stage that runs a graph (export validation, fusion variants, quantized models, slice
evaluation) goes through these functions, so "ONNX Runtime was faster" always means the same
session settings, the same inputs and the same timing discipline (:func:`workbench.latency.measure`):

- :func:`make_session` opens a graph on the CPU execution provider with a chosen graph-optimization
  level (``"disabled"``, ``"basic"``, ``"extended"``, ``"all"``), optionally saving the graph as
  ONNX Runtime optimized it (that saved file is what fusion inspects).
- :func:`predict_logits` / :func:`predict_dataset` feed exactly the inputs the graph declares, as
  int64, and return logits as NumPy.
- :func:`latency_by_shape` and :func:`torch_latency_by_shape` time a graph and a PyTorch model on
  identical synthetic batches of the given ``(batch, sequence)`` shapes.

Heavy imports (onnxruntime, torch) happen inside the functions.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from .latency import LatencyStats, measure

GRAPH_OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
DEFAULT_PROVIDERS = ("CPUExecutionProvider",)
# Inputs a BERT-like graph may declare; anything else must be given explicitly.
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")

SessionOrPath = Union[str, os.PathLike, Any]  # Any: an onnxruntime.InferenceSession


class InferenceError(ValueError):
    """A graph that cannot be opened or fed; the message says what was wrong and what to do."""


@dataclass(frozen=True)
class ShapeLatency:
    """Latency of one input shape: ``batch`` sequences of ``seq`` tokens each."""

    batch: int
    seq: int
    stats: LatencyStats

    @property
    def median_ms(self) -> float:
        return self.stats.median_ms

    @property
    def ms_per_example(self) -> float:
        return self.stats.median_ms / self.batch


def _ort_level(name: str):
    import onnxruntime as ort

    levels = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    key = getattr(name, "value", name)
    if key not in levels:
        raise InferenceError(
            f"graph_optimization must be one of {list(GRAPH_OPTIMIZATION_LEVELS)}, got {name!r}; "
            "use 'disabled' to run the graph exactly as written, 'all' for ONNX Runtime's default"
        )
    return levels[key]


def make_session(
    onnx_path: str | os.PathLike,
    threads: Optional[int] = None,
    graph_optimization: str = "all",
    optimized_model_path: str | os.PathLike | None = None,
    providers: Sequence[str] = DEFAULT_PROVIDERS,
    allow_spinning: bool = True,
):
    """Open ``onnx_path`` in an ``onnxruntime.InferenceSession``.

    ``threads`` sets the intra-op thread count (None: ONNX Runtime's default, one per physical
    core). ``graph_optimization`` is the session's graph-optimization level. With
    ``optimized_model_path`` ONNX Runtime writes the graph *after* its optimizations there, which
    is how the session levels become files that can be inspected and diffed.

    ``allow_spinning=False`` stops idle worker threads from busy-waiting after a run. Spinning
    lowers ONNX Runtime's own latency, but on a small machine a live session's spinning threads
    slow down whatever runs next in the process (PyTorch included): drop sessions (or disable
    spinning) before timing something else.
    """
    import onnxruntime as ort

    path = Path(onnx_path)
    if not path.is_file():
        raise InferenceError(f"no ONNX graph at {path}: export one first (workbench export, or run_export)")
    if threads is not None and threads < 1:
        raise InferenceError(f"threads must be a positive number or None, got {threads}")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = _ort_level(graph_optimization)
    opts.log_severity_level = 3  # errors only; warnings about unused initializers are noise here
    if threads is not None:
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
    if not allow_spinning:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if optimized_model_path is not None:
        Path(optimized_model_path).parent.mkdir(parents=True, exist_ok=True)
        opts.optimized_model_filepath = str(optimized_model_path)
    available = ort.get_available_providers()
    missing = [p for p in providers if p not in available]
    if missing:
        raise InferenceError(
            f"execution provider(s) {missing} are not available in this ONNX Runtime build; "
            f"available: {available}. Use the default CPUExecutionProvider, or install the build that has them"
        )
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=list(providers))
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise InferenceError(f"ONNX Runtime could not open {path}: {exc}") from exc


def as_session(session_or_path: SessionOrPath, **kw):
    """A session for a path (opened with ``make_session(**kw)``), or the session itself."""
    if isinstance(session_or_path, (str, os.PathLike)):
        return make_session(session_or_path, **kw)
    if not hasattr(session_or_path, "run") or not hasattr(session_or_path, "get_inputs"):
        raise InferenceError(
            f"expected an ONNX file path or an onnxruntime.InferenceSession, got {type(session_or_path).__name__}"
        )
    return session_or_path


def input_names(session) -> list[str]:
    return [i.name for i in session.get_inputs()]


def _to_int64(value) -> np.ndarray:
    if hasattr(value, "detach"):  # torch tensor
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(value), dtype=np.int64)


def make_feed(session, encoded: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The feed dict for ``session``: only the inputs the graph declares, as int64.

    A graph that declares ``token_type_ids`` fed by a tokenizer that produces none gets zeros
    (what BERT uses when the argument is omitted); any other missing input is an error.
    """
    feed = {}
    for name in input_names(session):
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
    """Logits (first graph output) for one encoded batch (torch tensors or NumPy arrays).

    A path opens a new session on every call; pass a session (``make_session``) when predicting
    more than once."""
    session = as_session(session_or_path)
    out = session.run([session.get_outputs()[0].name], make_feed(session, encoded))[0]
    return np.asarray(out)


def predict_dataset(
    session_or_path: SessionOrPath,
    tokenizer,
    dataset,
    max_length: int,
    batch_size: int = 32,
) -> np.ndarray:
    """Logits for every example of a ``datasets.Dataset`` (``text`` column), in dataset order."""
    from .batches import iter_encoded

    session = as_session(session_or_path)
    if len(dataset) == 0:
        raise InferenceError("the dataset is empty: nothing to predict")
    parts = [predict_logits(session, enc) for enc, _, _ in iter_encoded(dataset, tokenizer, batch_size, max_length)]
    return np.concatenate(parts, axis=0)


def torch_predict_dataset(model, tokenizer, dataset, max_length: int, batch_size: int = 32) -> np.ndarray:
    """The PyTorch counterpart of :func:`predict_dataset` (same batches, eval mode, no grad)."""
    import torch

    from .batches import iter_encoded, model_inputs

    model.eval()
    parts = []
    with torch.inference_mode():
        for enc, _, _ in iter_encoded(dataset, tokenizer, batch_size, max_length):
            parts.append(model(**model_inputs(model, enc)).logits.float().cpu().numpy())
    return np.concatenate(parts, axis=0)


# ---- timing ------------------------------------------------------------------------------------
def synthetic_batch(batch: int, seq: int, vocab_size: int = 1000, seed: int = 0) -> dict[str, np.ndarray]:
    """A deterministic batch of shape ``(batch, seq)`` for timing: random token ids below
    ``vocab_size`` framed by [CLS]=101 ... [SEP]=102, a full attention mask, zero token types.

    Latency depends on the shape, not on which tokens are fed; the same arrays go to PyTorch and
    to every graph so the comparison is like for like.
    """
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
    """Validate ``[(batch, seq), ...]`` and return it as a tuple of int pairs."""
    out = []
    for shape in shapes:
        if len(tuple(shape)) != 2:
            raise InferenceError(f"each shape must be a (batch, sequence) pair, got {shape!r}")
        b, s = (int(v) for v in shape)
        if b < 1 or s < 2:
            raise InferenceError(f"each shape needs batch >= 1 and sequence >= 2, got ({b}, {s})")
        out.append((b, s))
    if not out:
        raise InferenceError("give at least one (batch, sequence) shape to time, e.g. [(1, 128)]")
    return tuple(out)


def latency_by_shape(
    onnx_or_session: SessionOrPath,
    shapes: Sequence[Sequence[int]] = ((1, 128),),
    warmup: int = 3,
    repeats: int = 20,
    threads: Optional[int] = None,
    graph_optimization: str = "all",
    max_seconds: Optional[float] = None,
    vocab_size: int = 1000,
) -> list[ShapeLatency]:
    """Median latency of one ``session.run`` per shape (warm-up first; see :func:`measure`).

    A path is opened with ``make_session(threads=..., graph_optimization=...)``; a session is used
    as it is (its own settings apply).
    """
    session = as_session(onnx_or_session, threads=threads, graph_optimization=graph_optimization)
    out_name = session.get_outputs()[0].name
    results = []
    for batch, seq in check_shapes(shapes):
        feed = make_feed(session, synthetic_batch(batch, seq, vocab_size))
        stats = measure(lambda: session.run([out_name], feed), warmup=warmup, repeats=repeats, max_seconds=max_seconds)
        results.append(ShapeLatency(batch, seq, stats))
    return results


@contextlib.contextmanager
def torch_threads(threads: Optional[int]) -> Iterator[None]:
    """Temporarily set PyTorch's intra-op thread count (None: leave it)."""
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


def torch_latency_by_shape(
    model,
    shapes: Sequence[Sequence[int]] = ((1, 128),),
    warmup: int = 3,
    repeats: int = 20,
    threads: Optional[int] = None,
    max_seconds: Optional[float] = None,
    vocab_size: int = 1000,
) -> list[ShapeLatency]:
    """The same measurement for a PyTorch model (a ``LoadedModel`` or an ``nn.Module``), eager,
    eval mode, under ``torch.inference_mode``, on the same synthetic batches.

    Measured here: with 2 threads on a 2-core machine that another process keeps busy, PyTorch's
    OpenMP threads wait on each other and a tiny model's forward pass went from 0.4 ms to 190 ms;
    with ``threads=1`` it stayed at 0.4 ms. Compare variants in one run, with the same threads.
    """
    import gc

    import torch

    from .batches import model_inputs

    gc.collect()  # free dead ONNX Runtime sessions: their spinning threads would compete with PyTorch
    module = getattr(model, "model", model)
    module.eval()
    results = []
    with torch_threads(threads), torch.inference_mode():
        for batch, seq in check_shapes(shapes):
            enc = model_inputs(module, {k: torch.from_numpy(v) for k, v in synthetic_batch(batch, seq, vocab_size).items()})
            stats = measure(lambda: module(**enc), warmup=warmup, repeats=repeats, max_seconds=max_seconds)
            results.append(ShapeLatency(batch, seq, stats))
    return results
