"""Weight-only quantization: MatMul weights in 4 bits (``com.microsoft.MatMulNBits``), activations in float.
On onnxruntime 1.19.2 (the training wheel) ``MatMul4BitsQuantizer`` writes 4 bits only and the CPU kernel refuses 8
("Only 4b quantization is supported"), so 8 bits are refused with that reason; its module imports a
``quantize_matmul_4bits`` binding that wheel lacks, which :func:`ort_quantizer_class` supplies in numpy (MLAS's rule
and packing). 1.31+ has ``MatMulNBitsQuantizer`` and runs 8 bits. ``accuracy_level`` 4 quantizes activations to
INT8 per block (MLAS's ``CompInt8``); 0/1 compute in FP32, as 2/3 do without fp16/bf16."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import runs
from .nbits import nbits_quantizer_class
from .config import QuantizeError

if TYPE_CHECKING:
    from .config import QuantConfig

def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C's ``roundf`` (halves away from zero), which MLAS uses; numpy's round goes to even."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_matmul_4bits(dst_packed: np.ndarray, weight: np.ndarray, scales: np.ndarray, zero_points: np.ndarray,
                          block_size: int, cols: int, rows: int, is_symmetric: bool) -> None:
    """``onnxruntime.capi._pybind_state.quantize_matmul_4bits`` in numpy: the K x N weight (zero rows pad whole blocks)
    quantized block by block along K in MatMulNBits' layout: ``dst_packed[n, b, i]`` holds values ``2i`` (low nibble)
    and ``2i+1`` of block ``b`` of column ``n``; ``scales[n * k_blocks + b]``; ``zero_points`` two blocks a byte
    (symmetric: 8). Symmetric: ``scale = v / -8`` for the largest-magnitude ``v``; asymmetric: the range widened to
    include 0, ``scale = (max - min) / 15``."""
    kp = weight.shape[0]
    k_blocks = (rows + block_size - 1) // block_size
    if kp != k_blocks * block_size or weight.shape[1] != cols or block_size % 2:
        raise QuantizeError(f"weight of shape {weight.shape} does not match K={rows}, N={cols}, block_size={block_size}")
    blocks = np.ascontiguousarray(weight.T, dtype=np.float32).reshape(cols, k_blocks, block_size)
    if is_symmetric:
        mx, mn = blocks.max(axis=2), blocks.min(axis=2)
        v = np.where(np.abs(mx) > np.abs(mn), mx, mn)
        scale = (v / -8.0).astype(np.float32)
        zp = np.full(scale.shape, 8.0, dtype=np.float32)
    else:
        mn = np.minimum(blocks.min(axis=2), 0.0)
        mx = np.maximum(blocks.max(axis=2), 0.0)
        scale = ((mx - mn) / 15.0).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            zp_fp = np.where(scale != 0, -mn / np.where(scale != 0, scale, 1), mn)
        zp = np.clip(_round_half_away(zp_fp), 0, 15).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        recip = np.where(scale != 0, 1.0 / np.where(scale != 0, scale, 1), 0.0).astype(np.float32)
    q = np.clip(_round_half_away(blocks * recip[..., None] + zp[..., None]), 0, 15).astype(np.uint8)
    dst_packed[...] = (q[..., 0::2] | (q[..., 1::2] << 4)).reshape(dst_packed.shape)
    scales[...] = scale.reshape(-1).astype(scales.dtype)
    if not is_symmetric:
        zpi = zp.astype(np.uint8)
        if k_blocks % 2:
            zpi = np.concatenate([zpi, np.zeros((cols, 1), np.uint8)], axis=1)
        zero_points[...] = (zpi[:, 0::2] | (zpi[:, 1::2] << 4)).reshape(-1)


def ort_quantizer_class():
    """``MatMul4BitsQuantizer`` from onnxruntime, importable in the training wheel (see the module doc)."""
    import onnxruntime.capi._pybind_state as binding

    if not hasattr(binding, "quantize_matmul_4bits"):
        binding.quantize_matmul_4bits = quantize_matmul_4bits
    if not hasattr(binding, "quantize_qdq_matmul_4bits"):  # the QDQ format's binding: not used here
        def _no_qdq(*_a, **_k):
            raise QuantizeError("the QDQ format of 4-bit weight-only quantization needs onnxruntime's "
                                "quantize_qdq_matmul_4bits binding, which onnxruntime-training-cpu 1.19.2 lacks")
        binding.quantize_qdq_matmul_4bits = _no_qdq
    from onnxruntime.quantization.matmul_4bits_quantizer import MatMul4BitsQuantizer

    return MatMul4BitsQuantizer


def binding_supplied() -> bool:
    """Whether the workbench supplied the quantize_matmul_4bits binding (the training wheel lacks it)."""
    import onnxruntime.capi._pybind_state as binding

    return getattr(binding, "quantize_matmul_4bits", None) is quantize_matmul_4bits


@contextlib.contextmanager
def _quiet_quantizer_log():
    """onnxruntime 1.32's quantizer logs one INFO line per MatMul on the root logger's handler: not ours to print."""
    log = logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(level)


def quantize_weight_only(fp32_path: str | os.PathLike, cfg: "QuantConfig", out_path: str | os.PathLike) -> Path:
    """Every MatMul with a constant 2-D weight (but ``cfg.nodes_to_exclude``) rewritten to ``MatMulNBits``."""
    import onnx

    cfg.check_bits()
    out_path = Path(out_path)
    model = onnx.load(str(fp32_path))
    nbits = nbits_quantizer_class()
    kw = dict(block_size=cfg.block_size, is_symmetric=cfg.weight_symmetric, accuracy_level=cfg.accuracy_level or None,
              nodes_to_exclude=list(cfg.nodes_to_exclude))
    if nbits is not None:  # onnxruntime 1.20+: MatMul4BitsQuantizer became MatMulNBitsQuantizer (2, 4, 8 bits)
        quantizer = nbits(model, bits=cfg.bits, **kw)
    else:
        quantizer = ort_quantizer_class()(model, **kw)
    with _quiet_quantizer_log():
        quantizer.process()
    q = quantizer.model.model
    if not any(n.op_type == "MatMulNBits" for n in q.graph.node):
        raise QuantizeError(f"no MatMul of {Path(fp32_path).name} has a constant 2-D weight to store in {cfg.bits} bits "
                            "(nothing to quantize): use dynamic INT8 for this graph")
    with runs.atomic_path(out_path) as tmp:
        onnx.save(q, str(tmp))
    return out_path
