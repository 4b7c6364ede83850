"""How to quantize and how to time: :class:`QuantConfig` with its presets, :class:`TimingConfig`,
the operator types ONNX Runtime can quantize, and :class:`QuantizeError`."""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import Optional

from ..core.options import parse_choice

# Operator types ONNX Runtime 1.19 can quantize, per mode (IntegerOpsRegistry, QDQRegistry);
# a test checks these against onnxruntime.quantization.registry.
DYNAMIC_OP_TYPES = ("Attention", "Conv", "EmbedLayerNormalization", "Gather", "LSTM", "MatMul", "Transpose")
EMBEDDING_OP_TYPES = ("EmbedLayerNormalization", "Gather")  # the embedding lookups (fused graph / exported graph)
STATIC_OP_TYPES = (
    "AveragePool", "BatchNormalization", "Clip", "Conv", "ConvTranspose", "Gather", "Gemm", "InstanceNormalization",
    "LayerNormalization", "MatMul", "MaxPool", "Relu", "Reshape", "Resize", "Split", "Squeeze", "Transpose",
    "Unsqueeze", "Where",
)
# ... and what later ONNX Runtimes' QDQRegistry adds (1.32, the current stack): allowed where the runtime has them
STATIC_OP_TYPES_LATER = ("CumSum", "Flatten", "GatherElements", "Pad", "Slice", "TopK")
STATIC_DEFAULT_OP_TYPES = ("MatMul", "Gemm")


def static_op_types() -> tuple[str, ...]:
    """The operator types this ONNX Runtime quantizes statically (QDQ): 1.19.2's, and later runtimes' additions."""
    import importlib.metadata as md

    for dist in ("onnxruntime-training-cpu", "onnxruntime-training"):
        try:
            if md.version(dist).startswith("1.19."):
                return STATIC_OP_TYPES
        except md.PackageNotFoundError:
            continue
    return STATIC_OP_TYPES + STATIC_OP_TYPES_LATER
# weight-only (MatMulNBits): onnxruntime's MatMul4BitsQuantizer rewrites MatMuls with a constant weight
WEIGHT_ONLY_OP_TYPES = ("MatMul",)
WEIGHT_ONLY_BLOCK_SIZE = 32
# what onnxruntime 1.19.2 offers for weight-only quantization (workbench.quant.weightonly says how it was checked)
SUPPORTED_BITS = (4,)
ACCURACY_LEVELS = (0, 1, 2, 3, 4)
EIGHT_BIT_REFUSAL = (
    "8-bit weight-only quantization is not available in onnxruntime 1.19.2 (the version onnxruntime-training-cpu "
    "pins): its MatMulNBits CPU kernel runs 4-bit weights only (\"Only 4b quantization is supported for MatMulNBits "
    "op\") and its MatMul4BitsQuantizer writes 4 bits only; use the weight-only-int4 presets, or dynamic INT8 "
    "(8-bit weights and activations: the 'dynamic' preset)"
)
BINDING_NOTE = (
    "onnxruntime-training-cpu 1.19.2 lacks the quantize_matmul_4bits binding MatMul4BitsQuantizer calls; the workbench "
    "supplied it (numpy, MLAS's blockwise round-to-nearest rule); the graph rewrite and the MatMulNBits kernel are "
    "ONNX Runtime's"
)


class QuantizeError(ValueError):
    """A quantization request that cannot be carried out; the message says what to do."""


