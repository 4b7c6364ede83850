"""The FP32 baseline: the FP32 graph scored once, with slices, logits, calibration texts and timing settings; FP32
is timed only beside a variant, in interleaved rounds (:func:`time_beside_fp32`)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from .. import runs
from ..graph import file_size_mib, save_tokenizer
from ..data.token_lengths import FILE_NOTE, ORDERS, SORTED_NOTE, LengthStats, ScoringWork
from ..runtime.ortinfer import ShapeLatency
from ..perf.scoring import ScoringSpeed
from .config import QuantizeError, TimingConfig

from ..runs.layout import BASELINE_DIR  # noqa: E402, F401  (the run layout names every file)
BASELINE_FILE = "baseline.json"
DEFAULT_CALIBRATION_TEXTS = 256  # training texts kept for calibration (static presets use up to 128)
DEFAULT_EVAL_BATCH_SIZE = 32  # examples scored per batch, padded to the longest
FP32_TIMINGS_FILE = "fp32_timings.json"
FP32 = "fp32"  # the FP32 graph's name in every side-by-side timing
TIMING_REPEATS_PER_ROUND = 3

if TYPE_CHECKING:
    from ..perf.speed import SpeedRun
FUSED_OP_TYPES = frozenset(
    {"Attention", "MultiHeadAttention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu", "FastGelu",
     "FusedMatMul", "QuickGelu", "SkipSimplifiedLayerNormalization"}
)


@dataclass(frozen=True)
class SliceInfo:
    """A slice as saved with the baseline: its definition and which examples are in it."""

    name: str
    description: str
    group: str
    indices: list[int]


@dataclass(frozen=True)
class EvalSet:
    """Examples a quantized graph is scored on, with their slices and the FP32 logits."""

    name: str  # "test", "golden"
    slice_set: str
    n: int
    examples_path: Path
    fp32_logits_path: Path
    slices: list[SliceInfo]

    def load_examples(self) -> list[dict]:
        return [json.loads(line) for line in Path(self.examples_path).read_text().splitlines() if line.strip()]

    def fp32_logits(self) -> np.ndarray:
        return np.load(self.fp32_logits_path)

    def membership(self) -> dict[str, np.ndarray]:
        out = {}
        for s in self.slices:
            m = np.zeros(self.n, dtype=bool)
            m[np.asarray(s.indices, dtype=np.int64)] = True
            out[s.name] = m
        return out


@dataclass(frozen=True)
class Baseline:
    """The FP32 graph's side of every comparison, computed once and saved (``baseline.json``)."""

    fp32_path: Path
    graph_kind: str  # "exported" or "fused"
    tokenizer_dir: Path
    class_names: list[str]
    max_length: int
    batch_size: int
    vocab_size: int
    eval_sets: list[EvalSet]
    calibration_path: Path
    timing: TimingConfig
    fp32_size_mib: float
    out_dir: Path
    # "length" (sorted batches, rows returned in order) or "file" (baselines saved before it was kept)
    scoring_order: str = "file"
    lengths: Optional[LengthStats] = None        # the evaluation split's token lengths
    scoring_work: Optional[ScoringWork] = None   # padded tokens in file order and sorted by length
    fp32_scoring: Optional[ScoringSpeed] = None  # rows/s of scoring the evaluation split, and its floor

    def eval_set(self, name: str) -> EvalSet:
        for e in self.eval_sets:
            if e.name == name:
                return e
        raise KeyError(f"no evaluation set {name!r}; sets: {[e.name for e in self.eval_sets]}")

    def calibration_texts(self) -> list[str]:
        return [json.loads(line)["text"] for line in Path(self.calibration_path).read_text().splitlines() if line.strip()]

    @property
    def scoring_note(self) -> str:
        return SORTED_NOTE if self.scoring_order == "length" else FILE_NOTE

    def load_tokenizer(self):
        from ..models.compat import load_tokenizer as _load_tokenizer

        return _load_tokenizer(self.tokenizer_dir)


