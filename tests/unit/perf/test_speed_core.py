"""The speed core: work per graph (multiply-adds from the ONNX graph), the floor arithmetic, the
machine profile and its cache, the busy-machine check, interleaved rounds and paired ratios.

No time is asserted anywhere: measured figures are only checked to be positive and finite.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time

import numpy as np
import pytest

from workbench.perf import machine_profile as machine
from workbench.core.latency import Ratio, interleaved, paired_ratio
from workbench.perf.machine_profile import LoadCheck, MachineProfile, check_load, combine_checks, judge_load, machine_profile
from workbench.models.load import TINY_CONFIG
from helpers.macs import config_macs
from workbench.perf.work import GraphWork, WorkError, floor_for, graph_work


def profile(fp32=100.0, int8=200.0, qdq=None, threads=2, **kw) -> MachineProfile:
    base = dict(cpu_model="Test CPU", flags={k: False for k in machine.FLAG_KEYS} | {"avx2": True}, cores=2,
                threads=threads, ort_version="1.19.2", fp32_gops=fp32, int8_gops=int8, qdq_int8_gops=qdq,
                measured_at="2026-01-01T00:00:00+00:00", shapes=[[128, 384, 384]])
    base.update(kw)
    return MachineProfile(**base)


TINY = dict(hidden=TINY_CONFIG["hidden_size"], intermediate=TINY_CONFIG["intermediate_size"],
            layers=TINY_CONFIG["num_hidden_layers"])


# ---- work per graph ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 16), (3, 24)])
def test_exported_tiny_work_equals_its_config(exported_tiny, shape):
    w = graph_work(exported_tiny.onnx_path, *shape)
    assert w.uncounted_ops == []
    assert w.int8_macs == 0
    assert w.total_macs == config_macs(**TINY, batch=shape[0], seq=shape[1])
    assert set(w.by_op) == {"MatMul", "Gemm"}  # encoder MatMuls; pooler and classifier are Gemm


def test_fused_tiny_counts_attention_projections_and_products(fused_tiny):
    w = graph_work(fused_tiny.fused_path, 2, 16)
    assert w.uncounted_ops == []
    assert "Attention" in w.by_op
    assert w.total_macs == config_macs(**TINY, batch=2, seq=16)
    h = TINY["hidden"]
    # per Attention node: QKV projection (3 h^2 per token) plus QK^T and AV (2 s h per token)
    assert w.by_op["Attention"]["fp32"] == TINY["layers"] * 2 * 16 * (3 * h * h + 2 * 16 * h)


def test_dynamic_int8_graph_splits_the_same_total(quant_tiny_dynamic, fused_tiny, exported_tiny):
    w = graph_work(quant_tiny_dynamic.quantized_path, 2, 16)
    fp32 = graph_work(exported_tiny.onnx_path, 2, 16)
    assert w.uncounted_ops == []
    assert w.total_macs == fp32.total_macs
    assert w.int8_macs > 0 and w.fp32_macs >= 0
    assert w.int8_macs > w.fp32_macs


def test_static_qdq_graph_counts_as_int8(quant_tiny_static, exported_tiny):
    w = graph_work(quant_tiny_static.quantized_path, 1, 16)
    assert w.total_macs == graph_work(exported_tiny.onnx_path, 1, 16).total_macs
    assert w.int8_macs > 0 and w.static_int8_macs == w.int8_macs
    assert any(op.endswith("(QDQ)") for op in w.by_op)


def test_fused_dynamic_int8_graph_with_qattention(tmp_path, fused_tiny):
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    out = tmp_path / "dyn.onnx"
    quantize_dynamic(str(fused_tiny.fused_path), str(out), extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    w = graph_work(out, 2, 16)
    assert w.uncounted_ops == []
    assert "QAttention" in w.by_op
    assert w.by_op["QAttention"]["int8"] > 0 and w.by_op["QAttention"]["fp32"] > 0  # products run in FP32
    assert w.total_macs == config_macs(**TINY, batch=2, seq=16)
    assert not list(tmp_path.parent.glob("sym_shape_infer_temp.onnx"))


def test_contrib_matmuls_are_counted_by_precision():
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = 8, 16, 12
    inits = [numpy_helper.from_array(np.zeros((k, n), np.float32), "w"),
             numpy_helper.from_array(np.zeros((k, n), np.int8), "wq"),
             numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.zeros((n, k), np.float32), "wt"),
             numpy_helper.from_array(np.zeros((n, 1, k // 2), np.uint8), "w4"),  # 4-bit, one block of 16
             numpy_helper.from_array(np.ones((n,), np.float32), "s4")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("DynamicQuantizeMatMul", ["x", "wq", "s", "z"], ["b"], domain="com.microsoft"),
             helper.make_node("FusedMatMul", ["x", "wt"], ["c"], domain="com.microsoft", transB=1, alpha=1.0),
             helper.make_node("MatMulNBits", ["x", "w4", "s4"], ["d"], domain="com.microsoft", K=k, N=n, bits=4,
                              block_size=16),
             helper.make_node("MatMulNBits", ["x", "w4", "s4"], ["e"], domain="com.microsoft", K=k, N=n, bits=4,
                              block_size=16, accuracy_level=4)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", k])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "abcde"], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    w = graph_work(model, 2, m // 2)
    assert w.by_op["MatMul"] == {"fp32": m * k * n, "int8": 0}
    assert w.by_op["DynamicQuantizeMatMul"] == {"fp32": 0, "int8": m * k * n}
    assert w.by_op["FusedMatMul"] == {"fp32": m * k * n, "int8": 0}
    # weight-only 4-bit: FP32 compute (weights dequantized) unless accuracy_level=4 (INT8 compute)
    assert w.by_op["MatMulNBits"] == {"fp32": m * k * n, "int8": m * k * n}
    assert (w.fp32_macs, w.int8_macs) == (3 * m * k * n, 2 * m * k * n)


def test_graph_work_bad_input(tmp_path, exported_tiny):
    with pytest.raises(WorkError, match="no ONNX graph"):
        graph_work(tmp_path / "missing.onnx", 1, 16)
    with pytest.raises(WorkError, match="seq must be a positive"):
        graph_work(exported_tiny.onnx_path, 1, 0)


@pytest.mark.slow
def test_minilm_work_equals_its_config(exported_minilm, tmp_path):
    """MiniLM-L6 (hidden 384, intermediate 1536, 6 layers, 12 heads) at 1x128: 1.435 G
    multiply-adds, counted from the exported, fused and dynamic-INT8 graphs alike."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    from workbench.graph import FusionConfig, run_fusion

    expected = config_macs(384, 1536, 6, 1, 128)
    assert abs(expected - 1.435e9) < 1e6
    exported = graph_work(exported_minilm.onnx_path, 1, 128)
    assert exported.total_macs == expected
    fused = run_fusion(exported_minilm, FusionConfig.quick(), tmp_path / "fused")
    assert graph_work(fused.fused_path, 1, 128).total_macs == expected
    dyn = tmp_path / "dyn.onnx"
    quantize_dynamic(str(fused.fused_path), str(dyn), extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    w = graph_work(dyn, 1, 128)
    assert w.total_macs == expected and w.int8_macs > 0.9 * expected - 2 * 6 * 128 * 128 * 384


# ---- the floor --------------------------------------------------------------------------------
def test_floor_arithmetic_on_given_profiles():
    w = GraphWork(batch=1, seq=128, fp32_macs=1_000_000_000, int8_macs=500_000_000, by_op={})
    f = floor_for(w, profile(fp32=100.0, int8=250.0))
    # 2 GFLOP at 100 GFLOP/s = 20 ms; 1 GOP at 250 GOP/s = 4 ms
    assert f.floor_ms == pytest.approx(24.0)
    assert (f.fp32_macs, f.int8_macs) == (w.fp32_macs, w.int8_macs)
    assert f.profile_key == profile().key
    vnni = floor_for(w, profile(fp32=100.0, int8=1000.0))
    assert vnni.floor_ms == pytest.approx(21.0)
    # static QDQ INT8 work runs at the QDQ kernel's throughput where it was measured
    s = GraphWork(batch=1, seq=128, fp32_macs=0, int8_macs=500_000_000, by_op={}, static_int8_macs=500_000_000)
    assert floor_for(s, profile(int8=250.0, qdq=500.0)).floor_ms == pytest.approx(2.0)
    assert floor_for(s, profile(int8=250.0, qdq=None)).floor_ms == pytest.approx(4.0)


def test_the_floor_takes_the_throughput_at_the_shapes_own_row_count():
    """A kernel measured at half speed on 16 rows: the floor of a 1 x 16 graph uses that figure (no
    graph runs a matrix multiply faster than the kernel alone at its size); peak_floor_ms the best."""
    p = profile(fp32=100.0, int8=400.0, by_tokens={"fp32": {"16": 50.0, "128": 80.0, "1024": 100.0},
                                                   "int8": {"16": 100.0, "1024": 400.0}})
    assert p.gops_at("fp32", 16) == 50.0 and p.gops_at("fp32", 4) == 50.0  # below the fewest rows: that figure
    assert p.gops_at("fp32", 128) == 80.0 and p.gops_at("fp32", 4096) == 100.0
    # between two measured row counts: linear in log(rows); 128 rows lie half way from 16 to 1024
    assert p.gops_at("int8", 128) == pytest.approx(250.0)
    assert p.gops_at("qdq_int8", 128) is None  # not measured anywhere
    assert profile(fp32=100.0).gops_at("fp32", 16) == 100.0  # no per-row figures: the best one
    with pytest.raises(machine.MachineError, match="kernel must be one of"):
        p.gops_at("int4", 16)
    with pytest.raises(machine.MachineError, match="rows must be"):
        p.gops_at("fp32", 0)
    w = GraphWork(batch=1, seq=16, fp32_macs=1_000_000_000, int8_macs=1_000_000_000, by_op={})
    f = floor_for(w, p)
    # 2 GFLOP at 50 GFLOP/s = 40 ms; 2 GOP at 100 GOP/s = 20 ms; at the best figures 20 + 5 ms
    assert f.floor_ms == pytest.approx(60.0) and f.peak_floor_ms == pytest.approx(25.0)
    big = floor_for(GraphWork(batch=8, seq=128, fp32_macs=1_000_000_000, int8_macs=0, by_op={}), p)
    assert big.floor_ms == pytest.approx(20.0) == pytest.approx(big.peak_floor_ms)


def test_shape_latency_carries_its_floor():
    from workbench.core.latency import summarize
    from workbench.runtime.ortinfer import ShapeLatency

    s = ShapeLatency(1, 128, summarize([10.0, 12.0, 11.0]), floor_ms=8.8)
    assert s.of_floor == pytest.approx(0.8)
    assert ShapeLatency(1, 128, summarize([10.0])).of_floor is None


def test_isa_text_and_key():
    p = profile()
    assert p.isa_text() == "AVX2 + FMA; no AVX-512, no VNNI, no AMX, no bf16"
    v = profile(flags={k: False for k in machine.FLAG_KEYS} | {"avx2": True, "avx512f": True, "avx512_vnni": True})
    assert "AVX-512 VNNI" in v.isa_text() and "no VNNI" not in v.isa_text()
    assert p.key != profile(threads=1).key and p.key != v.key
    assert p.int8_over_fp32 == pytest.approx(2.0)


# ---- interleaving and paired ratios -----------------------------------------------------------
def test_interleaved_rotates_the_order_and_pairs_rounds():
    order = []
    calls = {"a": 0, "b": 0, "c": 0}

    def fn(name):
        def run():
            calls[name] += 1
        return run

    stats = interleaved({n: fn(n) for n in "abc"}, rounds=4, repeats=2, warmup=1, order=order)
    rounds = [order[i:i + 6] for i in range(0, len(order), 6)]
    assert rounds == [list("aabbcc"), list("bbccaa"), list("ccaabb"), list("aabbcc")]
    assert calls == {"a": 9, "b": 9, "c": 9}  # 1 warm-up + 4 rounds x 2 repeats
    assert all(len(s.samples_ms) == 4 and s.repeats == 4 for s in stats.values())


def test_interleaved_pairs_load_that_hits_a_round(monkeypatch):
    """A slow round slows every variant in it, and sample i of each comes from round i: the
    per-round ratios stay exact although the third round took ten times as long (fake clock)."""
    import workbench.core.latency as lat

    clock = {"t": 0.0, "calls": 0}
    monkeypatch.setattr(lat.time, "perf_counter", lambda: clock["t"])

    def make(cost_ms):
        def run():
            rnd = clock["calls"] // 2  # two variants, one repeat, no warm-up: two calls a round
            clock["calls"] += 1
            clock["t"] += cost_ms * (10 if rnd == 2 else 1) / 1000.0
        return run

    stats = interleaved({"a": make(1.0), "b": make(2.0)}, rounds=4, repeats=1, warmup=0)
    assert stats["a"].samples_ms == pytest.approx([1.0, 1.0, 10.0, 1.0])
    assert stats["b"].samples_ms == pytest.approx([2.0, 2.0, 20.0, 2.0])
    r = paired_ratio(stats["b"].samples_ms, stats["a"].samples_ms)
    assert (r.value, r.lo, r.hi) == pytest.approx((2.0, 2.0, 2.0))


def test_paired_ratio_on_synthetic_samples():
    rng = np.random.default_rng(1)
    load = rng.uniform(1.0, 2.0, 30)  # per-round load that hits both sides alike
    base = 20.0 * load * rng.normal(1.0, 0.02, 30)
    fast = 10.0 * load * rng.normal(1.0, 0.02, 30)
    r = paired_ratio(base, fast)
    assert isinstance(r, Ratio) and r.rounds == 30
    assert r.lo <= 2.0 <= r.hi and r.lo < r.value < r.hi
    assert r.is_gain and not r.is_loss
    assert r.text().startswith(f"{r.value:.2f}x (")
    same = paired_ratio(base, 20.0 * load * rng.normal(1.0, 0.05, 30))
    assert same.lo <= 1.0 <= same.hi
    assert not same.is_gain
    slower = paired_ratio(fast, base)
    assert slower.is_loss and not slower.is_gain
    with pytest.raises(ValueError, match="equally long"):
        paired_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        paired_ratio([1.0, 0.0], [1.0, 1.0])


def test_time_side_by_side_times_graphs_and_models_in_paired_rounds(exported_tiny, fused_tiny, tiny):
    """The one interleaved timer (its twin ortinfer.interleaved_latency was merged into it):
    ONNX Runtime graphs and a PyTorch model in the same rounds, shape by shape; each Speed's ratio is
    paired_ratio over exactly those rounds; every graph's floor counted from its work."""
    from workbench.perf.speed import time_side_by_side

    run = time_side_by_side({"exported": exported_tiny.onnx_path, "fused": fused_tiny.fused_path}, "exported",
                            shapes=[(1, 16), (2, 16)], rounds=3, repeats=1, warmup=1, threads=1,
                            torch_models={"eager": tiny}, vocab_size=tiny.tokenizer.vocab_size, load_check=False)
    assert set(run.latency) == {"exported", "fused", "eager"} and run.load is None
    for rows in run.latency.values():
        assert [(r.batch, r.seq) for r in rows] == [(1, 16), (2, 16)]
        assert all(len(r.stats.samples_ms) == 3 and all(math.isfinite(x) and x > 0 for x in r.stats.samples_ms)
                   for r in rows)
    assert all(r.floor_ms > 0 for n in ("exported", "fused") for r in run.latency[n])
    assert all(r.floor_ms is None for r in run.latency["eager"])  # a PyTorch model has no graph to count
    assert {(s.name, s.batch) for s in run.speeds} == {("fused", 1), ("fused", 2), ("eager", 1), ("eager", 2)}
    for s in run.speeds:
        base = next(r for r in run.latency["exported"] if r.batch == s.batch)
        var = next(r for r in run.latency[s.name] if r.batch == s.batch)
        assert s.ratio == paired_ratio(base.stats.samples_ms, var.stats.samples_ms) and s.ratio.rounds == 3
    with pytest.raises(ValueError, match="variant names must be unique"):
        time_side_by_side({"eager": exported_tiny.onnx_path}, "eager", torch_models={"eager": tiny}, load_check=False)
    with pytest.raises(ValueError, match="base 'nope' is not one of the variants"):
        time_side_by_side({"a": exported_tiny.onnx_path}, "nope", load_check=False)


# ---- the machine profile ----------------------------------------------------------------------
def test_profile_cache_and_refresh(tmp_path, monkeypatch):
    calls = []

    def fake(threads=None, repeats=7, tokens=machine.PROFILE_TOKENS):
        calls.append(threads)
        model, flags = machine.cpu_model_and_flags()
        import onnxruntime as ort
        return dataclasses.replace(profile(fp32=100.0 + len(calls), threads=threads), cpu_model=model, flags=flags,
                                   ort_version=ort.__version__)

    monkeypatch.setattr(machine, "measure_profile", fake)
    p1 = machine_profile(threads=1, cache_dir=tmp_path)
    p2 = machine_profile(threads=1, cache_dir=tmp_path)
    assert calls == [1] and p2 == p1
    files = list(tmp_path.glob("*.json"))
    assert [f.stem for f in files] == [p1.key]
    data = json.loads(files[0].read_text())
    assert data["fp32_gops"] == 101.0 and data["version"] == machine.PROFILE_VERSION
    machine_profile(threads=2, cache_dir=tmp_path)  # another thread count: its own entry
    assert calls == [1, 2] and len(list(tmp_path.glob("*.json"))) == 2
    p3 = machine_profile(threads=1, refresh=True, cache_dir=tmp_path)
    assert calls == [1, 2, 1] and p3.fp32_gops == 103.0
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 103.0
    files[0].write_text("{not json")  # a broken cache entry is measured again, not an error
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 104.0
    with pytest.raises(machine.MachineError, match="threads must be a positive whole number, got 0"):
        machine_profile(threads=0, cache_dir=tmp_path)


def test_profile_measured_under_load_is_not_cached(tmp_path, monkeypatch):
    """A profile measured while other work ran is used but not written: the next call measures again."""
    import onnxruntime as ort

    model, flags = machine.cpu_model_and_flags()
    queue = [(50.0, True), (120.0, False), (10.0, True)]

    def fake(threads=None, repeats=7, tokens=machine.PROFILE_TOKENS):
        fp32, busy = queue.pop(0)
        return dataclasses.replace(profile(fp32=fp32, threads=threads), cpu_model=model, flags=flags,
                                   ort_version=ort.__version__, measured_under_load=busy)

    monkeypatch.setattr(machine, "measure_profile", fake)
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 50.0  # busy: used, not cached
    assert not list(tmp_path.glob("*.json"))
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 120.0  # measured again: quiet, cached
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 120.0  # from the cache
    assert queue == [(10.0, True)]


def test_profile_really_measured(tmp_path):
    p = machine.measure_profile(threads=1, repeats=1, tokens=(32,))
    for v in (p.fp32_gops, p.int8_gops, p.qdq_int8_gops):
        assert v is not None and math.isfinite(v) and v > 0
    assert p.threads == 1 and p.cores >= 1 and p.ort_version
    assert set(p.flags) == set(machine.FLAG_KEYS)
    assert p.shapes == [[32, k, n] for k, n in machine.LAYER_GEMMS]
    assert set(p.by_tokens) == {"fp32", "int8", "qdq_int8"}
    from workbench.core import serial
    data = serial.to_dict(p)
    for key in ("cpu_model", "flags", "cores", "threads", "ort_version", "fp32_gops", "int8_gops", "qdq_int8_gops",
                "measured_at", "shapes"):
        assert key in data
    json.dumps(data, allow_nan=False)


# ---- the busy-machine check -------------------------------------------------------------------
def test_judge_load_rules():
    p = profile(fp32=100.0, threads=2)
    quiet = judge_load(p, probe=98.0, loadavg_1m=1.2, others_running=0, cpus=2)
    assert not quiet.contended and quiet.reasons == [] and quiet.probe_fraction == pytest.approx(0.98)
    slow = judge_load(p, probe=70.0, loadavg_1m=1.2, others_running=0, cpus=2)
    assert slow.contended and "70%" in slow.reasons[0]
    # slow with nobody else runnable here: the CPUs themselves ran slower (a VM's neighbour, the clock)
    assert "no other process was runnable" in slow.reasons[0]
    crowded = judge_load(p, probe=70.0, loadavg_1m=1.2, others_running=1, cpus=2)
    assert "other work is taking the CPUs" in crowded.reasons[0] and "no other process" not in crowded.reasons[0]
    # slow while the hypervisor ran someone else: said so, with the share
    stolen = judge_load(p, probe=51.0, loadavg_1m=1.0, others_running=0, cpus=2, steal_fraction=0.3)
    assert stolen.contended and "30% of this machine's CPU time" in stolen.reasons[0] and "steal" in stolen.reasons[0]
    assert combine_checks(quiet, stolen).steal_fraction == pytest.approx(0.3)
    # steal without a slow probe is recorded, not a reason
    assert not judge_load(p, probe=98.0, loadavg_1m=1.0, others_running=0, cpus=2, steal_fraction=0.3).contended
    busy = judge_load(p, probe=None, loadavg_1m=0.5, others_running=1, cpus=2)
    assert busy.contended and "1 other runnable" in busy.reasons[0]
    # a high load average alone is our own recent work (the demo's fine-tuning): recorded, not a reason
    loaded = judge_load(p, probe=None, loadavg_1m=3.1, others_running=0, cpus=2)
    assert not loaded.contended and loaded.loadavg_1m == 3.1
    both = combine_checks(quiet, slow)
    assert both.contended and both.reasons[0].startswith("after: ") and both.probe_fraction == pytest.approx(0.7)
    assert not combine_checks(quiet, quiet).contended


def test_cpu_times_and_steal_from_psutil(monkeypatch):
    import collections
    import os

    import psutil

    # psutil's tuple on Linux; guest and guest_nice are in user and nice already, so the total leaves them out
    linux = collections.namedtuple("scputimes", "user nice system idle iowait irq softirq steal guest guest_nice")
    monkeypatch.setattr(psutil, "cpu_times", lambda: linux(1.0, 0.0, 0.5, 8.0, 0.1, 0.0, 0.05, 0.2, 0.3, 0.1))
    assert machine.cpu_times() == pytest.approx((0.2, 9.85))
    assert machine.steal_between((0.2, 9.85), (0.5, 10.85)) == pytest.approx(0.3)
    assert machine.steal_between(None, (0.5, 10.85)) is None and machine.steal_between((0.2, 9.85), (0.2, 9.85)) is None
    no_steal = collections.namedtuple("scputimes", "user nice system idle")  # what psutil gives off Linux
    monkeypatch.setattr(psutil, "cpu_times", lambda: no_steal(1.0, 0.0, 0.5, 8.0))
    assert machine.cpu_times() is None
    monkeypatch.setattr(psutil, "cpu_times", lambda: (_ for _ in ()).throw(FileNotFoundError("/proc/stat")))
    assert machine.cpu_times() is None
    monkeypatch.undo()
    real = machine.cpu_times()  # this machine's: the same figures as /proc/stat's cpu line (user .. steal), in seconds
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:9]]
    hz, cpus = os.sysconf("SC_CLK_TCK"), os.cpu_count()
    assert real is not None and 0 <= real[0] <= real[1]
    # read a moment later: at most that moment's time on every CPU more
    assert -1e-6 <= fields[7] / hz - real[0] < cpus and -1e-6 <= sum(fields) / hz - real[1] < cpus


