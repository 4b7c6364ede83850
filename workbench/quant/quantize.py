"""INT8 quantization with ONNX Runtime, scored slice by slice against the FP32 graph.

One call, ``run_quantization(onnx_path, QuantConfig.dynamic_int8(), out_dir, data)``:

1. **Baseline** (:func:`prepare_baseline`, once per FP32 graph): the evaluation examples (test
   split and the golden edge cases), their slices (built-in, the user's columns and predicates) as
   index lists, the FP32 logits, calibration texts from the training split and the timing
   settings are saved under ``out_dir/baseline/``. Every variant (presets, re-quantizations,
   search candidates) is scored on exactly these, so their numbers can be compared.
2. **Quantize** with ``onnxruntime.quantization``: dynamic (weights INT8 offline, activations
   quantized per batch at run time) or static QDQ (activation ranges calibrated on training
   texts with MinMax, Entropy or Percentile: ONNX Runtime's calibrators and ``QDQQuantizer``,
   see :func:`calibrate` for why not ``quantize_static`` itself). ``DefaultTensorType`` is always
   set, which the fused graph needs (its contrib ops have no type information); static
   quantization first runs ``quant_pre_process(skip_symbolic_shape=True)`` (symbolic shape
   inference fails on these graphs; see FIELD_NOTES).
3. **Validate, time, size**: logits against the FP32 graph on the test split
   (:func:`workbench.graph.export.compare_logits`), latency of both graphs with the same settings in
   the same process (:func:`workbench.ortinfer.latency_by_shape`), size on disk.
4. **Drift**: :func:`workbench.quant.evaluate.evaluate_slices` on the test split and the golden set.
5. **Where it comes from**: :func:`node_errors`, the signal-to-quantization-noise ratio (SQNR,
   ``onnxruntime.quantization.qdq_loss_debug``'s formula) per quantized node, with both models fed
   the same batches.

Then :func:`requantize_excluding` re-runs the same configuration without the worst nodes and
:func:`constrained_search` picks the fastest configuration whose accuracy drop is within a budget
overall *and* on every slice. Results are frozen dataclasses saved as ``quantize.json`` and
``search.json``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import logging
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from .. import runs
from ..options import parse_choice
from .evaluate import MIN_SLICE_SIZE, SliceReport, evaluate_slices, softmax
from ..graph import Validation, file_size_mib, save_tokenizer
from ..metrics import Metric
from ..ortinfer import ShapeLatency

RESULT_FILE = "quantize.json"
SEARCH_FILE = "search.json"
BASELINE_DIR = "baseline"
BASELINE_FILE = "baseline.json"
QUANTIZED_FILE = "model.int8.onnx"
PREPROCESSED_FILE = "model.fp32.pre.onnx"

# Operator types ONNX Runtime 1.19 can quantize, per mode (IntegerOpsRegistry, QDQRegistry);
# a test checks these against onnxruntime.quantization.registry.
DYNAMIC_OP_TYPES = ("Attention", "Conv", "EmbedLayerNormalization", "Gather", "LSTM", "MatMul", "Transpose")
STATIC_OP_TYPES = (
    "AveragePool", "BatchNormalization", "Clip", "Conv", "ConvTranspose", "Gather", "Gemm", "InstanceNormalization",
    "LayerNormalization", "MatMul", "MaxPool", "Relu", "Reshape", "Resize", "Split", "Squeeze", "Transpose",
    "Unsqueeze", "Where",
)
STATIC_DEFAULT_OP_TYPES = ("MatMul", "Gemm")
FUSED_OP_TYPES = frozenset(
    {"Attention", "MultiHeadAttention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu", "FastGelu",
     "FusedMatMul", "QuickGelu", "SkipSimplifiedLayerNormalization"}
)
SQNR_EPS = float(np.finfo("float").eps)  # qdq_loss_debug's floor for norms


class QuantizeError(ValueError):
    """A quantization request that cannot be carried out; the message says what to do."""


class QuantMode(str, enum.Enum):
    DYNAMIC = "dynamic"
    STATIC = "static"


class Calibration(str, enum.Enum):
    MINMAX = "minmax"
    ENTROPY = "entropy"
    PERCENTILE = "percentile"


class QType(str, enum.Enum):
    QINT8 = "qint8"
    QUINT8 = "quint8"


class QFormat(str, enum.Enum):
    """How a static graph stores its INT8 operations: QDQ (QuantizeLinear/DequantizeLinear pairs
    around float ops, which ONNX Runtime fuses at load time) or QOperator (QLinearMatMul and
    friends written into the graph)."""

    QDQ = "qdq"
    QOPERATOR = "qoperator"


def _as_enum(cls, value, field_name: str, hint: str):
    return parse_choice(cls, value, field_name, QuantizeError, hint)


@dataclass(frozen=True)
class QuantConfig:
    """How to quantize. Use a preset (``QuantConfig.dynamic_int8()``, ``QuantConfig.static_qdq()``)
    and override fields by keyword.

    - ``mode``: ``dynamic`` (weights INT8, activations quantized per batch at run time; no
      calibration) or ``static`` (QDQ format; activation ranges from ``samples`` calibration
      texts with ``calibration`` = minmax | entropy | percentile). ``histogram_bins`` (0: 512 for
      entropy, 2048 for percentile) and ``percentile`` (99.999) tune the histogram methods.
    - ``weight_type``: qint8 (signed, the usual choice) or quint8. ``activation_type`` (static
      only; dynamic activations are always uint8 in ONNX Runtime). Note: in static QDQ with one
      scale per tensor, ONNX Runtime 1.19 quantizes MatMul weights with the *activation* type
      (its QDQMatMul marks every input as an activation); ``weight_type`` applies per channel.
    - ``per_channel``: one scale per output column of each weight instead of one per tensor.
    - ``reduce_range``: 7-bit weights, for CPUs without VNNI where 8-bit products can overflow.
    - ``op_types``: operator types to quantize (empty: ONNX Runtime's default for dynamic,
      ``MatMul``/``Gemm`` for static). ``nodes_to_exclude``: node names left in FP32 (the names
      of the FP32 graph; see :attr:`QuantResult.node_errors` for the ones that hurt most).
    - ``quant_format`` (static only): ``qdq`` or ``qoperator`` (see :class:`QFormat`).
    - ``activation_symmetric`` (static only): activation ranges symmetric around zero (zero point 0;
      ONNX Runtime's ``ActivationSymmetric``; use with ``activation_type='qint8'``).
    - ``matmul_const_b_only`` (static only): quantize only MatMuls whose second input is a weight,
      leaving the activation-by-activation products of attention (Q·Kᵀ, softmax·V) in FP32, as
      dynamic quantization always does (ONNX Runtime's ``MatMulConstBOnly``, applied here to QDQ too
      by listing those nodes in ``nodes_to_exclude``).
    - ``exclude_worst``: quantize once, rank the quantized nodes by their own SQNR (the
      :func:`node_errors` ranking, on calibration texts: no test data), then quantize again leaving
      the ``exclude_worst`` worst nodes in FP32 (:attr:`QuantResult.excluded_nodes` names them).
    - ``tolerance`` / ``min_label_agreement``: how the quantized graph is validated against the
      FP32 graph's logits (INT8 moves logits by about 0.01-0.3 on MiniLM; labels mostly agree).
    """

    mode: QuantMode = QuantMode.DYNAMIC
    weight_type: QType = QType.QINT8
    activation_type: QType = QType.QUINT8
    per_channel: bool = False
    reduce_range: bool = False
    calibration: Calibration = Calibration.MINMAX
    samples: int = 128
    calibration_batch_size: int = 8
    histogram_bins: int = 0
    percentile: float = 99.999
    op_types: tuple[str, ...] = ()
    nodes_to_exclude: tuple[str, ...] = ()
    quant_format: QFormat = QFormat.QDQ
    activation_symmetric: bool = False
    matmul_const_b_only: bool = False
    exclude_worst: int = 0
    tolerance: float = 1.0
    min_label_agreement: float = 0.9
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _as_enum(QuantMode, self.mode, "mode", "use 'dynamic' (no calibration) or 'static' (QDQ, calibrated)"))
        object.__setattr__(self, "weight_type", _as_enum(QType, self.weight_type, "weight_type", "qint8 is the usual choice"))
        object.__setattr__(self, "activation_type", _as_enum(QType, self.activation_type, "activation_type", "quint8 is the usual choice"))
        object.__setattr__(self, "calibration", _as_enum(Calibration, self.calibration, "calibration", "minmax is the fastest"))
        object.__setattr__(self, "quant_format", _as_enum(QFormat, self.quant_format, "quant_format", "qdq is the usual choice"))
        if self.mode is QuantMode.DYNAMIC and (self.quant_format is not QFormat.QDQ or self.activation_symmetric or self.matmul_const_b_only):
            raise QuantizeError(
                f"quant_format={self.quant_format.value!r}, activation_symmetric={self.activation_symmetric} and "
                f"matmul_const_b_only={self.matmul_const_b_only} apply to static quantization only (dynamic quantization "
                "writes integer operators, computes activation scales per batch and quantizes only weight MatMuls). "
                "Use mode='static' or leave them at their defaults"
            )
        if isinstance(self.op_types, str) or isinstance(self.nodes_to_exclude, str):
            raise QuantizeError(
                f"op_types and nodes_to_exclude are lists of names, got a string "
                f"({self.op_types!r} / {self.nodes_to_exclude!r}); write ('MatMul',) instead of 'MatMul'"
            )
        object.__setattr__(self, "op_types", tuple(str(o) for o in self.op_types))
        object.__setattr__(self, "nodes_to_exclude", tuple(dict.fromkeys(str(n) for n in self.nodes_to_exclude)))
        allowed = DYNAMIC_OP_TYPES if self.mode is QuantMode.DYNAMIC else STATIC_OP_TYPES
        bad = [o for o in self.op_types if o not in allowed]
        if bad:
            raise QuantizeError(
                f"op_types {bad} cannot be quantized in {self.mode.value} mode; allowed: {list(allowed)}. "
                "Leave op_types empty for the default set"
            )
        if self.mode is QuantMode.DYNAMIC and self.activation_type is not QType.QUINT8:
            raise QuantizeError(
                f"activation_type={self.activation_type.value!r} is only for static quantization: dynamic "
                "quantization always quantizes activations to uint8 (DynamicQuantizeLinear). Use mode='static' "
                "or leave activation_type at 'quint8'"
            )
        if not isinstance(self.exclude_worst, int) or isinstance(self.exclude_worst, bool) or self.exclude_worst < 0:
            raise QuantizeError(f"exclude_worst must be a whole number of nodes (0: none), got {self.exclude_worst!r}")
        for name in ("samples", "calibration_batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise QuantizeError(f"{name} must be a positive integer, got {v!r}")
        if self.mode is QuantMode.STATIC and self.samples < self.calibration_batch_size:
            raise QuantizeError(
                f"samples ({self.samples}) must be at least calibration_batch_size ({self.calibration_batch_size}); "
                "raise samples or lower the batch size"
            )
        if self.histogram_bins != 0 and not (256 <= self.histogram_bins <= 8192):
            raise QuantizeError(
                f"histogram_bins must be 0 (the method's default) or between 256 and 8192, got {self.histogram_bins}; "
                "entropy needs more bins than its 128 quantized bins to search anything"
            )
        if not 90.0 <= self.percentile < 100.0:
            raise QuantizeError(f"percentile must be in [90, 100), got {self.percentile}; 99.999 is ONNX Runtime's default")
        if not (self.tolerance > 0 and math.isfinite(self.tolerance)):
            raise QuantizeError(f"tolerance must be a positive number of logits, got {self.tolerance}; try 1.0")
        if not 0.0 <= self.min_label_agreement <= 1.0:
            raise QuantizeError(f"min_label_agreement must be a fraction from 0 to 1, got {self.min_label_agreement}")

    # -- presets ---------------------------------------------------------------------------
    @classmethod
    def dynamic_int8(cls, **kw) -> "QuantConfig":
        """Dynamic, signed INT8 weights, one scale per tensor: the fastest to produce, no data needed."""
        return cls(**{"mode": QuantMode.DYNAMIC, **kw})

    @classmethod
    def dynamic_int8_per_channel(cls, **kw) -> "QuantConfig":
        """Dynamic INT8 with one scale per output column: smaller weight error, same speed."""
        return cls(**{"mode": QuantMode.DYNAMIC, "per_channel": True, **kw})

    @classmethod
    def dynamic_int8_reduce_range(cls, **kw) -> "QuantConfig":
        """Dynamic INT8 with 7-bit weights (for CPUs without VNNI; costs accuracy elsewhere)."""
        return cls(**{"mode": QuantMode.DYNAMIC, "reduce_range": True, **kw})

    @classmethod
    def dynamic_uint8(cls, **kw) -> "QuantConfig":
        """Dynamic with unsigned (QUInt8) weights."""
        return cls(**{"mode": QuantMode.DYNAMIC, "weight_type": QType.QUINT8, **kw})

    @classmethod
    def static_qdq(cls, calibration: str | Calibration = "minmax", samples: int = 128, **kw) -> "QuantConfig":
        """Static INT8 in QDQ format, MatMul/Gemm, activation ranges calibrated on ``samples``
        training texts with ``calibration`` = minmax | entropy | percentile."""
        return cls(**{"mode": QuantMode.STATIC, "calibration": calibration, "samples": samples,
                      "op_types": STATIC_DEFAULT_OP_TYPES, **kw})

    @classmethod
    def static_best(cls, **kw) -> "QuantConfig":
        """The static recipe that measured best on the fine-tuned MiniLM (the table in the README):
        MinMax calibration, one scale per weight column, only the weight MatMuls quantized
        (attention's activation products stay FP32), and the 6 nodes with the worst SQNR on
        calibration texts left in FP32 (on MiniLM: the feed-forward output projections, whose inputs
        after GELU have the widest ranges)."""
        return cls.static_qdq("minmax", **{"samples": 128, "per_channel": True, "matmul_const_b_only": True,
                                              "exclude_worst": 6, **kw})

    @classmethod
    def presets(cls) -> dict[str, "QuantConfig"]:
        """The named presets, as a view or the CLI lists them."""
        return {
            "dynamic": cls.dynamic_int8(),
            "dynamic-per-channel": cls.dynamic_int8_per_channel(),
            "dynamic-reduce-range": cls.dynamic_int8_reduce_range(),
            "dynamic-uint8": cls.dynamic_uint8(),
            "static-minmax": cls.static_qdq("minmax"),
            "static-entropy": cls.static_qdq("entropy"),
            "static-percentile": cls.static_qdq("percentile"),
            "static": cls.static_best(),
        }

    @classmethod
    def preset(cls, name: str, **kw) -> "QuantConfig":
        table = cls.presets()
        if name not in table:
            raise QuantizeError(f"no quantization preset {name!r}; presets: {list(table)}")
        return dataclasses.replace(table[name], **kw) if kw else table[name]

    @property
    def label(self) -> str:
        """``name`` if given, else a short description (``dynamic-qint8-pc``, ``static-entropy-128``)."""
        if self.name:
            return self.name
        if self.mode is QuantMode.DYNAMIC:
            parts = ["dynamic", self.weight_type.value]
        else:
            parts = ["static", self.calibration.value, str(self.samples)]
            if self.weight_type is not QType.QINT8 or self.activation_type is not QType.QUINT8:
                parts.append(f"w{self.weight_type.value}-a{self.activation_type.value}")
            if self.quant_format is QFormat.QOPERATOR:
                parts.append("qop")
            if self.activation_symmetric:
                parts.append("sym")
            if self.matmul_const_b_only:
                parts.append("constb")
        if self.per_channel:
            parts.append("pc")
        if self.reduce_range:
            parts.append("rr")
        if self.nodes_to_exclude:
            parts.append(f"excl{len(self.nodes_to_exclude)}")
        if self.exclude_worst:
            parts.append(f"worst{self.exclude_worst}")
        return "-".join(parts)

    def resolved_op_types(self) -> tuple[str, ...]:
        if self.op_types:
            return self.op_types
        return DYNAMIC_OP_TYPES if self.mode is QuantMode.DYNAMIC else STATIC_DEFAULT_OP_TYPES


# ----------------------------------------------------------------------------------------------
# baseline: what the FP32 graph contributes, saved once
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimingConfig:
    """How latency is measured (the same for the FP32 graph and every quantized graph)."""

    shapes: tuple[tuple[int, int], ...] = ((1, 128),)
    warmup: int = 3
    repeats: int = 20
    threads: Optional[int] = None
    max_seconds: Optional[float] = 20.0
    # where the FP32 and INT8 graphs are timed ("cpu", "cuda", "cuda:N"; CUDA with I/O binding). Accuracy
    # is scored on the CPU provider either way, so the slice comparison does not mix devices.
    device: str = "cpu"

    def __post_init__(self) -> None:
        from ..device import normalize_device
        from ..ortinfer import check_shapes

        object.__setattr__(self, "device", normalize_device(self.device))
        object.__setattr__(self, "shapes", check_shapes(self.shapes))
        if self.repeats < 1 or self.warmup < 0:
            raise QuantizeError(f"repeats must be >= 1 and warmup >= 0, got repeats={self.repeats}, warmup={self.warmup}")

    @classmethod
    def quick(cls, **kw) -> "TimingConfig":
        """Few repeats at a short sequence: tests and workshops (numbers are rough)."""
        return cls(**{"shapes": ((1, 64),), "warmup": 1, "repeats": 5, "max_seconds": 5.0, **kw})


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

    def describe(self) -> dict[str, tuple[str, str]]:
        return {s.name: (s.description, s.group) for s in self.slices}


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

    def eval_set(self, name: str) -> EvalSet:
        for e in self.eval_sets:
            if e.name == name:
                return e
        raise KeyError(f"no evaluation set {name!r}; sets: {[e.name for e in self.eval_sets]}")

    def calibration_texts(self) -> list[str]:
        return [json.loads(line)["text"] for line in Path(self.calibration_path).read_text().splitlines() if line.strip()]

    def load_tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.tokenizer_dir), local_files_only=True)


def graph_kind(onnx_path: str | os.PathLike) -> str:
    """``"fused"`` when the graph holds ONNX Runtime's fused transformer ops, else ``"exported"``."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return "fused" if any(n.op_type in FUSED_OP_TYPES or n.domain == "com.microsoft" for n in model.graph.node) else "exported"


def _find_export(onnx_path: Path, export) -> Any:
    """The ExportResult describing a graph: given, or ``export.json`` beside the graph or one up."""
    from ..graph import ExportResult, load_export

    if isinstance(export, ExportResult):
        return export
    if export is not None:
        return load_export(export)
    for folder in (onnx_path.parent, onnx_path.parent.parent):
        if (folder / "export.json").is_file():
            return load_export(folder)
    return None


def _graph_source(obj, export) -> tuple[Path, Any]:
    """(graph path, export metadata) from a path, an ``ExportResult`` (``onnx_path``) or a
    ``FusionReport`` (``fused_path``; its export is ``export=`` or found beside the graph)."""
    from ..graph import ExportResult

    if isinstance(obj, ExportResult):
        return Path(obj.onnx_path), export if export is not None else obj
    for attr in ("fused_path", "onnx_path"):
        if hasattr(obj, attr) and not isinstance(obj, (str, os.PathLike)):
            found = getattr(obj, attr)
            if export is None and isinstance(getattr(obj, "export", None), ExportResult):
                export = obj.export
            if export is None and getattr(obj, "export_path", None):  # a FusionReport names its export
                export = obj.export_path
            return Path(found), export
    if not isinstance(obj, (str, os.PathLike)):
        raise QuantizeError(
            f"expected the FP32 graph as a path, an ExportResult or a FusionReport, got {type(obj).__name__}"
        )
    return Path(obj), export


def _resolve_tokenizer(tokenizer, exp) -> tuple[Any, Optional[Path]]:
    """(tokenizer object, folder it can be reloaded from, or None)."""
    from transformers import AutoTokenizer

    from ..models import BUILTIN_MODELS, load_tokenizer, resolve_model_path

    if tokenizer is None:
        if exp is None:
            raise QuantizeError(
                "cannot tell which tokenizer the graph was exported with: no export.json beside it. "
                "Pass tokenizer=<tokenizer, tokenizer folder, 'minilm' or a model folder> or export=<export folder>"
            )
        folder = Path(exp.tokenizer_dir)
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True), folder
    if isinstance(tokenizer, (str, os.PathLike)):
        name = str(tokenizer)
        if name in BUILTIN_MODELS:
            return load_tokenizer(name), None
        folder = Path(name)
        if not folder.is_dir():
            raise QuantizeError(f"tokenizer {name!r} is neither {list(BUILTIN_MODELS)} nor a folder")
        path = resolve_model_path(name) if (folder / "config.json").is_file() else folder
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True), Path(path)
    if not callable(tokenizer) or not hasattr(tokenizer, "save_pretrained"):
        raise QuantizeError(f"tokenizer must be a Hugging Face tokenizer or a folder, got {type(tokenizer).__name__}")
    return tokenizer, None


