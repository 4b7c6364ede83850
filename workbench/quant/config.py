""":class:`QuantConfig` and its presets, :class:`TimingConfig`. A field set away from its default for a method it
does not apply to (its metadata says which: :func:`applies_to`) is refused in one line."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Optional

from ..core.options import parse_choice
from .formats import (ACCURACY_LEVELS, DYNAMIC_OP_TYPES, EIGHT_BIT_REFUSAL, EMBEDDING_OP_TYPES, STATIC_DEFAULT_OP_TYPES,
                      SUPPORTED_BITS, WEIGHT_ONLY_BLOCK_SIZE, WEIGHT_ONLY_OP_TYPES, Calibration, QFormat, QType, QuantMode,
                      static_op_types)
from .nbits import probe_bits


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
    """A config field with its help and methods (``inert``: values accepted outside them like the default)."""
    inert = kw.pop("inert", ())
    return field(default=default, metadata={"help": help, METHODS: methods, "inert": inert}, **kw)


@dataclass(frozen=True)
class CalibrationConfig:
    """How static quantization calibrates its activation ranges (histogram methods: entropy, percentile)."""

    method: Calibration = _field(Calibration.MINMAX, "static calibration method")
    samples: int = _field(128, "static calibration texts")
    batch_size: int = _field(8, "calibration texts per batch (the histogram calibrators stack equal batches)")
    histogram_bins: int = _field(0, "histogram bins of entropy and percentile calibration (0: 512 for entropy, 2048 for "
                                    "percentile; else 256-8192)")
    percentile: float = _field(99.999, "percentile calibration: the share of each activation's histogram kept in range")

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", _as_enum(Calibration, self.method, "calibration", "minmax is the fastest"))
        for name in ("samples", "batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise QuantizeError(f"{name} must be a positive integer, got {v!r}")
        if self.histogram_bins != 0 and not (256 <= self.histogram_bins <= 8192):
            raise QuantizeError(
                f"histogram_bins must be 0 (the method's default) or between 256 and 8192, got {self.histogram_bins}; "
                "entropy needs more bins than its 128 quantized bins to search anything"
            )
        if not 90.0 <= self.percentile < 100.0:
            raise QuantizeError(f"percentile must be in [90, 100), got {self.percentile}; 99.999 is ONNX Runtime's default")


@dataclass(frozen=True)
class ValidationConfig:
    """Validation against the FP32 logits (INT8 moves them by about 0.01-0.3 on MiniLM; labels mostly agree)."""

    tolerance: float = _field(1.0, "largest |logit difference| from the FP32 graph allowed")
    min_label_agreement: float = _field(0.9, "least share of predicted labels that must agree with the FP32 graph")

    def __post_init__(self) -> None:
        if not (self.tolerance > 0 and math.isfinite(self.tolerance)):
            raise QuantizeError(f"tolerance must be a positive number of logits, got {self.tolerance}; try 1.0")
        if not 0.0 <= self.min_label_agreement <= 1.0:
            raise QuantizeError(f"min_label_agreement must be a fraction from 0 to 1, got {self.min_label_agreement}")


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


@dataclass(frozen=True)
class QuantConfig:
    """A preset (:data:`PRESET_TABLE`) or fields by keyword. Pitfalls: in static QDQ with one scale per tensor, ONNX
    Runtime 1.19 quantizes MatMul weights with the *activation* type (QDQMatMul marks every input as an activation), so
    ``weight_type`` applies per channel only; ``matmul_const_b_only`` (ORT's ``MatMulConstBOnly``) reaches QDQ by listing
    attention's activation products in ``nodes_to_exclude``."""

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
    # keys an earlier version saved flat (quantize.json, search.json) and where they are now: reading such a file is
    # refused in one line naming the key (workbench.core.serial)
    MOVED_KEYS: ClassVar[dict[str, str]] = {
        "calibration": "calibration.method", "samples": "calibration.samples", "calibration_batch_size": "calibration.batch_size",
        "histogram_bins": "calibration.histogram_bins", "percentile": "calibration.percentile",
        "tolerance": "validation.tolerance", "min_label_agreement": "validation.min_label_agreement"}

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _as_enum(QuantMode, self.mode, "mode", "use 'dynamic' (no calibration), 'static' (QDQ, "
                                                  "calibrated) or 'weight-only' (4-bit MatMul weights)"))
        object.__setattr__(self, "weight_type", _as_enum(QType, self.weight_type, "weight_type", "qint8 is the usual choice"))
        object.__setattr__(self, "activation_type", _as_enum(QType, self.activation_type, "activation_type", "quint8 is the usual choice"))
        object.__setattr__(self, "quant_format", _as_enum(QFormat, self.quant_format, "quant_format", "qdq is the usual choice"))
        for name, cls in (("calibration", CalibrationConfig), ("validation", ValidationConfig)):
            if not isinstance(getattr(self, name), cls):
                raise QuantizeError(f"{name} must be a {cls.__name__} (e.g. {name}={cls.__name__}()), got "
                                    f"{getattr(self, name)!r}; give a dict of its fields to QuantConfig.preset instead")
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
        cal = self.calibration
        if self.mode is QuantMode.STATIC and cal.samples < cal.batch_size:
            raise QuantizeError(f"samples ({cal.samples}) must be at least the calibration batch_size ({cal.batch_size}); "
                                "raise samples or lower the batch size")
        if self.mode is QuantMode.WEIGHT_ONLY:
            self._check_weight_only()

    def _check_methods(self) -> None:
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
        """Refuse weight-only bits this ONNX Runtime cannot build and run on the CPU (8 on 1.19.2), saying why."""
        if self.bits in SUPPORTED_BITS:
            return
        bits, version = probe_bits()
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

    @classmethod
    def preset(cls, name: str, /, machine: Optional["MachineDefaults"] = None, **overrides: Any) -> "QuantConfig":
        """The preset ``name`` of :data:`PRESET_TABLE` with ``overrides`` (``calibration``/``validation`` as a dict change
        only the fields named); u8s8 INT8 presets take ``machine``'s ``reduce_range`` unless they or ``overrides`` set one."""
        if name not in PRESET_TABLE:
            raise QuantizeError(f"no quantization preset {name!r}; presets: {list(PRESET_TABLE)}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in (k for k in overrides if k not in names):
            home = next((n for n, c in _NESTED.items() if key in {f.name for f in dataclasses.fields(c)}), None)
            raise QuantizeError(f"preset {name!r}: QuantConfig has no field {key!r}; "
                                + (f"give it as {home}={{{key!r}: ...}}" if home else f"its fields: {names}"))
        table = PRESET_TABLE[name][1]
        fields = {**({"reduce_range": machine.reduce_range} if machine is not None and _u8s8(table) else {}), **table}
        for key, value in overrides.items():
            fields[key] = {**fields.get(key, {}), **value} if key in _NESTED and isinstance(value, dict) else value
        try:
            return cls(**{k: _NESTED[k](**v) if k in _NESTED and isinstance(v, dict) else v for k, v in fields.items()})
        except (QuantizeError, TypeError) as exc:  # 8 bits on onnxruntime 1.19.2, an override refused, an unknown nested field
            raise QuantizeError(f"preset {name!r}: {exc}") from None

    @property
    def label(self) -> str:
        """``name`` if given, else a short description (``dynamic-qint8-pc``, ``static-entropy-128``)."""
        if self.name:
            return self.name
        wo, static = self.mode is QuantMode.WEIGHT_ONLY, self.mode is QuantMode.STATIC
        parts = {QuantMode.DYNAMIC: ["dynamic", self.weight_type.value],
                 QuantMode.WEIGHT_ONLY: ["weight-only", f"int{self.bits}", f"b{self.block_size}"],
                 QuantMode.STATIC: ["static", self.calibration.method.value, str(self.calibration.samples)]}[self.mode]
        types_changed = self.weight_type is not QType.QINT8 or self.activation_type is not QType.QUINT8
        fp32_embeddings = self.op_types and not set(EMBEDDING_OP_TYPES) & set(self.op_types)
        tags = [(f"acc{self.accuracy_level}", wo and self.accuracy_level), ("sym", wo and self.weight_symmetric),
                (f"w{self.weight_type.value}-a{self.activation_type.value}", static and types_changed),
                ("qop", static and self.quant_format is QFormat.QOPERATOR), ("sym", static and self.activation_symmetric),
                ("constb", static and self.matmul_const_b_only), ("pc", self.per_channel),
                ("fp32emb", self.mode is QuantMode.DYNAMIC and fp32_embeddings), ("rr", self.reduce_range),
                (f"excl{len(self.nodes_to_exclude)}", self.nodes_to_exclude), (f"worst{self.exclude_worst}", self.exclude_worst)]
        return "-".join(parts + [tag for tag, on in tags if on])

    def resolved_op_types(self) -> tuple[str, ...]:
        if self.op_types:
            return self.op_types
        return {QuantMode.DYNAMIC: DYNAMIC_OP_TYPES, QuantMode.STATIC: STATIC_DEFAULT_OP_TYPES,
                QuantMode.WEIGHT_ONLY: WEIGHT_ONLY_OP_TYPES}[self.mode]


_NESTED = {"calibration": CalibrationConfig, "validation": ValidationConfig}  # preset fields given as a dict of theirs
_STATIC = {"mode": "static", "op_types": STATIC_DEFAULT_OP_TYPES}
# the presets, in the order views list them: name -> (what it is in one line, its fields apart from the defaults)
PRESET_TABLE: dict[str, tuple[str, dict[str, Any]]] = {
    "dynamic": ("signed INT8 weights, one scale per tensor, activations per batch: the fastest to produce, no data needed", {}),
    "dynamic-per-channel": ("dynamic INT8 with one scale per output column: smaller weight error, same speed", {"per_channel": True}),
    "dynamic-fp32-embeddings": ("dynamic per-channel INT8 of every matrix multiply, the embedding lookup left in FP32 (on MiniLM "
                                "the node that costs most accuracy, and no matrix multiply)",
                                {"per_channel": True, "op_types": tuple(o for o in DYNAMIC_OP_TYPES if o not in EMBEDDING_OP_TYPES)}),
    "dynamic-reduce-range": ("dynamic INT8 with 7-bit weights (x86 CPUs without VNNI; costs accuracy elsewhere)", {"reduce_range": True}),
    "dynamic-uint8": ("dynamic INT8 with unsigned (quint8) weights", {"weight_type": "quint8"}),
    "static-minmax": ("static QDQ of MatMul/Gemm, MinMax calibration on training texts", _STATIC),
    "static-entropy": ("static QDQ, Entropy calibration", {**_STATIC, "calibration": {"method": "entropy"}}),
    "static-percentile": ("static QDQ, Percentile calibration", {**_STATIC, "calibration": {"method": "percentile"}}),
    "static": ("the static recipe that measured best on MiniLM: MinMax, per channel, weight MatMuls only, the 6 nodes of "
               "worst SQNR on calibration texts left in FP32", {**_STATIC, "per_channel": True, "matmul_const_b_only": True,
                                                                 "exclude_worst": 6}),
    "weight-only-int4": ("MatMul weights in 4 bits (MatMulNBits, blocks of 32), activations in float",
                         {"mode": "weight-only", "weight_bits": 4}),
    "weight-only-int4-acc4": ("weight-only-int4 computing with INT8 activations (accuracy_level 4)",
                              {"mode": "weight-only", "weight_bits": 4, "accuracy_level": 4}),
    "weight-only-int8": ("MatMul weights in 8 bits: onnxruntime 1.31+ (the current stack), refused on 1.19.2 (4 bits only)",
                         {"mode": "weight-only", "weight_bits": 8}),
}
# presets onnxruntime 1.19.2 cannot build (QuantConfig.preset says why there; newer ones build them)
NEWER_ORT_PRESETS = ("weight-only-int8",)
PRESETS = tuple(n for n in PRESET_TABLE if n not in NEWER_ORT_PRESETS)  # the names views and the CLI list


def available_presets() -> tuple[str, ...]:
    """:data:`PRESETS` and those this ONNX Runtime builds beyond them (weight-only-int8 on onnxruntime >= 1.31)."""
    return PRESETS + (NEWER_ORT_PRESETS if 8 in probe_bits()[0] else ())


def _u8s8(fields: dict[str, Any]) -> bool:
    """Whether a preset's fields make INT8 products of uint8 activations and int8 weights (the ones that can saturate)."""
    return (fields.get("mode", "dynamic") in INT8 and fields.get("weight_type", "qint8") == "qint8"
            and fields.get("activation_type", "quint8") == "quint8" and "reduce_range" not in fields)


VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx")  # the flags MachineProfile.has_vnni reads


@dataclass(frozen=True)
class MachineDefaults:
    """What the u8s8 INT8 presets take on a CPU (``QuantConfig.preset(name, machine=...)``), and why in one sentence."""

    reduce_range: bool
    why: str


def machine_defaults(flags: Optional[Mapping[str, bool]] = None) -> MachineDefaults:
    """The weight bits of the u8s8 INT8 presets on this CPU (``flags``: default this CPU's), and why: 8 everywhere.
    With AVX2 but no VNNI, ``vpmaddubsw``'s int16 sums can saturate and ONNX Runtime suggests 7-bit weights, yet
    on such a CPU they lost more than 8-bit ones on both models (docs/measuring.md): a preset to try."""
    if flags is None:
        from ..perf.machine_profile import cpu_model_and_flags

        flags = cpu_model_and_flags()[1]
    vnni = [k for k in VNNI_FLAGS if flags.get(k)]
    if vnni:
        return MachineDefaults(False, f"8-bit weights: this CPU has {vnni[0]}, whose INT8 products of uint8 activations and "
                                      "int8 weights do not saturate")
    if flags.get("avx2") or flags.get("avx512f"):
        return MachineDefaults(False, "8-bit weights: this CPU has AVX2 but no VNNI, where INT8 products of uint8 activations and "
                                      "int8 weights can saturate; 7-bit weights (preset dynamic-reduce-range, ONNX Runtime's "
                                      "suggestion when accuracy drops) lost more accuracy on such a CPU (docs/measuring.md)")
    return MachineDefaults(False, "8-bit weights: this CPU shows no AVX2 or VNNI flag (not x86?), so the saturation of "
                                  "x86's AVX2 INT8 products does not apply")


def machine_preset(name: str, /, **overrides: Any) -> "QuantConfig":
    """The preset ``name`` as every front builds it: following this CPU (:func:`machine_defaults`), with ``overrides``."""
    return QuantConfig.preset(name, machine=machine_defaults(), **overrides)


def machine_note(cfg: "QuantConfig", defaults: Optional[MachineDefaults] = None) -> Optional[str]:
    """One sentence for a result's notes: the weight bits a u8s8 INT8 config used beside this machine's choice and its reason."""
    if cfg.mode.value not in INT8 or cfg.weight_type is not QType.QINT8 or cfg.activation_type is not QType.QUINT8:
        return None
    d = defaults or machine_defaults()
    return (f"reduce_range={cfg.reduce_range} ({'as' if cfg.reduce_range == d.reduce_range else 'not'} this machine's "
            f"default: {d.why})")


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