SPIN = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"


def test_contention_flag_with_spinning_processes():
    """Keep every CPU busy with spinning processes: the check must say so, with a reason. The quiet
    side is judged against a profile taken from the probe itself just before (the machine is
    shared, so an absolute "quiet" cannot be asserted)."""
    cpus = machine.usable_cpus()
    base = machine.probe_gops(threads=cpus)
    ref = profile(fp32=base, threads=cpus)
    quiet = judge_load(ref, probe=base, loadavg_1m=0.0, others_running=0, cpus=cpus)
    assert not quiet.contended
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(cpus)]
    try:
        time.sleep(0.3)
        busy = check_load(ref)
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()
    assert isinstance(busy, LoadCheck)
    assert busy.contended and busy.reasons
    assert busy.others_running is not None and busy.others_running >= cpus
    assert busy.probe_fp32_gops is not None and busy.probe_fp32_gops > 0


# ---- where the time goes ----------------------------------------------------------------------
def test_profile_ops_names_the_ops_and_shares_sum_to_one(fused_tiny):
    from workbench.runtime.ortinfer import profile_ops

    rows = profile_ops(fused_tiny.fused_path, batch=1, seq=16, threads=1, runs=3, warmup=1)
    ops = {r.op_type for r in rows}
    assert {"Attention", "MatMul", "SkipLayerNormalization"} <= ops
    assert sum(share for _, _, share in rows) == pytest.approx(1.0)
    assert all(ms >= 0 and 0 <= share <= 1 for _, ms, share in rows)
    assert [r.ms for r in rows] == sorted((r.ms for r in rows), reverse=True)