@dataclass(frozen=True)
class Fp32Timing:
    """The FP32 graph's latency from one interleaved run beside ``beside``, under ``timing``."""

    timing: TimingConfig
    beside: str
    latency: list[ShapeLatency]


@dataclass(frozen=True)
class Fp32Timings:
    """``fp32_timings.json`` in the baseline's folder: per timing settings, the first interleaved run's FP32 figures."""

    runs: list[Fp32Timing] = field(default_factory=list)


def time_beside_fp32(baseline: Baseline, variants: Mapping[str, str | os.PathLike], t: TimingConfig, notes: list[str]) -> SpeedRun:
    """The FP32 graph and ``variants`` (name -> graph) timed in interleaved rounds, so load hits them alike; the first
    run per timing settings keeps FP32's figures."""
    from ..perf.speed import time_side_by_side

    side = time_side_by_side({FP32: baseline.fp32_path, **variants}, base=FP32, shapes=t.shapes, warmup=t.warmup,
                             rounds=t.repeats, repeats=TIMING_REPEATS_PER_ROUND, threads=t.threads,
                             max_seconds=t.max_seconds, vocab_size=baseline.vocab_size, device=t.device, retimes=t.retimes)
    notes += side.notes
    if side.contended:
        notes.append(f"speed {side.load.text()}: the speed-up is not a measured fact; time again on a quiet machine")
    kept = _fp32_timings(baseline)
    if variants and not any(r.timing == t for r in kept.runs):
        runs.save_result(Fp32Timings([*kept.runs, Fp32Timing(t, ", ".join(variants), side.latency[FP32])]),
                         Path(baseline.out_dir) / FP32_TIMINGS_FILE)
    return side


def _fp32_timings(baseline: Baseline) -> Fp32Timings:
    path = Path(baseline.out_dir) / FP32_TIMINGS_FILE
    return runs.load_result(Fp32Timings, path) if path.is_file() else Fp32Timings()


def fp32_latency(baseline: Baseline, timing: Optional[TimingConfig] = None) -> list[ShapeLatency]:
    """The FP32 graph's latency with ``timing`` (default: the baseline's): the FP32 side of the first run beside a
    variant with those settings, or, before any, timed now with nothing beside it (and not kept)."""
    t = timing if timing is not None else baseline.timing
    kept = next((r.latency for r in _fp32_timings(baseline).runs if r.timing == t), None)
    return list(kept) if kept is not None else time_beside_fp32(baseline, {}, t, []).latency[FP32]


