"""How to quantize and how to time: :class:`QuantConfig` with its presets, the :class:`CalibrationConfig`
and :class:`ValidationConfig` it holds, :class:`TimingConfig`, and :class:`QuantizeError`.

Every field says what it means and which methods it applies to, in its metadata
(``metadata={"help": ..., "methods": (...)}``): :func:`workbench.core.options.field_help` reads the
first, :func:`applies_to` the second, and :class:`QuantConfig` refuses a field set away from its default
for a method it does not apply to (``activation_type`` on dynamic quantization), in one line naming the
field and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from ..core.options import parse_choice
from .formats import (ACCURACY_LEVELS, BINDING_NOTE, DYNAMIC_OP_TYPES, EIGHT_BIT_REFUSAL, EMBEDDING_OP_TYPES,  # noqa: F401
                      STATIC_DEFAULT_OP_TYPES, STATIC_OP_TYPES, STATIC_OP_TYPES_LATER, SUPPORTED_BITS, WEIGHT_ONLY_BLOCK_SIZE,
                      WEIGHT_ONLY_OP_TYPES, Calibration, QFormat, QType, QuantMode, static_op_types)


class QuantizeError(ValueError):
    """A quantization request that cannot be carried out; the message says what to do."""


def _as_enum(cls, value, field_name: str, hint: str):
    return parse_choice(cls, value, field_name, QuantizeError, hint)


# which quantization methods a field applies to: metadata["methods"] (absent: every method)
METHODS = "methods"
ALL_METHODS = tuple(m.value for m in QuantMode)
INT8 = ("dynamic", "static")
STATIC = ("static",)
WEIGHT_ONLY = ("weight-only",)


def _field(default: Any = dataclasses.MISSING, help: str = "", methods: tuple[str, ...] = ALL_METHODS, **kw) -> Any:
    """A config field with its help text and the methods it applies to (``inert``: values that change
    nothing outside those methods, accepted there like the default)."""
    inert = kw.pop("inert", ())
    return field(default=default, metadata={"help": help, METHODS: methods, "inert": inert}, **kw)


@dataclass(frozen=True)
class CalibrationConfig:
    """How static quantization calibrates its activation ranges: on ``samples`` training texts in
    batches of ``batch_size``, with ``method`` minmax | entropy | percentile; ``histogram_bins`` (0: 512
    for entropy, 2048 for percentile) and ``percentile`` (99.999) tune the histogram methods."""

    method: Calibration = _field(Calibration.MINMAX, "static calibration method")
    samples: int = _field(128, "static calibration texts")
    batch_size: int = _field(8, "calibration texts per batch (the histogram calibrators stack equal batches)")
    histogram_bins: int = _field(0, "histogram bins of entropy and percentile calibration (0: 512 for entropy, 2048 for "
                                    "percentile; else 256-8192)")
    percentile: float = _field(99.999, "percentile calibration: the share of each activation's histogram kept in range")

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", _as_enum(Calibration, self.method, "calibration", "minmax is the fastest"))
        for name, shown in (("samples", "samples"), ("batch_size", "calibration_batch_size")):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise QuantizeError(f"{shown} must be a positive integer, got {v!r}")
        if self.histogram_bins != 0 and not (256 <= self.histogram_bins <= 8192):
            raise QuantizeError(
                f"histogram_bins must be 0 (the method's default) or between 256 and 8192, got {self.histogram_bins}; "
                "entropy needs more bins than its 128 quantized bins to search anything"
            )
        if not 90.0 <= self.percentile < 100.0:
            raise QuantizeError(f"percentile must be in [90, 100), got {self.percentile}; 99.999 is ONNX Runtime's default")


@dataclass(frozen=True)
class ValidationConfig:
    """How the quantized graph is validated against the FP32 graph's logits (INT8 moves logits by about
    0.01-0.3 on MiniLM; labels mostly agree)."""

    tolerance: float = _field(1.0, "largest |logit difference| from the FP32 graph allowed")
    min_label_agreement: float = _field(0.9, "least share of predicted labels that must agree with the FP32 graph")

    def __post_init__(self) -> None:
        if not (self.tolerance > 0 and math.isfinite(self.tolerance)):
            raise QuantizeError(f"tolerance must be a positive number of logits, got {self.tolerance}; try 1.0")
        if not 0.0 <= self.min_label_agreement <= 1.0:
            raise QuantizeError(f"min_label_agreement must be a fraction from 0 to 1, got {self.min_label_agreement}")


# the keywords QuantConfig took before calibration and validation had their own configs: still accepted
LEGACY_CALIBRATION = {"samples": "samples", "calibration_batch_size": "batch_size", "histogram_bins": "histogram_bins",
                      "percentile": "percentile"}
LEGACY_VALIDATION = ("tolerance", "min_label_agreement")

_METHOD_HINT = {"dynamic": "a dynamic preset (mode='dynamic')", "static": "a static-* preset (mode='static')",
                "weight-only": "a weight-only-* preset (mode='weight-only')"}


def applies_to(name: str) -> tuple[str, ...]:
    """The quantization methods (``QuantMode`` values) the :class:`QuantConfig` field ``name`` applies to."""
    return next(f.metadata.get(METHODS, ALL_METHODS) for f in dataclasses.fields(QuantConfig) if f.name == name)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default  # type: ignore[misc]


def _changed(name: str, value: Any, default: Any) -> list[str]:
    """``name=value`` for what differs from the default (a nested config: ``name.field=value`` for each field that differs)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [f"{name}.{f.name}={getattr(getattr(value, f.name), 'value', getattr(value, f.name))!r}"
                for f in dataclasses.fields(value) if getattr(value, f.name) != getattr(default, f.name)]
    return [f"{name}={getattr(value, 'value', value)!r}"] if value != default else []