# ---- the CLI ----------------------------------------------------------------------------------
def _cli(*args, env_home=None):
    import os
    env = {**os.environ}
    if env_home is not None:
        env["WORKBENCH_HOME"] = str(env_home)
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("value", ["0", "abc", "-2"])
def test_machine_cli_bad_threads_is_one_line_exit_2(value):
    proc = _cli("machine", f"--threads={value}")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--threads must be a positive whole number" in lines[0] and value in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # a long run for make test-fast: 11 s on 2 cores
def test_machine_cli_json_from_the_cache(tmp_path):
    home = tmp_path / "home"
    cached = dataclasses.replace(profile(fp32=111.0, int8=222.0, threads=1), cpu_model=machine.cpu_model_and_flags()[0],
                                 flags=machine.cpu_model_and_flags()[1])
    import onnxruntime as ort

    from workbench.core import serial
    cached = dataclasses.replace(cached, ort_version=ort.__version__)
    (home / "machine").mkdir(parents=True)
    (home / "machine" / f"{cached.key}.json").write_text(
        json.dumps({**serial.to_dict(cached), "key": cached.key, "version": machine.PROFILE_VERSION}))
    proc = _cli("machine", "--json", "--threads", "1", env_home=home)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["fp32_gops"] == 111.0 and data["int8_gops"] == 222.0  # read from the cache, not measured
    assert data["int8_over_fp32"] == 2.0 and "isa" in data
    assert isinstance(data["contended"], bool) and data["load"]["contended"] == data["contended"]
    text = _cli("machine", "--threads", "1", env_home=home)
    assert text.returncode == 0 and "FP32 MatMul 111 GFLOP/s" in text.stdout
    # every CPU kept busy: the output says the machine is contended (exit code unchanged)
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(machine.usable_cpus())]
    try:
        time.sleep(0.3)
        busy = _cli("machine", "--threads", "1", env_home=home)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert busy.returncode == 0 and "CONTENDED" in busy.stderr and "other runnable" in busy.stderr