def graph_kind(onnx_path: str | os.PathLike) -> str:
    """``"fused"`` when the graph holds ONNX Runtime's fused transformer ops, else ``"exported"``."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return "fused" if any(n.op_type in FUSED_OP_TYPES or n.domain == "com.microsoft" for n in model.graph.node) else "exported"


def _resolve_tokenizer(tokenizer, exp) -> tuple[Any, Optional[Path]]:
    """(tokenizer object, folder it can be reloaded from, or None)."""
    from ..models.compat import load_tokenizer as _load_tokenizer

    from ..models.load import BUILTIN_MODELS, load_tokenizer, resolve_model_path

    if tokenizer is None:
        if exp is None:
            raise QuantizeError(
                "cannot tell which tokenizer the graph was exported with: no export.json beside it. "
                "Pass tokenizer=<tokenizer, tokenizer folder, 'minilm' or a model folder> or export=<export folder>"
            )
        folder = Path(exp.tokenizer_dir)
        return _load_tokenizer(folder), folder
    if isinstance(tokenizer, (str, os.PathLike)):
        name = str(tokenizer)
        if name in BUILTIN_MODELS:
            return load_tokenizer(name), None
        folder = Path(name)
        if not folder.is_dir():
            raise QuantizeError(f"tokenizer {name!r} is neither {list(BUILTIN_MODELS)} nor a folder")
        path = resolve_model_path(name) if (folder / "config.json").is_file() else folder
        return _load_tokenizer(path), Path(path)
    if not callable(tokenizer) or not hasattr(tokenizer, "save_pretrained"):
        raise QuantizeError(f"tokenizer must be a Hugging Face tokenizer or a folder, got {type(tokenizer).__name__}")
    return tokenizer, None


def _write_jsonl(path: Path, rows: Iterable[dict]) -> Path:
    from ..core import serial

    return runs.atomic_write_text(path, "".join(json.dumps(serial.to_dict(r)) + "\n" for r in rows))


def _split(data, name: str):
    if isinstance(data, Mapping):  # datasets.DatasetDict is a dict; a Dataset is not
        if name not in data:
            raise QuantizeError(f"split {name!r} not in the data (splits: {list(data.keys())}); pass eval_split=/calibration_split=")
        return data[name]
    return data


@dataclass(frozen=True)
class BaselineConfig:
    """How the FP32 graph is scored once. ``batch_size`` matters: FP32 and static INT8 predict the same at any batch
    size, dynamic INT8 does not (its activation scales are computed per batch)."""

    eval_split: str = field(default="test", metadata={"help": "split scored against the labels"})
    calibration_split: str = field(default="train", metadata={"help": "split the calibration texts are drawn from"})
    max_length: Optional[int] = field(default=None, metadata={"help": "tokens per text (default: the export's)"})
    batch_size: int = field(default=DEFAULT_EVAL_BATCH_SIZE, metadata={"help": (
        "examples per batch when scoring (dynamic INT8 depends on it; 1 = one request at a time)")})
    calibration_samples: int = field(default=DEFAULT_CALIBRATION_TEXTS, metadata={"help": (
        "calibration texts drawn from calibration_split")})
    order: str = field(default="length", metadata={"help": (
        "batch order: length (sorted by token length, results in row order) or file")})
    golden: Optional[bool] = field(default=None, metadata={"help": (
        "add the reviews task's hand-written edge cases (default: when the classes are rotten/fresh)")})
    seed: int = field(default=0, metadata={"help": "random seed of the calibration draw"})
    timing: TimingConfig = field(default_factory=TimingConfig, metadata={"help": (
        "how the FP32 graph (and by default every variant) is timed")})

    def __post_init__(self) -> None:
        if self.timing is None:
            object.__setattr__(self, "timing", TimingConfig())
        if not isinstance(self.timing, TimingConfig):
            raise QuantizeError(f"timing must be a TimingConfig, got {type(self.timing).__name__}")
        for name in ("batch_size", "calibration_samples", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise QuantizeError(f"{name} must be a whole number, got {v!r}")
        if self.batch_size < 1:
            raise QuantizeError(f"batch_size must be >= 1 (examples per scoring batch; 1 = one request at a time), "
                                f"got {self.batch_size}")
        if self.calibration_samples < 0:
            raise QuantizeError(f"calibration_samples must be >= 0 (0: none kept), got {self.calibration_samples}")
        if self.max_length is not None and (isinstance(self.max_length, bool) or not isinstance(self.max_length, int)
                                            or self.max_length < 2):
            raise QuantizeError(f"max_length must be a whole number of tokens (at least 2), got {self.max_length!r}; leave it unset for "
                                f"the graph's own")
        if self.order not in ORDERS:
            raise QuantizeError(f"order must be one of {list(ORDERS)}, got {self.order!r}")


def prepare_baseline(
    onnx_path: str | os.PathLike | Any,
    data,
    out_dir: str | os.PathLike,
    cfg: Optional[BaselineConfig] = None,
    *,
    tokenizer=None,
    export=None,
    class_names: Optional[Sequence[str]] = None,
    slices=None,
    predicates: Optional[Mapping[str, Callable[[dict], bool]]] = None,
) -> Baseline:
    """Score the FP32 graph once and save in ``out_dir`` what every variant is compared on (timed beside each variant,
    not here). ``data``: a ``DatasetDict`` (a ``Dataset``: scoring only); tokenizer, class names and maximum length default
    to the export's; ``slices`` replaces the default collection, ``predicates`` ({name: function of an example}) add to it."""
    cfg = cfg if cfg is not None else BaselineConfig()
    if not isinstance(cfg, BaselineConfig):
        raise QuantizeError(f"cfg must be a BaselineConfig (e.g. BaselineConfig(batch_size=1)), got {type(cfg).__name__}")
    from ..graph.sources import export_of, graph_file
    from ..runtime.device import require_device

    try:
        src = graph_file(onnx_path)
    except TypeError:
        raise QuantizeError(f"expected the FP32 graph as a path, an ExportResult or a FusionReport, "
                            f"got {type(onnx_path).__name__}") from None
    require_device(cfg.timing.device)  # CUDA asked for and absent: one clear error before any work
    if not src.is_file():
        raise QuantizeError(f"no ONNX graph at {src}: export one first (workbench export, or run_export)")
    if data is None:
        raise QuantizeError("data is needed to score the FP32 graph: pass the DatasetDict from workbench.data.load.load_data")
    exp = export_of(src if isinstance(onnx_path, (str, os.PathLike)) else onnx_path, export)
    tok, tok_dir = _resolve_tokenizer(tokenizer, exp)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if tok_dir is None:
        tok_dir = save_tokenizer(tok, out / "tokenizer")
    ev = _split(data, cfg.eval_split)
    if len(ev) == 0:
        raise QuantizeError(f"the evaluation split {cfg.eval_split!r} is empty")
    names = _class_names(ev, exp, class_names)
    max_len = int(cfg.max_length or (exp.max_length if exp is not None else 128))
    has_train = isinstance(data, Mapping) and cfg.calibration_split in data
    train_texts = list(data[cfg.calibration_split]["text"]) if has_train else []
    from ..data.load import REVIEW_CLASSES
    from ..data.slices import golden_examples, golden_slices
    from ..data.token_lengths import scoring_work, stats_from_lengths, token_lengths
    from ..runtime.ortinfer import make_session

    sets = [(cfg.eval_split, ev.to_list(), _default_slices(ev, names, train_texts, slices, predicates))]
    if cfg.golden if cfg.golden is not None else list(names) == list(REVIEW_CLASSES):
        sets.append(("golden", golden_examples(), golden_slices(names, train_texts)))
    session, eval_sets, speed = make_session(src), [], None
    for set_name, examples, sset in sets:  # the evaluation split first: only its scoring is timed
        logits, timed = score_examples(session, src, tok, examples, max_len, cfg.batch_size, cfg.order,
                                       f"FP32, {set_name}" if eval_sets else "FP32", None if eval_sets else cfg.timing)
        speed = speed or timed
        eval_sets.append(_save_set(out, set_name, examples, sset, logits))
    lens = token_lengths(tok, [r["text"] for r in sets[0][1]], max_len)
    calib_path = _write_jsonl(out / "calibration_texts.jsonl", _calibration_rows(data[cfg.calibration_split], cfg) if has_train else [])

    vocab = int(getattr(exp.model_info, "vocab_size", 0) if exp is not None else 0) or int(getattr(tok, "vocab_size", 0) or 30522)
    base = Baseline(
        fp32_path=src.resolve(), graph_kind=graph_kind(src), tokenizer_dir=Path(tok_dir).resolve(), class_names=names,
        max_length=max_len, batch_size=cfg.batch_size, vocab_size=vocab, eval_sets=eval_sets,
        calibration_path=calib_path.resolve(), timing=cfg.timing, fp32_size_mib=file_size_mib(src), out_dir=out.resolve(),
        scoring_order=cfg.order, lengths=stats_from_lengths(lens, max_len, truncated=0),
        scoring_work=scoring_work(lens, cfg.batch_size), fp32_scoring=speed,
    )
    runs.save_result(base, out / BASELINE_FILE)
    return base