class QuantMode(str, enum.Enum):
    DYNAMIC = "dynamic"
    STATIC = "static"
    WEIGHT_ONLY = "weight-only"  # MatMul weights in 4 bits (MatMulNBits), activations in float


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
    - ``mode='weight-only'``: MatMul weights stored in ``weight_bits`` (4) bits per value in blocks of
      ``block_size`` along K, one float scale (and a zero point unless ``weight_symmetric``) per
      block, run by ONNX Runtime's ``MatMulNBits``; ``accuracy_level`` is its compute precision
      (0: unset, FP32 like 1; 4: activations quantized to INT8 per block, integer products). See
      :mod:`workbench.quant.weightonly` for what onnxruntime 1.19.2 offers (4 bits only).
      ``weight_bits`` 0 means the mode's own (8 for dynamic and static, 4 for weight-only).
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
    weight_bits: int = 0
    block_size: int = WEIGHT_ONLY_BLOCK_SIZE
    accuracy_level: int = 0
    weight_symmetric: bool = False
    tolerance: float = 1.0
    min_label_agreement: float = 0.9
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _as_enum(QuantMode, self.mode, "mode", "use 'dynamic' (no calibration), 'static' (QDQ, "
                                                  "calibrated) or 'weight-only' (4-bit MatMul weights)"))
        object.__setattr__(self, "weight_type", _as_enum(QType, self.weight_type, "weight_type", "qint8 is the usual choice"))
        object.__setattr__(self, "activation_type", _as_enum(QType, self.activation_type, "activation_type", "quint8 is the usual choice"))
        object.__setattr__(self, "calibration", _as_enum(Calibration, self.calibration, "calibration", "minmax is the fastest"))
        object.__setattr__(self, "quant_format", _as_enum(QFormat, self.quant_format, "quant_format", "qdq is the usual choice"))
        if self.mode is QuantMode.DYNAMIC and (self.quant_format is not QFormat.QDQ or self.activation_symmetric
                                               or self.matmul_const_b_only):
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
        self._check_weight_only()
        allowed = {QuantMode.DYNAMIC: DYNAMIC_OP_TYPES, QuantMode.STATIC: static_op_types(),
                   QuantMode.WEIGHT_ONLY: WEIGHT_ONLY_OP_TYPES}[self.mode]
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

    def _check_weight_only(self) -> None:
        for name in ("weight_bits", "block_size", "accuracy_level"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise QuantizeError(f"{name} must be a whole number, got {v!r}")
        if self.mode is not QuantMode.WEIGHT_ONLY:
            defaults = {"block_size": WEIGHT_ONLY_BLOCK_SIZE, "accuracy_level": 0, "weight_symmetric": False}
            given = [f"{k}={getattr(self, k)!r}" for k, v in defaults.items() if getattr(self, k) != v]
            given += [f"weight_bits={self.weight_bits}"] if self.weight_bits not in (0, 8) else []
            if given:
                raise QuantizeError(f"{', '.join(given)}: weight-only options (mode='weight-only'); {self.mode.value} INT8 stores "
                                    "8-bit weights: leave them at their defaults, or use a weight-only preset")
            return
        int8_only = {"per_channel": False, "reduce_range": False, "exclude_worst": 0, "weight_type": QType.QINT8,
                     "activation_type": QType.QUINT8, "quant_format": QFormat.QDQ, "activation_symmetric": False,
                     "matmul_const_b_only": False}
        given = {k: getattr(self, k) for k, v in int8_only.items() if getattr(self, k) != v}
        if given:
            shown = ", ".join(f"{k}={getattr(v, 'value', v)!r}" for k, v in given.items())
            raise QuantizeError(f"{shown}: INT8 options; weight-only quantization stores 4-bit weights with one scale per block "
                                "of block_size and leaves activations in float: leave them at their defaults")
        self.check_bits()
        if self.block_size < 16 or self.block_size & (self.block_size - 1):
            raise QuantizeError(f"block_size must be a power of 2, at least 16 (MatMulNBits' rule), got {self.block_size}; 32 is usual")
        if self.accuracy_level not in ACCURACY_LEVELS:
            raise QuantizeError(f"accuracy_level must be one of {list(ACCURACY_LEVELS)} (0 unset/FP32, 4 INT8 compute), "
                                f"got {self.accuracy_level}")

    def check_bits(self) -> None:
        """Weight-only bits this ONNX Runtime builds and runs on the CPU, or the reason it cannot: 4 on
        onnxruntime 1.19.2 (8 refused: :data:`EIGHT_BIT_REFUSAL`); 4 and 8 where ``MatMulNBitsQuantizer``
        writes 8 bits and the CPU kernel runs them (onnxruntime >= 1.31: probed once, :func:`runnable_bits`)."""
        if self.bits in SUPPORTED_BITS:
            return
        bits, version = runnable_bits()
        if self.bits in bits:
            return
        if self.bits == 8:
            raise QuantizeError(EIGHT_BIT_REFUSAL if version.startswith("1.19.") else
                                f"8-bit weight-only quantization does not run in onnxruntime {version} here: its "
                                "MatMulNBits CPU kernel refused an 8-bit graph; use the weight-only-int4 presets or dynamic INT8")
        raise QuantizeError(f"weight_bits={self.bits}: MatMulNBits in onnxruntime {version} runs "
                            f"{' or '.join(map(str, bits))}-bit weights here; use {bits[0]}")

    @property
    def bits(self) -> int:
        """Bits per stored weight: ``weight_bits``, or the mode's own when 0."""
        return self.weight_bits or (4 if self.mode is QuantMode.WEIGHT_ONLY else 8)

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
    def dynamic_int8_fp32_embeddings(cls, **kw) -> "QuantConfig":
        """Dynamic per-channel INT8 of every matrix multiply, with the embedding tables left in FP32
        (``EmbedLayerNormalization`` / ``Gather`` not quantized). On the fine-tuned MiniLM the INT8
        embedding lookup is the single node that costs most accuracy (figures: docs/benchmarks/index.md),
        and the lookup is no matrix multiply, so leaving it in FP32 costs size (the table stays 4 bytes
        a weight), not speed."""
        ops = tuple(o for o in DYNAMIC_OP_TYPES if o not in EMBEDDING_OP_TYPES)
        return cls(**{"mode": QuantMode.DYNAMIC, "per_channel": True, "op_types": ops, **kw})

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
        """The static recipe that measured best on the fine-tuned MiniLM (docs/benchmarks/index.md):
        MinMax calibration, one scale per weight column, only the weight MatMuls quantized
        (attention's activation products stay FP32), and the 6 nodes with the worst SQNR on
        calibration texts left in FP32 (on MiniLM: the feed-forward output projections, whose inputs
        after GELU have the widest ranges)."""
        return cls.static_qdq("minmax", **{"samples": 128, "per_channel": True, "matmul_const_b_only": True,
                                              "exclude_worst": 6, **kw})

    @classmethod
    def weight_only_int4(cls, accuracy_level: int = 0, **kw) -> "QuantConfig":
        """MatMul weights in 4 bits (blocks of 32, asymmetric), activations in float: ONNX Runtime's
        MatMulNBits. ``accuracy_level=4`` computes with INT8 activations."""
        return cls(**{"mode": QuantMode.WEIGHT_ONLY, "weight_bits": 4, "accuracy_level": accuracy_level, **kw})

    @classmethod
    def presets(cls) -> dict[str, "QuantConfig"]:
        """The named presets, as a view or the CLI lists them."""
        return {
            "dynamic": cls.dynamic_int8(),
            "dynamic-per-channel": cls.dynamic_int8_per_channel(),
            "dynamic-fp32-embeddings": cls.dynamic_int8_fp32_embeddings(),
            "dynamic-reduce-range": cls.dynamic_int8_reduce_range(),
            "dynamic-uint8": cls.dynamic_uint8(),
            "static-minmax": cls.static_qdq("minmax"),
            "static-entropy": cls.static_qdq("entropy"),
            "static-percentile": cls.static_qdq("percentile"),
            "static": cls.static_best(),
            "weight-only-int4": cls.weight_only_int4(),
            "weight-only-int4-acc4": cls.weight_only_int4(accuracy_level=4),
        }

    @classmethod
    def available_presets(cls) -> dict[str, "QuantConfig"]:
        """:meth:`presets` and those this ONNX Runtime builds beyond them (weight-only-int8 on onnxruntime >= 1.31)."""
        table = cls.presets()
        if 8 in runnable_bits()[0]:
            table["weight-only-int8"] = cls.weight_only_int8()
        return table

    @classmethod
    def weight_only_int8(cls, **kw) -> "QuantConfig":
        """MatMul weights in 8 bits (MatMulNBits), activations in float: onnxruntime >= 1.31 only (its CPU
        kernel runs 8-bit weights); refused on 1.19.2 with the reason."""
        return cls(**{"mode": QuantMode.WEIGHT_ONLY, "weight_bits": 8, **kw})

    @classmethod
    def preset(cls, name: str, **kw) -> "QuantConfig":
        table = cls.presets()
        if name in REFUSED_PRESETS and 8 in runnable_bits()[0]:  # this ONNX Runtime runs it (the current stack)
            return cls.weight_only_int8(**kw)
        if name in REFUSED_PRESETS:
            raise QuantizeError(f"preset {name!r}: {REFUSED_PRESETS[name]}")
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
        elif self.mode is QuantMode.WEIGHT_ONLY:
            parts = ["weight-only", f"int{self.bits}", f"b{self.block_size}"]
            if self.accuracy_level:
                parts.append(f"acc{self.accuracy_level}")
            if self.weight_symmetric:
                parts.append("sym")
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
        if self.mode is QuantMode.DYNAMIC and self.op_types and not set(EMBEDDING_OP_TYPES) & set(self.op_types):
            parts.append("fp32emb")
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
        return {QuantMode.DYNAMIC: DYNAMIC_OP_TYPES, QuantMode.STATIC: STATIC_DEFAULT_OP_TYPES,
                QuantMode.WEIGHT_ONLY: WEIGHT_ONLY_OP_TYPES}[self.mode]



# presets that onnxruntime 1.19.2 cannot build: the name and why (newer ONNX Runtimes build and run them:
# QuantConfig.preset gives them there)
REFUSED_PRESETS = {"weight-only-int8": EIGHT_BIT_REFUSAL}


def runnable_bits() -> tuple[tuple[int, ...], str]:
    """(weight-only bits this ONNX Runtime builds and runs on the CPU, its version): probed once per process
    by :func:`workbench.quant.nbits.probe_bits`."""
    from .nbits import probe_bits

    return probe_bits()


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
        from ..runtime.device import normalize_device
        from ..runtime.ortinfer import check_shapes

        object.__setattr__(self, "device", normalize_device(self.device))
        object.__setattr__(self, "shapes", check_shapes(self.shapes))
        if self.repeats < 1 or self.warmup < 0:
            raise QuantizeError(f"repeats must be >= 1 and warmup >= 0, got repeats={self.repeats}, warmup={self.warmup}")

    @classmethod
    def quick(cls, **kw) -> "TimingConfig":
        """Few repeats at a short sequence: tests and workshops (numbers are rough)."""
        return cls(**{"shapes": ((1, 64),), "warmup": 1, "repeats": 5, "max_seconds": 5.0, **kw})

