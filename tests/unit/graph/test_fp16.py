"""The FP16 variant of the fused graph: converted with float32 inputs/outputs, run on the CPU
provider (float16 storage, float32 arithmetic per node), validated against the FP32 fused graph
with FP16's tolerance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from workbench.runtime.device import placements_from_profile
from workbench.runtime.ortinfer import probe_placement
from workbench.graph.fp16 import (
    FLOAT,
    FLOAT16,
    FP16_TOLERANCE,
    Fp16Error,
    convert_fp16,
    fp16_structure,
    validate_fp16,
)
from workbench.graph import FUSED_FP16_FILE, FusionConfig, Variant, load_fusion, run_fusion
from workbench.runtime.ortinfer import make_feed, make_session, synthetic_batch


@pytest.fixture(scope="module")
def fp16_graph(fused_tiny, tmp_path_factory):
    dst = tmp_path_factory.mktemp("fp16") / "fused_fp16.onnx"
    structure = convert_fp16(fused_tiny.fused_path, dst, "bert")
    return dst, structure


def test_conversion_keeps_io_types_and_halves_the_weights(fp16_graph, fused_tiny):
    path, s = fp16_graph
    assert s.ok, s.problems
    fp32 = onnx.load(str(fused_tiny.fused_path))
    assert s.input_types == {i.name: i.type.tensor_type.elem_type for i in fp32.graph.input}  # int64 ids stay int64
    assert set(s.output_types.values()) == {FLOAT}  # logits stay float32
    assert s.initializer_types.get(FLOAT16, 0) > 0 and FLOAT not in s.initializer_types
    assert s.cast_nodes >= 1  # the float16 -> float32 cast before the logits
    assert path.stat().st_size < 0.6 * fused_tiny.fused_path.stat().st_size  # weights take half the bytes


def test_the_structure_check_catches_an_unconverted_graph(fused_tiny, tmp_path):
    s = fp16_structure(fused_tiny.fused_path)
    assert not s.ok and "no float16 initializers" in s.problems[0] and "float32 initializer(s) left" in s.problems[1]
    with pytest.raises(Fp16Error, match=r"converting .* to float16 failed"):
        convert_fp16(tmp_path / "missing.onnx", tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()


def test_the_fp16_graph_runs_on_the_cpu_between_inserted_casts(fp16_graph, fused_tiny, tmp_path):
    """ONNX Runtime's CPU provider has few float16 kernels: it runs the others in float32 between
    Cast nodes it inserts, so more nodes execute than the file holds, most of them Casts."""
    path, s = fp16_graph
    session = make_session(path)
    feed = make_feed(session, synthetic_batch(2, 16, 1000))
    out16 = session.run(None, feed)[0]
    out32 = make_session(fused_tiny.fused_path).run(None, feed)[0]
    assert out16.dtype == np.float32
    diff = float(np.abs(out16 - out32).max())
    assert 0 < diff < FP16_TOLERANCE  # not the FP32 graph in disguise, and within FP16's tolerance
    prof = make_session(path, profile_prefix=str(tmp_path / "profile"))
    prof.run(None, feed)
    executed = placements_from_profile(json.loads(Path(prof.end_profiling()).read_text()))
    file_casts = sum(1 for n in onnx.load(str(path)).graph.node if n.op_type == "Cast")
    inserted = [p for p in executed if p.op_type == "Cast" and p.name.startswith("InsertedPrecisionFreeCast_")]
    assert len(executed) > len(onnx.load(str(path)).graph.node) and len(inserted) > file_casts
    assert probe_placement(path, "cpu", feed).nodes_by_provider == {"CPUExecutionProvider": len(executed)}


def test_validation_uses_fp16_tolerance_and_fails_past_it():
    ref = np.array([[2.0, -1.0], [-0.5, 1.5], [3.0, 0.0]], dtype=np.float32)
    ok = validate_fp16(ref + 1e-3, ref)
    assert ok.passed and ok.tolerance == FP16_TOLERANCE and ok.message.startswith("the FP16 graph (run on cpu; float16 storage")
    bad = validate_fp16(ref + 2 * FP16_TOLERANCE, ref, where="cuda")
    assert not bad.passed and "the FP16 graph (run on cuda)" in bad.message
    flipped = ref.copy()
    flipped[0] = [-1.0, 2.0]  # one of three labels changes: under FP16's 99% agreement
    assert not validate_fp16(flipped, ref, tolerance=10.0).passed


def test_fusion_builds_and_validates_the_fp16_variant_on_the_cpu(exported_tiny, tmp_path):
    cfg = FusionConfig.inspect_only(variants=("transformer",), fp16=True)
    assert cfg.variants == (Variant.UNOPTIMIZED, Variant.TRANSFORMER, Variant.TRANSFORMER_FP16)
    r = run_fusion(exported_tiny, cfg, tmp_path)
    fp16 = r.variant("transformer_fp16")
    assert fp16.path == (tmp_path / FUSED_FP16_FILE).resolve() and fp16.path.is_file()
    assert fp16.validation.passed and fp16.validation.tolerance == FP16_TOLERANCE
    assert 0 < fp16.validation.max_abs_diff < FP16_TOLERANCE
    assert fp16.op_histogram.get("Attention") == r.variant("transformer").op_histogram["Attention"]  # fusions kept
    assert any("FP16 validated on the CPU provider" in n for n in r.notes)
    assert r.all_passed and r.device == "cpu" and r.placement == {}
    assert load_fusion(tmp_path).variant("transformer_fp16").validation == fp16.validation