def _calibration_rows(train, cfg: BaselineConfig) -> list[dict]:
    picked = np.random.default_rng(cfg.seed).permutation(len(train))[: min(cfg.calibration_samples, len(train))]
    return [{"text": train[int(i)]["text"]} for i in picked]


def _class_names(ev, exp, given: Optional[Sequence[str]]) -> list[str]:
    """The class names in label order (given, the data's or the export's), checked against the model's classes."""
    feats = getattr(ev, "features", {}) or {}
    names = list(given) if given else (
        list(feats["label"].names) if "label" in feats and hasattr(feats["label"], "names") else
        list(exp.class_names) if exp is not None else None
    )
    if not names:
        raise QuantizeError("cannot tell the class names: pass class_names=[...] (in label order)")
    # a model whose classes were never named (LABEL_0, LABEL_1, ...) is matched by position, not by name
    named = exp is not None and exp.class_names and not all(re.fullmatch(r"LABEL_\d+", str(n)) for n in exp.class_names)
    if named:
        unknown = [n for n in names if n not in list(exp.class_names)]
        if unknown:
            raise QuantizeError(
                f"the data's label values {unknown} are not classes the model knows (its classes: {list(exp.class_names)}); "
                "give data labelled with the model's classes (the --data it was fine-tuned on), or fine-tune on this data first")
    return names


