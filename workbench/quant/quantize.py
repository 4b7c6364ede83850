"""Quantizing and calibrating one graph file (dynamic, static QDQ/QOperator, weight-only).
``DefaultTensorType`` is always set: the fused graph's contrib ops carry no type information."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from .. import runs
from .baseline import graph_kind
from .config import Calibration, QFormat, QType, QuantConfig, QuantizeError, QuantMode

PREPROCESSED_FILE = "model.fp32.pre.onnx"


def encoded_feeds(session, tokenizer, texts: Sequence[str], max_length: int, batch_size: int, pad_to_max: bool) -> list[dict]:
    from ..data.batches import encode
    from ..runtime.ortinfer import make_feed

    return [make_feed(session, encode(tokenizer, list(texts[i : i + batch_size]), max_length, pad_to_max))
            for i in range(0, len(texts), batch_size)]


def feeds_reader(feeds: list[dict]):
    from onnxruntime.quantization import CalibrationDataReader

    class _ListReader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self):
            return next(self._it, None)

        def rewind(self) -> None:
            self._it = iter(feeds)

    return _ListReader()


def preprocess_for_static(fp32_path: str | os.PathLike, out_path: str | os.PathLike) -> Path:
    """``quant_pre_process`` (constant folding, shape inference) before static quantization.
    QDQ quantizes only tensors of known type and ONNX's shape inference stops at the fused graph's contrib ops, so
    ORT's symbolic inference runs there (not on the exported graph), with ``auto_merge``: transformers 5's BERT without
    ``token_type_ids`` broadcasts ``Min(512, sequence)`` against ``sequence`` (equal for every input the model accepts),
    which it cannot prove; the merged dims only annotate shapes (the logits are still validated)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    out_path = Path(out_path)
    symbolic = graph_kind(fp32_path) == "fused"
    with runs.atomic_path(out_path) as tmp, tempfile.TemporaryDirectory(prefix="workbench-preprocess-") as scratch:
        try:
            # symbolic inference saves a failing model as ./sym_shape_infer_temp.onnx: work from a scratch
            # folder, with both paths made absolute first (a relative --out once resolved against it)
            src_abs, tmp_abs = str(Path(fp32_path).resolve()), str(tmp.resolve())
            with contextlib.chdir(scratch):
                quant_pre_process(src_abs, tmp_abs, skip_symbolic_shape=not symbolic, auto_merge=symbolic)
        except Exception as exc:
            raise QuantizeError(
                f"pre-processing {fp32_path} for static quantization failed "
                f"({'with' if symbolic else 'without'} symbolic shape inference): {type(exc).__name__}: {exc}. "
                "Dynamic quantization needs no pre-processing: try QuantConfig.preset('dynamic')"
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


@contextlib.contextmanager
def _without_preprocessing_advice():
    """Drop ``quantize_dynamic``'s advice to run ``quant_pre_process`` first (a root-logger record, once per
    variant): that pre-processing serves static quantization, and on the fused tiny BERT dynamic quantization
    gave the same operators with and without it (checked here)."""
    def keep(record: logging.LogRecord) -> bool:
        return not (record.pathname.replace(os.sep, "/").endswith("onnxruntime/quantization/quantize.py")
                    and str(record.msg).startswith("Please consider"))

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)