def _write_jsonl(path: Path, rows: Iterable[dict]) -> Path:
    from .. import serial

    return runs.atomic_write_text(path, "".join(json.dumps(serial.to_dict(r)) + "\n" for r in rows))


def _is_dict_of_splits(data) -> bool:
    return isinstance(data, Mapping)  # datasets.DatasetDict is a dict; a Dataset is not


def _split(data, name: str):
    if _is_dict_of_splits(data):
        if name not in data:
            raise QuantizeError(f"split {name!r} not in the data (splits: {list(data.keys())}); pass eval_split=/calibration_split=")
        return data[name]
    return data


def prepare_baseline(
    onnx_path: str | os.PathLike | Any,
    data,
    out_dir: str | os.PathLike,
    *,
    tokenizer=None,
    export=None,
    class_names: Optional[Sequence[str]] = None,
    slices=None,
    predicates: Optional[Mapping[str, Callable[[dict], bool]]] = None,
    golden: Optional[bool] = None,
    eval_split: str = "test",
    calibration_split: str = "train",
    max_length: Optional[int] = None,
    batch_size: int = 32,
    calibration_samples: int = 256,
    timing: Optional[TimingConfig] = None,
    seed: int = 0,
) -> Baseline:
    """Score the FP32 graph once and save what every quantized variant is compared on, in
    ``out_dir`` (``baseline.json``, the examples, FP32 logits, calibration texts).

    ``batch_size`` is how examples are grouped when scored (padded to the longest in each batch):
    FP32 and static INT8 give the same predictions at any batch size, dynamic INT8 does not (its
    activation scales are computed per batch); use 1 to score as a one-request-at-a-time server.

    ``onnx_path``: the FP32 graph (exported or fused) or an ``ExportResult``. ``data``: a
    ``DatasetDict`` (``eval_split`` is scored, ``calibration_split`` calibrates) or, for scoring
    only, a ``Dataset``. The tokenizer, class names and maximum length come from the export
    (``export.json`` beside the graph, or ``export=``) unless given.

    Slices: ``slices`` (a SliceSet) replaces the default collection; otherwise the built-in
    slices plus one per user column of the data, plus ``predicates`` ({name: function of an
    example}). ``golden`` adds the hand-written edge cases of the built-in reviews task (default:
    when the classes are the reviews' rotten/fresh).
    """
    from ..data import REVIEW_CLASSES
    from ..ortinfer import make_session, predict_dataset
    from ..slices import golden_examples, golden_slices, slice_collection

    src, export = _graph_source(onnx_path, export)
    if batch_size < 1 or calibration_samples < 0:
        raise QuantizeError(f"batch_size must be >= 1 and calibration_samples >= 0, got {batch_size} and {calibration_samples}")
    if not src.is_file():
        raise QuantizeError(f"no ONNX graph at {src}: export one first (workbench export, or run_export)")
    if data is None:
        raise QuantizeError("data is needed to score the FP32 graph: pass the DatasetDict from workbench.data.load_data")
    exp = _find_export(src, export)
    tok, tok_dir = _resolve_tokenizer(tokenizer, exp)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if tok_dir is None:
        tok_dir = save_tokenizer(tok, out / "tokenizer")

    ev = _split(data, eval_split)
    if len(ev) == 0:
        raise QuantizeError(f"the evaluation split {eval_split!r} is empty")
    feats = getattr(ev, "features", {}) or {}
    names = list(class_names) if class_names else (
        list(feats["label"].names) if "label" in feats and hasattr(feats["label"], "names") else
        list(exp.class_names) if exp is not None else None
    )
    if not names:
        raise QuantizeError("cannot tell the class names: pass class_names=[...] (in label order)")
    max_len = int(max_length or (exp.max_length if exp is not None else 128))
    has_train = _is_dict_of_splits(data) and calibration_split in data
    train_texts = list(data[calibration_split]["text"]) if has_train else []

    rows = ev.to_list()
    if slices is None:
        extra_cols = [c for c in ev.column_names if c not in ("text", "label")]
        slices = slice_collection("default", names, train_texts, extra_cols, ev if extra_cols else None, dict(predicates or {}))
    elif predicates:
        from ..slices import predicate_slice

        slices = slices.extend([predicate_slice(k, v) for k, v in predicates.items()])

    session = make_session(src)
    eval_sets = []

    def add_set(set_name: str, examples: list[dict], sset) -> None:
        import datasets

        ds = datasets.Dataset.from_list([{"text": r["text"], "label": int(r["label"])} for r in examples])
        logits = predict_dataset(session, tok, ds, max_len, batch_size)
        masks = sset.membership(examples)
        eval_sets.append(EvalSet(
            name=set_name, slice_set=sset.name, n=len(examples),
            examples_path=_write_jsonl(out / f"{set_name}_examples.jsonl", examples).resolve(),
            fp32_logits_path=runs.atomic_write_npy(out / f"{set_name}_fp32_logits.npy", logits).resolve(),
            slices=[SliceInfo(s.name, s.description, s.group, np.flatnonzero(masks[s.name]).tolist()) for s in sset],
        ))

    add_set(eval_split, rows, slices)
    use_golden = golden if golden is not None else list(names) == list(REVIEW_CLASSES)
    if use_golden:
        add_set("golden", golden_examples(), golden_slices(names, train_texts))

    calib_rows = []
    if has_train and len(data[calibration_split]):
        tr = data[calibration_split]
        order = np.random.default_rng(seed).permutation(len(tr))[: min(calibration_samples, len(tr))]
        calib_rows = [{"text": tr[int(i)]["text"]} for i in order]
    calib_path = _write_jsonl(out / "calibration_texts.jsonl", calib_rows)

    vocab = int(getattr(exp.model_info, "vocab_size", 0) if exp is not None else 0) or int(getattr(tok, "vocab_size", 0) or 30522)
    base = Baseline(
        fp32_path=src.resolve(), graph_kind=graph_kind(src), tokenizer_dir=Path(tok_dir).resolve(), class_names=names,
        max_length=max_len, batch_size=batch_size, vocab_size=vocab, eval_sets=eval_sets,
        calibration_path=calib_path.resolve(), timing=timing or TimingConfig(),
        fp32_size_mib=file_size_mib(src), out_dir=out.resolve(),
    )
    runs.save_result(base, out / BASELINE_FILE)
    return base