def _default_slices(ev, names: list[str], train_texts: list[str], slices, predicates):
    from ..data.slices import predicate_slice, slice_collection

    if slices is None:
        extra_cols = [c for c in ev.column_names if c not in ("text", "label")]
        return slice_collection("default", names, train_texts, extra_cols, ev if extra_cols else None, dict(predicates or {}))
    if predicates:
        return slices.extend([predicate_slice(k, v) for k, v in predicates.items()])
    return slices


def score_examples(graph, path: Path, tok, examples: list[dict], max_len: int, batch_size: int, order: str, label: str,
                   timing: Optional[TimingConfig] = None) -> tuple[np.ndarray, Optional[ScoringSpeed]]:
    """One graph's logits on ``examples`` in the shared batches (timed against the floor too with ``timing``)."""
    import datasets

    from ..perf.scoring import timed_scoring
    from ..runtime.engine import active_pool
    from ..runtime.ortinfer import predict_dataset

    pool = active_pool()  # a Ray pool (the audit's --engine ray): the same batches on its actors, which open ``path``
    ds = datasets.Dataset.from_list([{"text": e["text"], "label": int(e["label"])} for e in examples])
    if timing is None:
        return predict_dataset(graph if pool is None else path, tok, ds, max_len, batch_size, order=order, pool=pool,
                               label=label), None
    return timed_scoring(graph, path, tok, ds, max_len, batch_size, order, profile=cpu_profile(timing),
                         note=SORTED_NOTE if order == "length" else FILE_NOTE, pool=pool, label=label)


def _save_set(out: Path, set_name: str, examples: list[dict], sset, logits: np.ndarray) -> EvalSet:
    masks = sset.membership(examples)
    return EvalSet(
        name=set_name, slice_set=sset.name, n=len(examples),
        examples_path=_write_jsonl(out / f"{set_name}_examples.jsonl", examples).resolve(),
        fp32_logits_path=runs.atomic_write_npy(out / f"{set_name}_fp32_logits.npy", logits).resolve(),
        slices=[SliceInfo(s.name, s.description, s.group, np.flatnonzero(masks[s.name]).tolist()) for s in sset],
    )


def cpu_profile(timing: TimingConfig):
    """This machine's profile for the scoring floor (None on a GPU: the profile is the CPU's)."""
    if timing.device != "cpu":
        return None
    from ..perf.machine_profile import machine_profile

    return machine_profile(timing.threads)


def load_baseline(path: str | os.PathLike) -> Baseline:
    path = Path(path)
    if path.is_dir():
        path = path / BASELINE_FILE if (path / BASELINE_FILE).is_file() else path / BASELINE_DIR / BASELINE_FILE
    return runs.load_result(Baseline, path)