@contextlib.contextmanager
def _scratch_copy(graph: Path, folder: Path):
    """``graph`` (and its ``.data``) linked or copied into a scratch folder inside ``folder``, removed afterwards:
    ONNX Runtime's quantizer writes ``<graph>-inferred.onnx`` beside its input (litter, or a failure when read-only)."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".quantize-scratch.", suffix=".tmp", dir=folder))
    try:
        for f in (graph, graph.with_name(graph.name + ".data")):
            if f.exists():
                try:
                    os.link(f, scratch / f.name)
                except OSError:  # another file system, or links not allowed
                    shutil.copyfile(f, scratch / f.name)
        yield scratch / graph.name
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _qtypes() -> dict:
    from onnxruntime.quantization import QuantType

    return {QType.QINT8: QuantType.QInt8, QType.QUINT8: QuantType.QUInt8}


def quantize_graph(fp32_path: str | os.PathLike, cfg: QuantConfig, out_path: str | os.PathLike,
                   calibration_feeds: Optional[list[dict]] = None) -> tuple[Path, Path]:
    """Quantize one graph file; returns (quantized path, the float graph its node names refer to)."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    fp32_path, out_path = Path(fp32_path), Path(out_path)
    qtype = _qtypes()
    extra: dict[str, Any] = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    op_types = list(cfg.op_types) or None
    if cfg.mode is QuantMode.WEIGHT_ONLY:  # 4-bit MatMulNBits (workbench.quant.weightonly)
        from .weightonly import quantize_weight_only

        _check_nodes_exist(fp32_path, cfg.nodes_to_exclude)
        return quantize_weight_only(fp32_path, cfg, out_path), fp32_path
    if cfg.mode is QuantMode.DYNAMIC:
        _check_nodes_exist(fp32_path, cfg.nodes_to_exclude)
        with runs.atomic_path(out_path) as tmp, _without_preprocessing_advice(), _scratch_copy(fp32_path, out_path.parent) as src:
            quantize_dynamic(
                str(src), str(tmp), op_types_to_quantize=op_types, per_channel=cfg.per_channel,
                reduce_range=cfg.reduce_range, weight_type=qtype[cfg.weight_type],
                nodes_to_exclude=list(cfg.nodes_to_exclude) or None, extra_options=extra,
            )
        return out_path, fp32_path
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
    """MatMul nodes with no weight input (attention's Q·Kᵀ, softmax·V): what ``matmul_const_b_only`` leaves in FP32."""
    import onnx

    model = onnx.load(str(float_path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    consts = {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return [n.name for n in model.graph.node
            if n.op_type == "MatMul" and not any(i in inits or i in consts for i in n.input)]


def calibrate(float_path: str | os.PathLike, cfg: QuantConfig, feeds: list[dict]):
    """Activation ranges on ``feeds`` from ONNX Runtime's calibrators. Not ``quantize_static``: in 1.19.2 it never
    forwards the histogram size, so Entropy runs with 128 bins = 128 quantized bins and returns the MinMax ranges
    (measured: byte-identical models). Not "CalibMaxIntermediateOutputs" either: 1.19.2's ``MinMaxCalibrater.collect_data``
    drops each full chunk's ranges, keeping the last partial chunk's alone (or raising "No data is collected")."""
    from onnxruntime.quantization import CalibrationMethod, create_calibrator

    from ..core.quiet import calibrator_prints

    method = {Calibration.MINMAX: CalibrationMethod.MinMax, Calibration.ENTROPY: CalibrationMethod.Entropy,
              Calibration.PERCENTILE: CalibrationMethod.Percentile}[cfg.calibration.method]
    options: dict[str, Any] = {}
    cal = cfg.calibration
    if cal.method is Calibration.ENTROPY:
        options = {"num_bins": cal.histogram_bins or 512, "num_quantized_bins": 128}
    elif cal.method is Calibration.PERCENTILE:
        options = {"num_bins": cal.histogram_bins or 2048, "percentile": cal.percentile}
    with tempfile.TemporaryDirectory(prefix="ort.quant.") as tmp:
        calibrator = create_calibrator(
            Path(float_path), list(cfg.resolved_op_types()),
            augmented_model_path=str(Path(tmp) / "augmented_model.onnx"), calibrate_method=method,
            extra_options=options,
        )
        with calibrator_prints():  # onnxruntime's histogram calibrators print their progress: see quiet.py
            calibrator.collect_data(feeds_reader(feeds))
            ranges = calibrator.compute_data()
        del calibrator
    return ranges


def _quantize_qdq(float_path: Path, out_path: Path, cfg: QuantConfig, ranges, extra: dict) -> None:
    """The second half of ``onnxruntime.quantization.quantize_static`` (QDQ or QOperator), given ranges."""
    from onnxruntime.quantization import QDQQuantizer, QuantFormat
    from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
    from onnxruntime.quantization.quant_utils import QuantizationMode, load_model_with_shape_infer
    from onnxruntime.quantization.quantize import check_static_quant_arguments

    qtype = _qtypes()
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
    """Names of the FP32 graph's nodes (of ``op_types``) that the quantized graph changed: a node left in FP32
    keeps its name, operator and inputs; a quantized one is replaced (dynamic) or fed by DequantizeLinear (QDQ)."""
    import onnx

    ops = set(op_types)
    f = onnx.load(str(float_path), load_external_data=False)
    q = onnx.load(str(quant_path), load_external_data=False)
    kept = {(n.name, n.op_type, tuple(n.input)) for n in q.graph.node}
    return [n.name for n in f.graph.node if n.op_type in ops and n.name and (n.name, n.op_type, tuple(n.input)) not in kept]