def load_baseline(path: str | os.PathLike) -> Baseline:
    path = Path(path)
    if path.is_dir():
        path = path / BASELINE_FILE if (path / BASELINE_FILE).is_file() else path / BASELINE_DIR / BASELINE_FILE
    return runs.load_result(Baseline, path)


# ----------------------------------------------------------------------------------------------
# quantizing
# ----------------------------------------------------------------------------------------------
def _encoded_feeds(session, tokenizer, texts: Sequence[str], max_length: int, batch_size: int, pad_to_max: bool) -> list[dict]:
    from ..batches import encode
    from ..ortinfer import make_feed

    return [make_feed(session, encode(tokenizer, list(texts[i : i + batch_size]), max_length, pad_to_max))
            for i in range(0, len(texts), batch_size)]


def _reader(feeds: list[dict]):
    from onnxruntime.quantization import CalibrationDataReader

    class _ListReader(CalibrationDataReader):
        """Hands out the same precomputed batches, in order (``rewind`` starts over)."""

        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self):
            return next(self._it, None)

        def rewind(self) -> None:
            self._it = iter(feeds)

    return _ListReader()


@contextlib.contextmanager
def _working_directory(path):
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def preprocess_for_static(fp32_path: str | os.PathLike, out_path: str | os.PathLike) -> Path:
    """``quant_pre_process`` before static quantization: constant folding and shape inference.

    The QDQ quantizer only quantizes tensors whose type it knows. On the *fused* graph ONNX's own
    shape inference knows nothing past the contrib ops (Attention, SkipLayerNormalization...), so
    ONNX Runtime's symbolic shape inference is needed (it handles them; measured here). On the
    *exported* graph symbolic inference fails ("Incomplete symbolic shape inference", FIELD_NOTES)
    and ONNX shape inference is enough, so it is skipped there.
    """
    from onnxruntime.quantization.shape_inference import quant_pre_process

    out_path = Path(out_path)
    symbolic = graph_kind(fp32_path) == "fused"
    with runs.atomic_path(out_path) as tmp, tempfile.TemporaryDirectory(prefix="workbench-preprocess-") as scratch:
        try:
            # ONNX Runtime's symbolic shape inference saves a failing model as
            # ./sym_shape_infer_temp.onnx (+ a .data file): work from a scratch folder instead.
            # Both paths are made absolute *before* changing directory: a relative run folder
            # (`workbench audit --out out`) once resolved against the scratch folder.
            src_abs, tmp_abs = str(Path(fp32_path).resolve()), str(tmp.resolve())
            with _working_directory(scratch):
                quant_pre_process(src_abs, tmp_abs, skip_symbolic_shape=not symbolic)
        except Exception as exc:
            raise QuantizeError(
                f"pre-processing {fp32_path} for static quantization failed "
                f"({'with' if symbolic else 'without'} symbolic shape inference): {type(exc).__name__}: {exc}. "
                "Dynamic quantization needs no pre-processing: try QuantConfig.dynamic_int8()"
            ) from exc
    return out_path