@dataclass(frozen=True, init=False)
class QuantConfig:
    """How to quantize. Use a preset (``QuantConfig.dynamic()``, ``QuantConfig.static()``; every name
    of :meth:`presets` is a class method of the same name, ``-`` read as ``_``) and override fields by
    keyword. Each field's help and the methods it applies to are in its metadata
    (``workbench.core.options.field_help(QuantConfig, "per_channel")``, :func:`applies_to`).

    - ``mode``: ``dynamic`` (weights INT8, activations quantized per batch at run time; no
      calibration), ``static`` (activation ranges calibrated on training texts: ``calibration``, a
      :class:`CalibrationConfig`) or ``weight-only`` (MatMul weights in ``weight_bits`` bits in blocks of
      ``block_size`` along K, ONNX Runtime's ``MatMulNBits``; ``accuracy_level`` its compute precision;
      see :mod:`workbench.quant.weightonly`).
    - ``weight_type``: qint8 (signed, the usual choice) or quint8. ``activation_type`` (static only;
      dynamic activations are always uint8 in ONNX Runtime). In static QDQ with one scale per tensor,
      ONNX Runtime 1.19 quantizes MatMul weights with the *activation* type (its QDQMatMul marks every
      input as an activation); ``weight_type`` applies per channel.
    - ``op_types``: operator types to quantize (empty: ONNX Runtime's default for dynamic,
      ``MatMul``/``Gemm`` for static). ``nodes_to_exclude``: node names left in FP32 (the names of the
      FP32 graph; :attr:`QuantResult.node_errors` ranks the ones that hurt most).
    - ``matmul_const_b_only`` (static): quantize only MatMuls whose second input is a weight, leaving
      attention's activation products (Q·Kᵀ, softmax·V) in FP32 as dynamic quantization does (ONNX
      Runtime's ``MatMulConstBOnly``, applied to QDQ too by listing those nodes in ``nodes_to_exclude``).
    - ``exclude_worst``: quantize once, rank the quantized nodes by their own SQNR (on calibration
      texts: no test data), then quantize again leaving the ``exclude_worst`` worst in FP32.
    - ``validation``: a :class:`ValidationConfig` (``tolerance``, ``min_label_agreement``).

    The keywords ``samples``, ``calibration_batch_size``, ``histogram_bins``, ``percentile`` (of
    ``calibration``) and ``tolerance``, ``min_label_agreement`` (of ``validation``) are accepted here
    too, as is ``calibration='entropy'`` for the method alone, and read back as properties.
    """

    mode: QuantMode = _field(QuantMode.DYNAMIC, "dynamic (INT8 weights, activations quantized per batch at run time), "
                                                 "static (calibrated) or weight-only (4-bit MatMul weights)")
    weight_type: QType = _field(QType.QINT8, "INT8 weights: qint8 (signed, the usual choice) or quint8", INT8)
    activation_type: QType = _field(QType.QUINT8, "static activations: quint8 (the usual choice) or qint8", STATIC)
    per_channel: bool = _field(False, "one weight scale per output column", INT8)
    reduce_range: bool = _field(False, "7-bit weights (CPUs without VNNI)", INT8)
    op_types: tuple[str, ...] = _field((), "comma-separated operator types to quantize (none: the mode's own set)")
    nodes_to_exclude: tuple[str, ...] = _field((), "node names to leave in FP32")
    quant_format: QFormat = _field(QFormat.QDQ, "how a static graph stores its INT8 operations: qdq or qoperator", STATIC)
    activation_symmetric: bool = _field(False, "activation ranges symmetric around zero (zero point 0; with "
                                               "activation_type qint8)", STATIC)
    matmul_const_b_only: bool = _field(False, "quantize only MatMuls with a weight input (attention's activation "
                                              "products stay FP32)", STATIC)
    exclude_worst: int = _field(0, "quantize, then quantize again leaving the N nodes of worst SQNR on calibration "
                                   "texts in FP32", INT8)
    weight_bits: int = _field(0, "weight-only: bits per stored weight (0: the mode's own, 4)", WEIGHT_ONLY, inert=(0, 8))
    block_size: int = _field(WEIGHT_ONLY_BLOCK_SIZE, "weight-only presets: weights per 4-bit block along K (a power of 2, "
                                                     "at least 16)", WEIGHT_ONLY)
    accuracy_level: int = _field(0, "weight-only presets: MatMulNBits compute precision (0 unset/FP32, 4 INT8 activations)",
                                 WEIGHT_ONLY)
    weight_symmetric: bool = _field(False, "weight-only: symmetric blocks (no zero point)", WEIGHT_ONLY)
    calibration: CalibrationConfig = _field(help="static: how activation ranges are calibrated (method, samples, ...)",
                                            methods=STATIC, default_factory=CalibrationConfig)
    validation: ValidationConfig = _field(help="how the quantized graph is validated against the FP32 graph's logits",
                                          default_factory=ValidationConfig)
    name: str = _field("", "the variant's name (default: its settings in short, e.g. dynamic-qint8-pc)")

    def __init__(self, **kw: Any) -> None:
        legacy_cal = {LEGACY_CALIBRATION[k]: kw.pop(k) for k in list(kw) if k in LEGACY_CALIBRATION}
        legacy_val = {k: kw.pop(k) for k in list(kw) if k in LEGACY_VALIDATION}
        names = {f.name: f for f in dataclasses.fields(self)}
        unknown = [k for k in kw if k not in names]
        if unknown:
            raise TypeError(f"QuantConfig got an unexpected keyword argument {unknown[0]!r}; its fields: "
                            f"{', '.join([*names, *LEGACY_CALIBRATION, *LEGACY_VALIDATION])}")
        for name, f in names.items():
            object.__setattr__(self, name, kw[name] if name in kw else _default(f))
        cal = self.calibration
        if not isinstance(cal, CalibrationConfig):  # calibration="entropy": the method alone
            cal = CalibrationConfig(method=cal)
        object.__setattr__(self, "calibration", dataclasses.replace(cal, **legacy_cal) if legacy_cal else cal)
        if legacy_val:
            object.__setattr__(self, "validation", dataclasses.replace(self.validation, **legacy_val))
        self.__post_init__()

    @staticmethod
    def upgrade_saved(data: dict) -> dict:
        """A saved config (``quantize.json``) written before calibration and validation had their own configs:
        its flat keys regrouped (``workbench.core.serial.from_dict`` calls this)."""
        if not isinstance(data.get("calibration"), (str, type(None))) and not any(
                k in data for k in (*LEGACY_CALIBRATION, *LEGACY_VALIDATION)):
            return data
        data = dict(data)
        cal = {LEGACY_CALIBRATION[k]: data.pop(k) for k in list(data) if k in LEGACY_CALIBRATION}
        if isinstance(data.get("calibration"), str):
            cal["method"] = data.pop("calibration")
        elif isinstance(data.get("calibration"), dict):
            cal = {**data.pop("calibration"), **cal}
        val = {k: data.pop(k) for k in list(data) if k in LEGACY_VALIDATION}
        return {**data, "calibration": cal, **({"validation": {**data.get("validation", {}), **val}} if val else {})}

    # the keywords of calibration and validation, read as before
    samples = property(lambda self: self.calibration.samples, doc="``calibration.samples``")
    calibration_batch_size = property(lambda self: self.calibration.batch_size, doc="``calibration.batch_size``")
    histogram_bins = property(lambda self: self.calibration.histogram_bins, doc="``calibration.histogram_bins``")
    percentile = property(lambda self: self.calibration.percentile, doc="``calibration.percentile``")
    tolerance = property(lambda self: self.validation.tolerance, doc="``validation.tolerance``")
    min_label_agreement = property(lambda self: self.validation.min_label_agreement, doc="``validation.min_label_agreement``")

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _as_enum(QuantMode, self.mode, "mode", "use 'dynamic' (no calibration), 'static' (QDQ, "
                                                  "calibrated) or 'weight-only' (4-bit MatMul weights)"))
        object.__setattr__(self, "weight_type", _as_enum(QType, self.weight_type, "weight_type", "qint8 is the usual choice"))
        object.__setattr__(self, "activation_type", _as_enum(QType, self.activation_type, "activation_type", "quint8 is the usual choice"))
        object.__setattr__(self, "quant_format", _as_enum(QFormat, self.quant_format, "quant_format", "qdq is the usual choice"))
        if not isinstance(self.validation, ValidationConfig):
            raise QuantizeError(f"validation must be a ValidationConfig, got {type(self.validation).__name__}")
        if isinstance(self.op_types, str) or isinstance(self.nodes_to_exclude, str):
            raise QuantizeError(
                f"op_types and nodes_to_exclude are lists of names, got a string "
                f"({self.op_types!r} / {self.nodes_to_exclude!r}); write ('MatMul',) instead of 'MatMul'"
            )
        object.__setattr__(self, "op_types", tuple(str(o) for o in self.op_types))
        object.__setattr__(self, "nodes_to_exclude", tuple(dict.fromkeys(str(n) for n in self.nodes_to_exclude)))
        for name in ("exclude_worst", "weight_bits", "block_size", "accuracy_level"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise QuantizeError(f"{name} must be a whole number, got {v!r}")
        if self.exclude_worst < 0:
            raise QuantizeError(f"exclude_worst must be a whole number of nodes (0: none), got {self.exclude_worst!r}")
        self._check_methods()
        allowed = {QuantMode.DYNAMIC: DYNAMIC_OP_TYPES, QuantMode.STATIC: static_op_types(),
                   QuantMode.WEIGHT_ONLY: WEIGHT_ONLY_OP_TYPES}[self.mode]
        bad = [o for o in self.op_types if o not in allowed]
        if bad:
            raise QuantizeError(
                f"op_types {bad} cannot be quantized in {self.mode.value} mode; allowed: {list(allowed)}. "
                "Leave op_types empty for the default set"
            )
        if self.mode is QuantMode.STATIC and self.samples < self.calibration_batch_size:
            raise QuantizeError(
                f"samples ({self.samples}) must be at least calibration_batch_size ({self.calibration_batch_size}); "
                "raise samples or lower the batch size"
            )
        if self.mode is QuantMode.WEIGHT_ONLY:
            self._check_weight_only()

    def _check_methods(self) -> None:
        """Refuse a field set away from its default for a method it does not apply to (its metadata says which)."""
        for f in dataclasses.fields(self):
            methods = f.metadata.get(METHODS, ALL_METHODS)
            value = getattr(self, f.name)
            if self.mode.value in methods or value in f.metadata.get("inert", ()):
                continue
            changed = _changed(f.name, value, _default(f))
            if changed:
                raise QuantizeError(
                    f"{', '.join(changed)}: {f.name} applies to {' and '.join(methods)} quantization only, and this is {self.mode.value} "
                    f"quantization; use {' or '.join(_METHOD_HINT[m] for m in methods)}, or leave {f.name} at its default")

    def _check_weight_only(self) -> None:
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

    # -- presets: each name of presets() is the class method of that name ("-" read as "_") ----------------
    @classmethod
    def dynamic(cls, **kw) -> "QuantConfig":
        """Dynamic, signed INT8 weights, one scale per tensor: the fastest to produce, no data needed."""
        return cls(**{"mode": QuantMode.DYNAMIC, **kw})

    @classmethod
    def dynamic_per_channel(cls, **kw) -> "QuantConfig":
        """Dynamic INT8 with one scale per output column: smaller weight error, same speed."""
        return cls(**{"mode": QuantMode.DYNAMIC, "per_channel": True, **kw})

    @classmethod
    def dynamic_fp32_embeddings(cls, **kw) -> "QuantConfig":
        """Dynamic per-channel INT8 of every matrix multiply, with the embedding tables left in FP32
        (``EmbedLayerNormalization`` / ``Gather`` not quantized). On the fine-tuned MiniLM the INT8
        embedding lookup is the single node that costs most accuracy (figures: docs/benchmarks/index.md),
        and the lookup is no matrix multiply, so leaving it in FP32 costs size (the table stays 4 bytes
        a weight), not speed."""
        ops = tuple(o for o in DYNAMIC_OP_TYPES if o not in EMBEDDING_OP_TYPES)
        return cls(**{"mode": QuantMode.DYNAMIC, "per_channel": True, "op_types": ops, **kw})

    @classmethod
    def dynamic_reduce_range(cls, **kw) -> "QuantConfig":
        """Dynamic INT8 with 7-bit weights (for CPUs without VNNI; costs accuracy elsewhere)."""
        return cls(**{"mode": QuantMode.DYNAMIC, "reduce_range": True, **kw})

    @classmethod
    def dynamic_uint8(cls, **kw) -> "QuantConfig":
        """Dynamic with unsigned (QUInt8) weights."""
        return cls(**{"mode": QuantMode.DYNAMIC, "weight_type": QType.QUINT8, **kw})

    @classmethod
    def static_qdq(cls, calibration: str | Calibration = "minmax", samples: int = 128, **kw) -> "QuantConfig":
        """Static INT8 in QDQ format, MatMul/Gemm, activation ranges calibrated on ``samples``
        training texts with ``calibration`` = minmax | entropy | percentile (the static-* presets)."""
        return cls(**{"mode": QuantMode.STATIC, "calibration": calibration, "samples": samples,
                      "op_types": STATIC_DEFAULT_OP_TYPES, **kw})

    @classmethod
    def static_minmax(cls, **kw) -> "QuantConfig":
        """Static QDQ, MinMax calibration (:meth:`static_qdq`)."""
        return cls.static_qdq("minmax", **kw)

    @classmethod
    def static_entropy(cls, **kw) -> "QuantConfig":
        """Static QDQ, Entropy calibration (:meth:`static_qdq`)."""
        return cls.static_qdq("entropy", **kw)

    @classmethod
    def static_percentile(cls, **kw) -> "QuantConfig":
        """Static QDQ, Percentile calibration (:meth:`static_qdq`)."""
        return cls.static_qdq("percentile", **kw)

    @classmethod
    def static(cls, **kw) -> "QuantConfig":
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
    def weight_only_int4_acc4(cls, **kw) -> "QuantConfig":
        """:meth:`weight_only_int4` computing with INT8 activations (``accuracy_level=4``)."""
        return cls.weight_only_int4(**{"accuracy_level": 4, **kw})

    @classmethod
    def weight_only_int8(cls, **kw) -> "QuantConfig":
        """MatMul weights in 8 bits (MatMulNBits), activations in float: onnxruntime >= 1.31 only (its CPU
        kernel runs 8-bit weights); refused on 1.19.2 with the reason."""
        return cls(**{"mode": QuantMode.WEIGHT_ONLY, "weight_bits": 8, **kw})

    # the names these presets had before their methods took the presets' names
    dynamic_int8 = dynamic
    dynamic_int8_per_channel = dynamic_per_channel
    dynamic_int8_fp32_embeddings = dynamic_fp32_embeddings
    dynamic_int8_reduce_range = dynamic_reduce_range
    static_best = static

    @classmethod
    def presets(cls) -> dict[str, "QuantConfig"]:
        """The named presets, as a view or the CLI lists them: ``{name: QuantConfig.<name>()}``."""
        return {name: getattr(cls, name.replace("-", "_"))() for name in PRESETS}

    @classmethod
    def available_presets(cls) -> dict[str, "QuantConfig"]:
        """:meth:`presets` and those this ONNX Runtime builds beyond them (weight-only-int8 on onnxruntime >= 1.31)."""
        table = cls.presets()
        if 8 in runnable_bits()[0]:
            table["weight-only-int8"] = cls.weight_only_int8()
        return table

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
            parts = ["static", self.calibration.method.value, str(self.calibration.samples)]
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



# the preset names, each a class method of QuantConfig ("-" read as "_"), in the order views list them
PRESETS = ("dynamic", "dynamic-per-channel", "dynamic-fp32-embeddings", "dynamic-reduce-range", "dynamic-uint8",
           "static-minmax", "static-entropy", "static-percentile", "static", "weight-only-int4", "weight-only-int4-acc4")

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

    shapes: tuple[tuple[int, int], ...] = field(default=((1, 128),), metadata={"help": "BATCHxSEQ,... to time (--quick: 1x64)"})
    warmup: int = field(default=3, metadata={"help": "untimed runs per shape before timing"})
    repeats: int = field(default=20, metadata={"help": "timed runs per shape (--quick: 5)"})
    threads: Optional[int] = field(default=None, metadata={"help": "intra-op threads of ONNX Runtime (default: its own)"})
    max_seconds: Optional[float] = field(default=20.0, metadata={"help": (
        "stop timing a shape after the round that passes this many seconds (at least 3 rounds)")})
    retimes: int = field(default=1, metadata={"help": "times a timing taken on a busy machine is taken again (--quick: 0)"})
    # where the FP32 and INT8 graphs are timed ("cpu", "cuda", "cuda:N"; CUDA with I/O binding). Accuracy
    # is scored on the CPU provider either way, so the slice comparison does not mix devices.
    device: str = field(default="cpu", metadata={"help": (
        "where the FP32 and INT8 graphs are timed (accuracy is scored on the CPU either way): cpu, cuda or cuda:N (CUDA needs "
        "onnxruntime-gpu: make setup-gpu-infer)")})

    def __post_init__(self) -> None:
        from ..runtime.device import normalize_device
        from ..runtime.ortinfer import check_shapes

        object.__setattr__(self, "device", normalize_device(self.device))
        object.__setattr__(self, "shapes", check_shapes(self.shapes))
        if self.repeats < 1 or self.warmup < 0:
            raise QuantizeError(f"repeats must be >= 1 and warmup >= 0, got repeats={self.repeats}, warmup={self.warmup}")
        if isinstance(self.retimes, bool) or not isinstance(self.retimes, int) or self.retimes < 0:
            raise QuantizeError(f"retimes must be 0 (take each timing once) or more, got {self.retimes!r}")

    @classmethod
    def quick(cls, **kw) -> "TimingConfig":
        """Few repeats at a short sequence: tests and workshops (numbers are rough)."""
        return cls(**{"shapes": ((1, 64),), "warmup": 1, "repeats": 5, "max_seconds": 5.0, "retimes": 0, **kw})