def test_runnable_others_leaves_out_this_process_own_threads(tmp_path):
    """The busy-machine check counts other processes' runnable threads, not this process's own: an
    ONNX Runtime session that just ran keeps a worker spinning for a moment, and that once made a
    quiet audit report 'another process competes for the cores' (read from files shaped like /proc)."""
    from workbench.perf.machine_profile import runnable_others

    loadavg = tmp_path / "loadavg"
    tasks = tmp_path / "task"
    for tid, state in ((101, "R"), (102, "R"), (103, "S")):  # this reader and a spinning worker of ours, one asleep
        (tasks / str(tid)).mkdir(parents=True)
        (tasks / str(tid) / "stat").write_text(f"{tid} (python (x)) {state} 1 2 3\n")
    loadavg.write_text("1.50 1.20 1.00 2/300 4242\n")  # 2 running: both ours
    assert runnable_others(samples=2, gap_s=0, loadavg=loadavg, tasks=tasks) == 0
    loadavg.write_text("1.50 1.20 1.00 3/300 4242\n")  # one more, someone else's
    assert runnable_others(samples=2, gap_s=0, loadavg=loadavg, tasks=tasks) == 1
    (tasks / "102" / "stat").write_text("102 (python) S 1 2 3\n")  # our worker asleep: 3 running, 1 ours
    assert runnable_others(samples=2, gap_s=0, loadavg=loadavg, tasks=tasks) == 2


def test_another_process_spinning_is_counted():
    import subprocess
    import sys
    import time

    from workbench.perf.machine_profile import runnable_others

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert runnable_others() >= 1
    finally:
        spinner.kill()
        spinner.wait()