def _check_nodes_exist(float_path: Path, nodes: Sequence[str]) -> None:
    import difflib

    import onnx

    if not nodes:
        return
    names = [n.name for n in onnx.load(str(float_path), load_external_data=False).graph.node]
    known = set(names)
    missing = [n for n in nodes if n not in known]
    if missing:
        hints = {m: difflib.get_close_matches(m, names, n=2) for m in missing}
        raise QuantizeError(
            f"nodes_to_exclude names {missing} are not nodes of {float_path.name}; close matches: {hints}. "
            "Use the node names of the FP32 graph (QuantResult.node_errors lists them)"
        )


class _PreprocessingAdvice(logging.Filter):
    """Drops ONNX Runtime's "Please consider (to run) pre-processing before quantization" records."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.pathname.replace(os.sep, "/").endswith("onnxruntime/quantization/quantize.py")
                    and str(record.msg).startswith("Please consider"))


@contextlib.contextmanager
def _without_preprocessing_advice():
    """Silence ``quantize_dynamic``'s advice to run ``quant_pre_process`` first, for this call only.

    Why silence rather than follow it: the pre-processing (symbolic shape inference, basic graph
    optimization) serves static quantization, where activation types and shapes decide what gets a
    QDQ pair; ``preprocess_for_static`` runs it there. Dynamic INT8 quantizes constant weights and
    scales activations at run time: on the fused tiny BERT, ``quantize_dynamic`` produced the same
    operators with and without pre-processing (QAttention 2, MatMulInteger 8,
    QEmbedLayerNormalization 1, DynamicQuantizeLinear 10; checked here), while the warning, a
    root-logger record with a URL, was printed once per variant, re-quantization and search
    candidate. Only that record is dropped; every other log record passes.
    """
    root = logging.getLogger()
    f = _PreprocessingAdvice()
    root.addFilter(f)
    try:
        yield
    finally:
        root.removeFilter(f)


def quantize_graph(fp32_path: str | os.PathLike, cfg: QuantConfig, out_path: str | os.PathLike,
                   calibration_feeds: Optional[list[dict]] = None) -> tuple[Path, Path]:
    """Quantize one graph file with ``cfg``; returns (quantized path, float graph the node names
    refer to: the pre-processed copy for static, the input itself for dynamic)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32_path, out_path = Path(fp32_path), Path(out_path)
    qtype = {QType.QINT8: QuantType.QInt8, QType.QUINT8: QuantType.QUInt8}
    extra: dict[str, Any] = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    op_types = list(cfg.op_types) or None
    if cfg.mode is QuantMode.DYNAMIC:
        float_path = fp32_path
        _check_nodes_exist(float_path, cfg.nodes_to_exclude)
        with runs.atomic_path(out_path) as tmp, _without_preprocessing_advice():
            quantize_dynamic(
                str(fp32_path), str(tmp), op_types_to_quantize=op_types, per_channel=cfg.per_channel,
                reduce_range=cfg.reduce_range, weight_type=qtype[cfg.weight_type],
                nodes_to_exclude=list(cfg.nodes_to_exclude) or None, extra_options=extra,
            )
        return out_path, float_path
    if not calibration_feeds:
        raise QuantizeError("static quantization needs calibration texts: give data with a training split")
    float_path = preprocess_for_static(fp32_path, out_path.with_name(PREPROCESSED_FILE))
    _check_nodes_exist(float_path, cfg.nodes_to_exclude)
    if cfg.matmul_const_b_only:
        cfg = dataclasses.replace(cfg, nodes_to_exclude=tuple(dict.fromkeys([*cfg.nodes_to_exclude, *activation_matmuls(float_path)])))
    if cfg.activation_symmetric:
        extra["ActivationSymmetric"] = True
    ranges = calibrate(float_path, cfg, calibration_feeds)
    with runs.atomic_path(out_path) as tmp:
        _quantize_qdq(float_path, tmp, cfg, ranges, extra)
    return out_path, float_path


