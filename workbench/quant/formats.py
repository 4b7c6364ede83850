"""The modes, number formats and operator types ONNX Runtime quantizes in each, on which runtime; the configs check these."""

from __future__ import annotations

import enum


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
    """QDQ (Quantize/DequantizeLinear pairs around float ops, fused at load time) or QOperator (QLinearMatMul...)."""

    QDQ = "qdq"
    QOPERATOR = "qoperator"


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