def activation_matmuls(float_path: str | os.PathLike) -> list[str]:
    """Names of the MatMul nodes whose inputs are both computed (no weight initializer), such as
    attention's Q·Kᵀ and softmax·V: what ``matmul_const_b_only`` leaves in FP32."""
    import onnx

    model = onnx.load(str(float_path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    consts = {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return [n.name for n in model.graph.node
            if n.op_type == "MatMul" and not any(i in inits or i in consts for i in n.input)]


def calibrate(float_path: str | os.PathLike, cfg: QuantConfig, feeds: list[dict]):
    """Activation ranges of the graph's quantizable tensors on ``feeds`` (ONNX Runtime's calibrators).

    ``quantize_static`` in onnxruntime 1.19.2 forwards only four calibration options and never the
    histogram size: Entropy then runs with 128 bins = 128 quantized bins, a search with a single
    candidate, so it returns the MinMax ranges (measured here: byte-identical models). The
    calibrator is therefore created here, with ``cfg.histogram_bins``, and the ranges handed to
    ``QDQQuantizer`` just as ``quantize_static`` does after its own calibration.

    Not "CalibMaxIntermediateOutputs" either: in 1.19.2 ``MinMaxCalibrater.collect_data`` empties
    each full chunk of batches without merging its ranges, so the ranges would come from the last
    partial chunk alone (or it raises "No data is collected").
    """
    import tempfile

    from onnxruntime.quantization import CalibrationMethod, create_calibrator

    method = {Calibration.MINMAX: CalibrationMethod.MinMax, Calibration.ENTROPY: CalibrationMethod.Entropy,
              Calibration.PERCENTILE: CalibrationMethod.Percentile}[cfg.calibration]
    options: dict[str, Any] = {}
    if cfg.calibration is Calibration.ENTROPY:
        options = {"num_bins": cfg.histogram_bins or 512, "num_quantized_bins": 128}
    elif cfg.calibration is Calibration.PERCENTILE:
        options = {"num_bins": cfg.histogram_bins or 2048, "percentile": cfg.percentile}
    with tempfile.TemporaryDirectory(prefix="ort.quant.") as tmp:
        calibrator = create_calibrator(
            Path(float_path), list(cfg.resolved_op_types()),
            augmented_model_path=str(Path(tmp) / "augmented_model.onnx"), calibrate_method=method,
            extra_options=options,
        )
        calibrator.collect_data(_reader(feeds))
        ranges = calibrator.compute_data()
        del calibrator
    return ranges


def _quantize_qdq(float_path: Path, out_path: Path, cfg: QuantConfig, ranges, extra: dict) -> None:
    """The second half of ``onnxruntime.quantization.quantize_static`` (QDQ or QOperator format),
    given ranges."""
    from onnxruntime.quantization import QDQQuantizer, QuantFormat, QuantType
    from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
    from onnxruntime.quantization.quant_utils import QuantizationMode, load_model_with_shape_infer
    from onnxruntime.quantization.quantize import check_static_quant_arguments

    qtype = {QType.QINT8: QuantType.QInt8, QType.QUINT8: QuantType.QUInt8}
    fmt = QuantFormat.QOperator if cfg.quant_format is QFormat.QOPERATOR else QuantFormat.QDQ
    try:
        check_static_quant_arguments(fmt, qtype[cfg.activation_type], qtype[cfg.weight_type])
    except ValueError as exc:
        raise QuantizeError(f"{exc} (weight_type={cfg.weight_type.value}, activation_type={cfg.activation_type.value})") from exc
    model = load_model_with_shape_infer(Path(float_path))
    if fmt is QuantFormat.QOperator:
        quantizer = ONNXQuantizer(
            model, cfg.per_channel, cfg.reduce_range, QuantizationMode.QLinearOps, True, qtype[cfg.weight_type],
            qtype[cfg.activation_type], ranges, [], list(cfg.nodes_to_exclude), list(cfg.resolved_op_types()), extra,
        )
    else:
        quantizer = QDQQuantizer(
            model, cfg.per_channel, cfg.reduce_range, qtype[cfg.weight_type], qtype[cfg.activation_type], ranges,
            [], list(cfg.nodes_to_exclude), list(cfg.resolved_op_types()), extra,
        )
    quantizer.quantize_model()
    quantizer.model.save_model_to_file(str(out_path), False)


def quantized_nodes(float_path: str | os.PathLike, quant_path: str | os.PathLike, op_types: Iterable[str]) -> list[str]:
    """Names of the FP32 graph's nodes (of ``op_types``) that the quantized graph changed.

    A node counts as left in FP32 when the quantized graph still holds a node with the same
    name, operator and inputs; dynamic quantization replaces a quantized node (``<name>_quant``),
    QDQ feeds it from ``DequantizeLinear`` outputs, so either way it is no longer identical.
    """
    import onnx

    ops = set(op_types)
    f = onnx.load(str(float_path), load_external_data=False)
    q = onnx.load(str(quant_path), load_external_data=False)
    kept = {(n.name, n.op_type, tuple(n.input)) for n in q.graph.node}
    return [n.name for n in f.graph.node if n.op_type in ops and n.name and (n.name, n.op_type, tuple(n.input)) not in kept]


# ----------------------------------------------------------------------------------------------
# per-node error
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeError:
    """Quantization error at one quantized node, in dB of signal-to-quantization-noise ratio
    (higher is better; every 6 dB is about one bit).

    - ``output_sqnr_db``: the node's output in the quantized graph against the FP32 graph (the
      error accumulated up to here).
    - ``input_sqnr_db``: the same at its activation input (the error that arrived).
    - ``activation_sqnr_db``: the noise that quantizing its activation input adds by itself
      (the tensor before against after quantize/dequantize, inside the quantized graph).
    - ``weight_sqnr_db``: the noise of its quantized weight against the FP32 weight.
    - ``local_sqnr_db``: the lower of the two: how much this node's own quantization hurts; the
      ranking (worst first) uses it, since it does not depend on what happened upstream.
    """

    node: str
    op_type: str
    output: str
    output_sqnr_db: float
    input_sqnr_db: float
    activation_sqnr_db: float
    weight_sqnr_db: float
    local_sqnr_db: float
    rank: int = 0


def _sqnr_db(signal_sq: float, noise_sq: float) -> float:
    """20*log10(||x|| / ||x - y||) with qdq_loss_debug's epsilon floors (never infinite)."""
    return 20.0 * math.log10(max(math.sqrt(signal_sq), SQNR_EPS) / max(math.sqrt(noise_sq), SQNR_EPS))


def _augment_outputs(model_path: Path, outputs: dict[str, int], out_path: Path) -> None:
    """Copy of the graph that also returns the named tensors (name -> ONNX element type)."""
    import onnx
    from onnx import helper

    model = onnx.load(str(model_path))
    have = {o.name for o in model.graph.output}
    for name, elem in outputs.items():
        if name not in have:
            model.graph.output.append(helper.make_tensor_value_info(name, elem, None))
    onnx.save(model, str(out_path))


def _weight_sqnr(qmodel, finit: dict, qinit: dict, dq_nodes: dict, weight: str) -> float:
    """SQNR of a quantized weight against the FP32 weight (NaN if the weight was not quantized).

    The quantized graph holds ``<w>_quantized`` with ``<w>_scale``/``<w>_zero_point``; a QDQ graph
    dequantizes it with a ``DequantizeLinear`` node (whose ``axis`` says the channel axis), a
    dynamic graph feeds it to ``MatMulInteger`` (per-channel along the last axis). The arithmetic
    is done in float64: ``qdq_loss_debug.create_weight_matching`` subtracts the zero point in the
    weight's own integer type, which wraps around for uint8 weights (what ONNX Runtime 1.19 uses
    for per-tensor QDQ MatMul weights) and reports nonsense (about -15 dB).
    """
    from onnx import numpy_helper
    from onnxruntime.quantization.qdq_loss_debug import compute_signal_to_quantization_noice_ratio

    qname = f"{weight}_quantized"
    if weight not in finit or qname not in qinit:
        return float("nan")
    dq = dq_nodes.get(qname)
    scale_name = dq.input[1] if dq is not None else f"{weight}_scale"
    zp_name = dq.input[2] if dq is not None and len(dq.input) > 2 else f"{weight}_zero_point"
    if scale_name not in qinit:
        return float("nan")
    w = numpy_helper.to_array(finit[weight]).astype(np.float64)
    q = numpy_helper.to_array(qinit[qname]).astype(np.float64)
    scale = numpy_helper.to_array(qinit[scale_name]).astype(np.float64)
    zp = numpy_helper.to_array(qinit[zp_name]).astype(np.float64) if zp_name in qinit else np.zeros_like(scale)
    if scale.size > 1:
        axis = None
        if dq is not None:
            axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
        elif q.shape[-1] == scale.size:
            axis = q.ndim - 1
        else:
            axis = int(np.flatnonzero(np.array(q.shape) == scale.size)[0])
        shape = [1] * q.ndim
        shape[axis] = scale.size
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    deq = (q - zp) * scale
    if deq.shape != w.shape or not np.any(w):
        return float("nan")  # an all-zero tensor (an untrained bias) has no signal to compare
    return float(compute_signal_to_quantization_noice_ratio(w, deq))


def node_errors(
    float_path: str | os.PathLike,
    quant_path: str | os.PathLike,
    feeds: Sequence[Mapping[str, np.ndarray]],
    op_types: Iterable[str] = ("MatMul", "Gemm", "Attention", "Gather", "EmbedLayerNormalization"),
) -> list[NodeError]:
    """SQNR per quantized node between the FP32 graph and the quantized graph, worst first.

    Both graphs get the *same* batches ``feeds`` (dicts of int64 arrays); every compared tensor
    is added as a graph output and the sums of squares are accumulated batch by batch (the
    same number as ``qdq_loss_debug.compute_signal_to_quantization_noice_ratio`` on the
    concatenated tensors, without holding every batch in memory); weights are compared with
    ``qdq_loss_debug.compute_signal_to_quantization_noice_ratio`` (see :func:`_weight_sqnr`).
    Graphs run with ONNX Runtime's optimizations off, as ``qdq_loss_debug.collect_activations`` does.
    """
    import tempfile

    import onnx
    import onnxruntime as ort
    from onnx import TensorProto

    float_path, quant_path = Path(float_path), Path(quant_path)
    if not feeds:
        raise QuantizeError("node_errors needs at least one batch of inputs")
    fmodel = onnx.load(str(float_path))
    qmodel = onnx.load(str(quant_path))
    names = quantized_nodes(float_path, quant_path, op_types)
    fnodes = {n.name: n for n in fmodel.graph.node}
    finit = {i.name for i in fmodel.graph.initializer}
    const_out = {o for n in fmodel.graph.node if n.op_type == "Constant" for o in n.output}
    qproduced = {o for n in qmodel.graph.node for o in n.output} | {i.name for i in qmodel.graph.input}
    finit_map = {i.name: i for i in fmodel.graph.initializer}
    qinit_map = {i.name: i for i in qmodel.graph.initializer}
    dq_nodes = {n.input[0]: n for n in qmodel.graph.node if n.op_type == "DequantizeLinear"}
    float_inputs = {"MatMul": (0, 1), "Gemm": (0, 1), "Attention": (0,), "Conv": (0,)}

    plan = []  # (node, output, [activation inputs], [weights])
    f_out: dict[str, int] = {}
    q_out: dict[str, int] = {}
    for name in names:
        node = fnodes[name]
        out = node.output[0]
        acts = [node.input[i] for i in float_inputs.get(node.op_type, ()) if i < len(node.input)
                and node.input[i] and node.input[i] not in finit and node.input[i] not in const_out]
        weights = [x for x in node.input if x in finit]
        plan.append((node, out, acts, weights))
        if out in qproduced:
            f_out[out] = q_out[out] = TensorProto.FLOAT
        for a in acts:
            f_out[a] = TensorProto.FLOAT
            if a in qproduced:
                q_out[a] = TensorProto.FLOAT
            for post in (f"{a}_DequantizeLinear_Output", f"{a}_DequantizeLinear_Output_1"):
                if post in qproduced:
                    q_out[post] = TensorProto.FLOAT
            if f"{a}_quantized" in qproduced:  # DynamicQuantizeLinear outputs
                q_out[f"{a}_quantized"] = TensorProto.UINT8
                q_out[f"{a}_scale"] = TensorProto.FLOAT
                q_out[f"{a}_zero_point"] = TensorProto.UINT8

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    acc: dict[str, list[float]] = {}  # key -> [signal^2, noise^2]

    def add(key: str, x: np.ndarray, y: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        s = acc.setdefault(key, [0.0, 0.0])
        s[0] += float((x**2).sum())
        s[1] += float(((x - y) ** 2).sum())

    with tempfile.TemporaryDirectory(prefix="node-errors-") as tmp:
        fa, qa = Path(tmp) / "float.onnx", Path(tmp) / "quant.onnx"
        _augment_outputs(float_path, f_out, fa)
        _augment_outputs(quant_path, q_out, qa)
        fs = ort.InferenceSession(str(fa), sess_options=opts, providers=["CPUExecutionProvider"])
        qs = ort.InferenceSession(str(qa), sess_options=opts, providers=["CPUExecutionProvider"])
        fnames, qnames = list(f_out), list(q_out)
        for feed in feeds:
            fv = dict(zip(fnames, fs.run(fnames, dict(feed))))
            qv = dict(zip(qnames, qs.run(qnames, dict(feed))))
            for node, out, acts, _ in plan:
                if out in qv:
                    add(f"out:{out}", fv[out], qv[out])
                for a in acts:
                    if a in qv:
                        add(f"in:{a}", fv[a], qv[a])
                        pre = qv[a]
                        post = qv.get(f"{a}_DequantizeLinear_Output", qv.get(f"{a}_DequantizeLinear_Output_1"))
                        if post is None and f"{a}_quantized" in qv:
                            post = (qv[f"{a}_quantized"].astype(np.float64) - float(qv[f"{a}_zero_point"])) * float(qv[f"{a}_scale"])
                        if post is not None:
                            add(f"qdq:{a}", pre, post)

    def db(key: str) -> float:
        return _sqnr_db(*acc[key]) if key in acc else float("nan")

    rows = []
    for node, out, acts, weights in plan:
        w_vals = [_weight_sqnr(qmodel, finit_map, qinit_map, dq_nodes, w) for w in weights]
        w_vals = [v for v in w_vals if not math.isnan(v)]
        a_vals = [v for v in (db(f"qdq:{a}") for a in acts) if not math.isnan(v)]
        in_vals = [v for v in (db(f"in:{a}") for a in acts) if not math.isnan(v)]
        wv = min(w_vals) if w_vals else float("nan")
        av = min(a_vals) if a_vals else float("nan")
        local = min([v for v in (wv, av) if not math.isnan(v)], default=float("nan"))
        rows.append(NodeError(node.name, node.op_type, out, db(f"out:{out}"), min(in_vals) if in_vals else float("nan"), av, wv, local))
    ranked = sorted(rows, key=lambda r: (math.isnan(r.local_sqnr_db), r.local_sqnr_db if not math.isnan(r.local_sqnr_db) else 0.0, r.node))
    return [dataclasses.replace(r, rank=i + 1) for i, r in enumerate(ranked)]


def worst_nodes(errors: Sequence[NodeError], k: int, rank_by: str = "local") -> list[str]:
    """Names of the ``k`` nodes with the lowest SQNR (``rank_by``: local | output | weight | activation)."""
    key = {"local": "local_sqnr_db", "output": "output_sqnr_db", "weight": "weight_sqnr_db", "activation": "activation_sqnr_db"}
    if rank_by not in key:
        raise QuantizeError(f"rank_by must be one of {list(key)}, got {rank_by!r}")
    if k < 1:
        raise QuantizeError(f"worst_k must be at least 1, got {k}")
    usable = [e for e in errors if not math.isnan(getattr(e, key[rank_by]))]
    return [e.node for e in sorted(usable, key=lambda e: (getattr(e, key[rank_by]), e.node))[:k]]


# ----------------------------------------------------------------------------------------------
# the stage
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuantResult:
    """One quantized graph: what it cost (accuracy, slice by slice) and what it bought (speed, size)."""

    name: str
    config: QuantConfig
    source_path: Path  # the FP32 graph that was quantized
    float_path: Path  # the FP32 graph the node names refer to (pre-processed copy for static)
    quantized_path: Path
    graph_kind: str
    size_mib: float
    fp32_size_mib: float
    validation: Validation
    latency: list[ShapeLatency]
    fp32_latency: list[ShapeLatency]
    report: SliceReport
    golden: Optional[SliceReport]
    node_errors: list[NodeError]
    quantized_nodes: list[str]
    excluded_nodes: list[str]
    op_histogram: dict[str, int]
    quantize_seconds: float
    calibration_samples: int
    baseline_path: Path
    out_dir: Path
    notes: list[str] = field(default_factory=list)

    @property
    def latency_ms(self) -> float:
        return self.latency[0].median_ms if self.latency else float("nan")

    @property
    def fp32_latency_ms(self) -> float:
        return self.fp32_latency[0].median_ms if self.fp32_latency else float("nan")

    @property
    def speedup(self) -> float:
        """FP32 median latency / quantized median latency (first timing shape, same process)."""
        return self.fp32_latency_ms / self.latency_ms if self.latency_ms > 0 else float("nan")

    @property
    def accuracy(self) -> float:
        return self.report.overall.candidate.accuracy

    @property
    def accuracy_delta(self) -> float:
        return self.report.overall.delta

    def metrics(self) -> list[Metric]:
        return [
            Metric("latency", self.latency_ms, "ms", False),
            Metric("FP32 latency", self.fp32_latency_ms, "ms", False),
            Metric("speed-up", self.speedup, "x", True),
            Metric("size on disk", self.size_mib, "MiB", False),
            Metric("FP32 size", self.fp32_size_mib, "MiB", False),
            Metric("accuracy", 100.0 * self.accuracy, "%", True),
            Metric("accuracy change", 100.0 * self.accuracy_delta, "points", True),
            Metric("largest slice drop", 100.0 * self.report.max_slice_drop(), "points", False),
            Metric("agreement with FP32", 100.0 * self.report.overall.candidate.agreement, "%", True),
        ]


def _report_for(eset: EvalSet, logits: np.ndarray, base: Baseline, name: str, n_boot: int, seed: int) -> SliceReport:
    examples = eset.load_examples()
    ref = softmax(eset.fp32_logits())
    cand = softmax(logits)
    rep = evaluate_slices(
        examples, [int(e["label"]) for e in examples], ref, cand, None, n_boot=n_boot, seed=seed,
        class_names=base.class_names, reference_name="fp32", candidate_name=name, set_name=eset.name,
        membership=eset.membership(),
    )
    meta = eset.describe()
    slices = [dataclasses.replace(d, description=meta[d.slice][0], group=meta[d.slice][1]) for d in rep.slices]
    return dataclasses.replace(rep, slices=slices, slice_set=eset.slice_set)


def run_quantization(
    onnx_path: str | os.PathLike | Any,
    cfg: Optional[QuantConfig] = None,
    out_dir: str | os.PathLike = "runs/quantize",
    data=None,
    tokenizer=None,
    *,
    baseline: Optional[Baseline] = None,
    export=None,
    slices=None,
    predicates: Optional[Mapping[str, Callable[[dict], bool]]] = None,
    timing: Optional[TimingConfig] = None,
    n_boot: int = 1000,
    seed: int = 0,
    node_error_samples: int = 16,
    max_length: Optional[int] = None,
    eval_batch_size: int = 32,
) -> QuantResult:
    """Quantize the FP32 graph ``onnx_path`` with ``cfg`` into ``out_dir`` and score it.

    Writes ``out_dir/model.int8.onnx`` and ``out_dir/quantize.json``; the FP32 side is taken
    from ``baseline`` or computed from ``data`` and saved in ``out_dir/baseline/``.
    ``node_error_samples`` calibration texts are fed to both graphs to rank the nodes by SQNR
    (0 skips it). Timings and the bootstrap are reported, never asserted.
    """
    from ..graph import compare_logits, op_histogram
    from ..ortinfer import latency_by_shape, make_session, predict_dataset

    cfg = cfg or QuantConfig.dynamic_int8()
    chosen_timing = timing if timing is not None else (baseline.timing if baseline is not None else None)
    if chosen_timing is not None:
        from ..device import require_device

        require_device(chosen_timing.device)  # CUDA asked for and absent: one clear error before any work
    if not isinstance(cfg, QuantConfig):
        raise QuantizeError(f"cfg must be a QuantConfig (e.g. QuantConfig.dynamic_int8()), got {type(cfg).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if baseline is not None and onnx_path is not None:
        given = _graph_source(onnx_path, None)[0].resolve()
        if given != Path(baseline.fp32_path).resolve():
            raise QuantizeError(
                f"the baseline was computed for {baseline.fp32_path}, not {given}: pass the same graph, "
                "or prepare a baseline for this one (prepare_baseline)"
            )
    if baseline is None:
        baseline = prepare_baseline(onnx_path, data, out / BASELINE_DIR, tokenizer=tokenizer, export=export, slices=slices,
                                    predicates=predicates, timing=timing, seed=seed, max_length=max_length,
                                    calibration_samples=max(256, cfg.samples), batch_size=eval_batch_size)
    src = Path(baseline.fp32_path)
    tok = baseline.load_tokenizer()
    notes: list[str] = []

    calib_texts = baseline.calibration_texts()
    fsession = make_session(src)
    feeds = None
    if cfg.mode is QuantMode.STATIC:
        if len(calib_texts) < cfg.samples:
            if len(calib_texts) < cfg.calibration_batch_size:
                raise QuantizeError(
                    f"static quantization asked for {cfg.samples} calibration texts but the baseline holds "
                    f"{len(calib_texts)}: give data with a larger training split, or lower samples"
                )
            notes.append(f"calibrated on {len(calib_texts)} texts (asked for {cfg.samples}): the training split is smaller")
        texts = calib_texts[: cfg.samples]
        usable = (len(texts) // cfg.calibration_batch_size) * cfg.calibration_batch_size
        texts = texts[:usable]  # equal batches (histogram calibrators stack them)
        # padded to max_length: the histogram calibrators need equal shapes across batches
        feeds = _encoded_feeds(fsession, tok, texts, baseline.max_length, cfg.calibration_batch_size, pad_to_max=True)

    t0 = time.perf_counter()
    qpath, float_path = quantize_graph(src, cfg, out / QUANTIZED_FILE, feeds)
    used = cfg  # what the graph was quantized with (exclude_worst adds the nodes it chose)
    if cfg.exclude_worst:
        if not calib_texts:
            raise QuantizeError("exclude_worst ranks nodes on calibration texts, and the baseline has none (no training "
                                "split): give data with a training split, or list nodes_to_exclude yourself")
        rank_feeds = _encoded_feeds(fsession, tok, calib_texts[:max(16, node_error_samples)], baseline.max_length, 8,
                                    pad_to_max=False)
        worst = worst_nodes(node_errors(float_path, qpath, rank_feeds, cfg.resolved_op_types()), cfg.exclude_worst, "local")
        used = dataclasses.replace(cfg, nodes_to_exclude=tuple(dict.fromkeys([*cfg.nodes_to_exclude, *worst])))
        qpath, float_path = quantize_graph(src, used, out / QUANTIZED_FILE, feeds)
        notes.append(f"exclude_worst={cfg.exclude_worst}: left in FP32 the nodes with the lowest local SQNR on "
                     f"{len(calib_texts[:max(16, node_error_samples)])} calibration texts: {list(worst)}")
    quantize_seconds = time.perf_counter() - t0
    if cfg.mode is QuantMode.DYNAMIC:
        notes.append(
            f"dynamic INT8 computes activation scales per batch tensor, so a prediction can depend on which "
            f"examples share its batch (on MiniLM, 3 of 128 test predictions differed between batch 1 and 32); "
            f"scored here in batches of {baseline.batch_size} padded to the longest (prepare_baseline(batch_size=...))"
        )
    qnodes = quantized_nodes(float_path, qpath, cfg.resolved_op_types())
    if not qnodes:
        notes.append("no node was quantized: check op_types and nodes_to_exclude against the graph's operators")

    qsession = make_session(qpath)
    reports = {}
    for eset in baseline.eval_sets:
        import datasets

        ds = datasets.Dataset.from_list([{"text": e["text"], "label": int(e["label"])} for e in eset.load_examples()])
        logits = predict_dataset(qsession, tok, ds, baseline.max_length, baseline.batch_size)
        reports[eset.name] = (logits, _report_for(eset, logits, baseline, cfg.label, n_boot, seed))
    main_set = baseline.eval_sets[0]
    validation = compare_logits(reports[main_set.name][0], main_set.fp32_logits(), cfg.tolerance, cfg.min_label_agreement,
                                what=f"the {cfg.label} graph")

    t = timing if timing is not None else baseline.timing  # an explicit timing (its device too) wins over the baseline's
    lat_kw = dict(shapes=t.shapes, warmup=t.warmup, repeats=t.repeats, threads=t.threads, max_seconds=t.max_seconds,
                  vocab_size=baseline.vocab_size, device=t.device)
    # paths, not the scoring sessions: latency_by_shape opens them with the timing's thread count
    fp32_latency = latency_by_shape(src, **lat_kw)
    latency = latency_by_shape(qpath, **lat_kw)

    errors: list[NodeError] = []
    if node_error_samples > 0 and calib_texts:
        dbg = _encoded_feeds(fsession, tok, calib_texts[:node_error_samples], baseline.max_length, 8, pad_to_max=False)
        errors = node_errors(float_path, qpath, dbg, cfg.resolved_op_types())
    elif node_error_samples > 0:
        notes.append("per-node errors skipped: the baseline has no calibration texts (no training split)")

    result = QuantResult(
        name=cfg.label, config=cfg, source_path=src, float_path=Path(float_path).resolve(), quantized_path=qpath.resolve(),
        graph_kind=baseline.graph_kind, size_mib=file_size_mib(qpath), fp32_size_mib=baseline.fp32_size_mib,
        validation=validation, latency=latency, fp32_latency=fp32_latency,
        report=reports[main_set.name][1], golden=reports["golden"][1] if "golden" in reports else None,
        node_errors=errors, quantized_nodes=qnodes, excluded_nodes=list(used.nodes_to_exclude),
        op_histogram=op_histogram(qpath), quantize_seconds=quantize_seconds,
        calibration_samples=sum(len(next(iter(f.values()))) for f in feeds) if feeds else 0,
        baseline_path=(Path(baseline.out_dir) / BASELINE_FILE).resolve(), out_dir=out.resolve(), notes=notes,
    )
    runs.save_result(result, out / RESULT_FILE)
    return result


def load_quant_result(path: str | os.PathLike) -> QuantResult:
    return runs.load_result(QuantResult, path, RESULT_FILE)


def requantize_excluding(
    result: QuantResult,
    worst_k: Optional[int] = None,
    nodes: Optional[Sequence[str]] = None,
    out_dir: Optional[str | os.PathLike] = None,
    rank_by: str = "local",
    n_boot: Optional[int] = None,
    node_error_samples: int = 16,
) -> QuantResult:
    """The same configuration again, leaving the ``worst_k`` nodes of ``result.node_errors`` (or
    the named ``nodes``) in FP32, scored on the same baseline. Writes into
    ``<result.out_dir>/exclude-<k>`` unless ``out_dir`` is given."""
    if (worst_k is None) == (nodes is None):
        raise QuantizeError("give exactly one of worst_k (exclude the k worst nodes) or nodes (names to exclude)")
    if nodes is None:
        if not result.node_errors:
            raise QuantizeError(
                f"{result.name} has no per-node errors to rank: run it with node_error_samples > 0, or pass nodes=[...]"
            )
        chosen = worst_nodes(result.node_errors, int(worst_k), rank_by)
    else:
        if isinstance(nodes, str):
            raise QuantizeError(f"nodes must be a list of node names, got the string {nodes!r}")
        chosen = list(nodes)
    excluded = tuple(dict.fromkeys([*result.config.nodes_to_exclude, *result.excluded_nodes, *chosen]))
    base_name = result.config.name or ""
    cfg = dataclasses.replace(result.config, nodes_to_exclude=excluded, exclude_worst=0,
                              name=f"{base_name}-excl{len(excluded)}" if base_name else "")
    baseline = load_baseline(result.baseline_path)
    target = Path(out_dir) if out_dir is not None else Path(result.out_dir) / f"exclude-{len(excluded)}"
    return run_quantization(baseline.fp32_path, cfg, target, baseline=baseline,
                            n_boot=n_boot or result.report.n_boot, seed=result.report.seed,
                            node_error_samples=node_error_samples)


# ----------------------------------------------------------------------------------------------
# accuracy-constrained search
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BudgetCheck:
    """Whether one candidate's drops fit the budgets. Drops are positive when accuracy fell."""

    overall_drop: float
    worst_slice: str
    worst_slice_drop: float
    within_overall: bool
    within_slices: bool
    violations: list[str]
    slices_checked: int
    slices_skipped: list[str]  # too small to judge (see workbench.quant.evaluate.MIN_SLICE_SIZE)

    @property
    def feasible(self) -> bool:
        return self.within_overall and self.within_slices


def check_budget(reports: Sequence[SliceReport], budget_overall: float, budget_per_slice: float,
                 include_small_slices: bool = False, strict: bool = False, metric: str = "accuracy") -> BudgetCheck:
    """Do the drops in ``metric`` stay within budget, overall (on the first report) and on every
    slice of every report? ``strict`` uses the worse end of the 95% interval instead of the
    point estimate; slices smaller than the reports' minimum size are skipped (and listed)
    unless ``include_small_slices``."""
    if not reports:
        raise QuantizeError("check_budget needs at least one SliceReport")

    def drop(d) -> float:
        m = d.deltas[metric]
        if strict:
            v = m.ci_low if m.higher_is_better else m.ci_high
        else:
            v = m.delta
        return -v if m.higher_is_better else v

    main = reports[0]
    overall = drop(main.overall)
    violations = []
    if overall > budget_overall + 1e-12:
        violations.append(f"overall ({main.set_name}): -{overall:.2%} > budget {budget_overall:.2%}")
    worst, worst_drop, checked, skipped = "", 0.0, 0, []
    for rep in reports:
        pool = list(rep.slices) + ([rep.overall] if rep is not main else [])
        for d in pool:
            label = f"{rep.set_name}:{d.slice}"
            if d.n == 0:
                continue
            if d.too_small and not include_small_slices:
                skipped.append(label)
                continue
            checked += 1
            v = drop(d)
            if v > worst_drop or not worst:
                worst, worst_drop = label, v
            if v > budget_per_slice + 1e-12:
                violations.append(f"slice {label} (n={d.n}): -{v:.2%} > budget {budget_per_slice:.2%}")
    return BudgetCheck(overall, worst, worst_drop, overall <= budget_overall + 1e-12,
                       not any(v.startswith("slice") for v in violations), violations, checked, skipped)


@dataclass(frozen=True)
class SearchCandidate:
    name: str
    graph: str  # which FP32 graph it came from (key of onnx_paths)
    precision: str  # "fp32" or "int8"
    config: Optional[QuantConfig]
    onnx_path: Path
    result_path: Optional[Path]
    latency_ms: float
    size_mib: float
    accuracy: float
    accuracy_delta: float
    check: BudgetCheck
    feasible: bool


@dataclass(frozen=True)
class SearchResult:
    """Every candidate (for the chart) and the fastest one within both budgets."""

    candidates: list[SearchCandidate]
    chosen: Optional[str]
    budget_overall: float
    budget_per_slice: float
    objective: str
    include_small_slices: bool
    strict: bool
    out_dir: Path
    message: str

    def candidate(self, name: str) -> SearchCandidate:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(f"no candidate {name!r}; candidates: {[c.name for c in self.candidates]}")

    @property
    def best(self) -> Optional[SearchCandidate]:
        return self.candidate(self.chosen) if self.chosen else None


OBJECTIVES = ("latency", "size")


def select_candidate(candidates: Sequence[SearchCandidate], objective: str = "latency") -> Optional[SearchCandidate]:
    """The feasible candidate with the lowest latency (or size); ties go to the higher accuracy."""
    if objective not in OBJECTIVES:
        raise QuantizeError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}")
    ok = [c for c in candidates if c.feasible]
    if not ok:
        return None
    key = (lambda c: (c.latency_ms, -c.accuracy, c.name)) if objective == "latency" else (lambda c: (c.size_mib, -c.accuracy, c.name))
    return min(ok, key=key)


def default_candidates() -> list[QuantConfig]:
    """A small, varied set: dynamic per-tensor/per-channel/reduce-range, the best static recipe
    (:meth:`QuantConfig.static_best`), static Entropy."""
    return [
        QuantConfig.dynamic_int8(),
        QuantConfig.dynamic_int8_per_channel(),
        QuantConfig.dynamic_int8_reduce_range(),
        QuantConfig.static_best(samples=64),
        QuantConfig.static_qdq("entropy", samples=64),
    ]


def constrained_search(
    onnx_paths: Union[str, os.PathLike, Any, Mapping[str, Any]],
    candidates: Optional[Sequence[QuantConfig]] = None,
    budget_overall: float = 0.01,
    budget_per_slice: float = 0.02,
    out_dir: str | os.PathLike = "runs/search",
    data=None,
    tokenizer=None,
    *,
    export=None,
    slices=None,
    predicates: Optional[Mapping[str, Callable[[dict], bool]]] = None,
    timing: Optional[TimingConfig] = None,
    objective: str = "latency",
    include_small_slices: bool = False,
    strict: bool = False,
    include_fp32: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
    eval_batch_size: int = 32,
    progress: Optional[Callable[[int, int, str], None]] = None,
) -> SearchResult:
    """Quantize every FP32 graph in ``onnx_paths`` (one graph, or {name: graph}, e.g. exported and
    fused; a graph is a path, an ExportResult or a FusionReport) with
    every config in ``candidates``; keep the fastest (``objective``) whose accuracy drop against
    its FP32 graph is within ``budget_overall`` and, on every slice big enough to judge, within
    ``budget_per_slice`` (fractions: 0.02 = 2 points). The FP32 graphs themselves are candidates
    too (``include_fp32``), so the answer falls back to FP32 when no INT8 variant fits.
    Writes ``search.json`` and one folder per candidate."""
    if objective not in OBJECTIVES:
        raise QuantizeError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}")
    for name, v in (("budget_overall", budget_overall), ("budget_per_slice", budget_per_slice)):
        if not 0.0 <= v < 1.0:
            raise QuantizeError(f"{name} is a fraction of accuracy (0.02 = 2 points), got {v}")
    graphs = dict(onnx_paths) if isinstance(onnx_paths, Mapping) else {"model": onnx_paths}
    if not graphs:
        raise QuantizeError("give at least one FP32 graph to search over")
    configs = list(candidates) if candidates is not None else default_candidates()
    labels = [c.label for c in configs]
    dupes = sorted({l for l in labels if labels.count(l) > 1})
    if dupes:
        raise QuantizeError(f"candidate names must be unique, repeated: {dupes}; give them name=...")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    total = len(graphs) * (len(configs) + (1 if include_fp32 else 0))
    done = 0
    found: list[SearchCandidate] = []
    for gname, path in graphs.items():
        gdir = out / gname
        base = prepare_baseline(path, data, gdir / BASELINE_DIR, tokenizer=tokenizer, export=export, slices=slices, predicates=predicates,
                                timing=timing, seed=seed, calibration_samples=max([256, *(c.samples for c in configs)]),
                                batch_size=eval_batch_size)
        if include_fp32:
            found.append(_fp32_candidate(gname, base, budget_overall, budget_per_slice, include_small_slices, strict, n_boot, seed))
            done += 1
            if progress:
                progress(done, total, f"{gname}/fp32")
        for cfg in configs:
            res = run_quantization(base.fp32_path, cfg, gdir / cfg.label, baseline=base, n_boot=n_boot, seed=seed,
                                   node_error_samples=0)
            reps = [res.report] + ([res.golden] if res.golden is not None else [])
            chk = check_budget(reps, budget_overall, budget_per_slice, include_small_slices, strict)
            found.append(SearchCandidate(
                name=f"{gname}/{cfg.label}", graph=gname, precision="int8", config=cfg, onnx_path=res.quantized_path,
                result_path=(Path(res.out_dir) / RESULT_FILE), latency_ms=res.latency_ms, size_mib=res.size_mib,
                accuracy=res.accuracy, accuracy_delta=res.accuracy_delta, check=chk, feasible=chk.feasible,
            ))
            done += 1
            if progress:
                progress(done, total, f"{gname}/{cfg.label}")
    best = select_candidate(found, objective)
    if best is None:
        closest = min(found, key=lambda c: c.check.worst_slice_drop)
        message = (f"no candidate is within {budget_overall:.1%} overall and {budget_per_slice:.1%} per slice; "
                   f"closest: {closest.name} ({'; '.join(closest.check.violations[:2])}). Raise a budget or try "
                   "per-channel, static calibration or excluding the worst nodes")
    else:
        message = (f"{best.name}: {best.latency_ms:.2f} ms, {best.size_mib:.1f} MiB, accuracy "
                   f"{best.accuracy:.1%} ({-best.check.overall_drop:+.2%}), worst slice {best.check.worst_slice or '-'} "
                   f"{-best.check.worst_slice_drop:+.2%}")
    result = SearchResult(found, best.name if best else None, budget_overall, budget_per_slice, objective,
                          include_small_slices, strict, out.resolve(), message)
    runs.save_result(result, out / SEARCH_FILE)
    return result


def _fp32_candidate(gname: str, base: Baseline, budget_overall: float, budget_per_slice: float,
                    include_small: bool, strict: bool, n_boot: int, seed: int) -> SearchCandidate:
    """The FP32 graph as a candidate: timed like the others, scored against itself (no drop)."""
    from ..ortinfer import latency_by_shape

    t = base.timing
    lat = latency_by_shape(base.fp32_path, shapes=t.shapes, warmup=t.warmup, repeats=t.repeats, threads=t.threads,
                           max_seconds=t.max_seconds, vocab_size=base.vocab_size, device=t.device)
    reps = [_report_for(e, e.fp32_logits(), base, "fp32", n_boot, seed) for e in base.eval_sets]
    chk = check_budget(reps, budget_overall, budget_per_slice, include_small, strict)
    return SearchCandidate(
        name=f"{gname}/fp32", graph=gname, precision="fp32", config=None, onnx_path=Path(base.fp32_path), result_path=None,
        latency_ms=lat[0].median_ms, size_mib=base.fp32_size_mib, accuracy=reps[0].overall.reference.accuracy,
        accuracy_delta=0.0, check=chk, feasible=chk.feasible,
    )


def load_search(path: str | os.PathLike) -> SearchResult:
    return runs.load_result(SearchResult, path, SEARCH_FILE)
