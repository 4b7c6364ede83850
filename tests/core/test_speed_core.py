"""Issue 22's core: work per graph (multiply-adds from the ONNX graph), the floor arithmetic, the
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

from workbench import machine
from workbench.latency import Ratio, interleaved, paired_ratio
from workbench.machine import LoadCheck, MachineProfile, check_load, combine_checks, machine_profile
from workbench.models import TINY_CONFIG
from workbench.work import GraphWork, WorkError, floor_for, graph_work, is_qdq, of_floor


def profile(fp32=100.0, int8=200.0, qdq=None, threads=2, **kw) -> MachineProfile:
    base = dict(cpu_model="Test CPU", flags={k: False for k in machine.FLAG_NAMES} | {"avx2": True}, cores=2,
                threads=threads, ort_version="1.19.2", fp32_gops=fp32, int8_gops=int8, qdq_int8_gops=qdq,
                measured_at="2026-01-01T00:00:00+00:00", shapes=[[128, 384, 384]])
    base.update(kw)
    p = MachineProfile(**base)
    return dataclasses.replace(p, key=machine.profile_key(p.cpu_model, p.flags, p.threads, p.ort_version))


def config_macs(hidden: int, intermediate: int, layers: int, batch: int, seq: int, num_labels: int = 2) -> int:
    """Multiply-adds of a BERT classifier from its config: per layer the Q, K, V, O projections, the
    FFN, QK^T and AV; the pooler (first token) and the classifier."""
    tokens = batch * seq
    per_layer = tokens * (4 * hidden * hidden + 2 * hidden * intermediate) + 2 * batch * seq * seq * hidden
    return layers * per_layer + batch * hidden * hidden + batch * hidden * num_labels


TINY = dict(hidden=TINY_CONFIG["hidden_size"], intermediate=TINY_CONFIG["intermediate_size"],
            layers=TINY_CONFIG["num_hidden_layers"])


# ---- work per graph ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 16), (3, 24)])
def test_exported_tiny_work_equals_its_config(exported_tiny, shape):
    w = graph_work(exported_tiny.onnx_path, *shape)
    assert w.int8_macs == 0
    assert w.total_macs == config_macs(**TINY, batch=shape[0], seq=shape[1])
    assert set(w.by_op) == {"MatMul", "Gemm"}  # encoder MatMuls; pooler and classifier are Gemm


def test_fused_tiny_counts_attention_projections_and_products(fused_tiny):
    w = graph_work(fused_tiny.fused_path, 2, 16)
    assert "Attention" in w.by_op
    assert w.total_macs == config_macs(**TINY, batch=2, seq=16)
    h = TINY["hidden"]
    # per Attention node: QKV projection (3 h^2 per token) plus QK^T and AV (2 s h per token)
    assert w.by_op["Attention"]["fp32"] == TINY["layers"] * 2 * 16 * (3 * h * h + 2 * 16 * h)


def test_dynamic_int8_graph_splits_the_same_total(quant_tiny_dynamic, fused_tiny, exported_tiny):
    w = graph_work(quant_tiny_dynamic.quantized_path, 2, 16)
    fp32 = graph_work(exported_tiny.onnx_path, 2, 16)
    assert w.total_macs == fp32.total_macs
    assert w.int8_macs > 0 and w.fp32_macs >= 0
    assert w.int8_macs > w.fp32_macs


def test_static_qdq_graph_counts_as_int8(quant_tiny_static, exported_tiny):
    w = graph_work(quant_tiny_static.quantized_path, 1, 16)
    assert w.total_macs == graph_work(exported_tiny.onnx_path, 1, 16).total_macs
    assert w.by_op["MatMul"]["int8"] > 0  # MatMul between two DequantizeLinear: run as QLinearMatMul
    assert is_qdq(quant_tiny_static.quantized_path) and not is_qdq(exported_tiny.onnx_path)


def test_fused_dynamic_int8_graph_with_qattention(tmp_path, fused_tiny):
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    out = tmp_path / "dyn.onnx"
    quantize_dynamic(str(fused_tiny.fused_path), str(out), extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    w = graph_work(out, 2, 16)
    assert "QAttention" in w.by_op
    assert w.by_op["QAttention"]["int8"] > 0 and w.by_op["QAttention"]["fp32"] > 0  # products run in FP32
    assert w.total_macs == config_macs(**TINY, batch=2, seq=16)
    assert not list(tmp_path.parent.glob("sym_shape_infer_temp.onnx"))


def test_contrib_matmuls_are_counted_by_precision():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = 8, 16, 12
    inits = [numpy_helper.from_array(np.zeros((k, n), np.float32), "w"),
             numpy_helper.from_array(np.zeros((k, n), np.int8), "wq"),
             numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.zeros((n, k), np.float32), "wt"),
             numpy_helper.from_array(np.zeros((n, 1, k // 2), np.uint8), "w4"),  # 4-bit, one block of 16
             numpy_helper.from_array(np.ones((n,), np.float32), "s4"),
             numpy_helper.from_array(np.zeros((1000, k), np.float32), "emb")]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["x"]),  # the graph takes token ids, as a BERT does
             helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("DynamicQuantizeMatMul", ["x", "wq", "s", "z"], ["b"], domain="com.microsoft"),
             helper.make_node("FusedMatMul", ["x", "wt"], ["c"], domain="com.microsoft", transB=1, alpha=1.0),
             helper.make_node("MatMulNBits", ["x", "w4", "s4"], ["d"], domain="com.microsoft", K=k, N=n, bits=4,
                              block_size=16),
             helper.make_node("MatMulNBits", ["x", "w4", "s4"], ["e"], domain="com.microsoft", K=k, N=n, bits=4,
                              block_size=16, accuracy_level=4)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "abcde"], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    w = graph_work(model, 2, m // 2)
    assert w.by_op["MatMul"] == {"fp32": m * k * n, "int8": 0}
    assert w.by_op["DynamicQuantizeMatMul"] == {"fp32": 0, "int8": m * k * n}
    assert w.by_op["FusedMatMul"] == {"fp32": m * k * n, "int8": 0}
    # weight-only 4-bit: FP32 compute (weights dequantized) unless accuracy_level=4 (INT8 compute)
    assert w.by_op["MatMulNBits"] == {"fp32": m * k * n, "int8": m * k * n}
    assert (w.fp32_macs, w.int8_macs) == (3 * m * k * n, 2 * m * k * n)


def test_graph_work_bad_input(tmp_path, exported_tiny):
    with pytest.raises(WorkError):
        graph_work(tmp_path / "missing.onnx", 1, 16)
    with pytest.raises(WorkError, match="at least 1"):
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
    assert (f.fp32_macs, f.int8_macs, f.tokens) == (w.fp32_macs, w.int8_macs, 128)
    assert f.profile_key == profile().key
    vnni = floor_for(w, profile(fp32=100.0, int8=1000.0))
    assert vnni.floor_ms == pytest.approx(21.0)
    # static QDQ INT8 work runs at the QLinearMatMul throughput
    s = GraphWork(batch=1, seq=128, fp32_macs=0, int8_macs=500_000_000, by_op={})
    assert floor_for(s, profile(int8=250.0, qdq=500.0), qdq=True).floor_ms == pytest.approx(2.0)
    assert floor_for(s, profile(int8=250.0, qdq=500.0)).floor_ms == pytest.approx(4.0)
    # the throughput at the graph's token count, from the profile's table
    p = dataclasses.replace(profile(fp32=100.0), by_tokens={"fp32": {"128": 100.0, "1024": 50.0}})
    big = GraphWork(batch=8, seq=128, fp32_macs=1_000_000_000, int8_macs=0, by_op={})
    assert floor_for(big, p).floor_ms == pytest.approx(40.0)
    assert of_floor(30.0, 24.0) == pytest.approx(0.8)
    assert math.isnan(of_floor(0.0, 24.0))


def test_shape_latency_carries_its_floor():
    from workbench.latency import summarize
    from workbench.ortinfer import ShapeLatency

    s = ShapeLatency(1, 128, summarize([10.0, 12.0, 11.0]), floor_ms=8.8)
    assert s.of_floor == pytest.approx(0.8)
    assert ShapeLatency(1, 128, summarize([10.0])).of_floor is None


def test_isa_text_and_key():
    p = profile()
    assert p.isa_text() == "AVX2; no AVX-512, no VNNI, no AMX, no bf16"
    v = profile(flags={k: False for k in machine.FLAG_NAMES} | {"avx2": True, "avx512f": True, "avx512_vnni": True})
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

    runs = {}
    stats = interleaved({n: fn(n) for n in "abc"}, rounds=4, repeats=2, warmup=1, order=order, runs=runs)
    rounds = [order[i:i + 3] for i in range(0, len(order), 3)]
    assert rounds == [list("abc"), list("bca"), list("cab"), list("abc")]
    assert calls == {"a": 9, "b": 9, "c": 9}  # 1 warm-up + 4 rounds x 2 repeats
    assert all(len(s.samples_ms) == 4 and s.repeats == 4 for s in stats.values())
    assert {n: len(v) for n, v in runs.items()} == {"a": 8, "b": 8, "c": 8}  # every timed run, for quantiles


def test_interleaved_pairs_load_that_hits_a_round(monkeypatch):
    """A slow round slows every variant in it, and sample i of each comes from round i: the
    per-round ratios stay exact although the third round took ten times as long (fake clock)."""
    import workbench.latency as lat

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
    with pytest.raises(ValueError, match="must be positive"):
        paired_ratio([1.0, 0.0], [1.0, 1.0])


# ---- the machine profile ----------------------------------------------------------------------
def _fake_measure(calls, queue=None):
    import onnxruntime as ort

    model, flags = machine.cpu_facts()

    def fake(threads=None, seconds=0.25):
        calls.append(threads)
        fp32, other = queue.pop(0) if queue else (100.0 + len(calls), 0.0)
        p = dataclasses.replace(profile(fp32=fp32, threads=threads), cpu_model=model, flags=flags,
                                ort_version=ort.__version__, other_cpu=other)
        return dataclasses.replace(p, key=machine.profile_key(model, flags, threads, ort.__version__))
    return fake


def test_profile_cache_and_refresh(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(machine, "measure_profile", _fake_measure(calls))
    p1 = machine_profile(threads=1, cache_dir=tmp_path)
    p2 = machine_profile(threads=1, cache_dir=tmp_path)
    assert calls == [1] and p2 == p1
    files = list(tmp_path.glob("*.json"))
    assert [f.stem for f in files] == [p1.key]
    data = json.loads(files[0].read_text())
    assert data["fp32_gops"] == 101.0
    machine_profile(threads=2, cache_dir=tmp_path)  # another thread count: its own entry
    assert calls == [1, 2] and len(list(tmp_path.glob("*.json"))) == 2
    p3 = machine_profile(threads=1, refresh=True, cache_dir=tmp_path)
    assert calls == [1, 2, 1] and p3.fp32_gops == 103.0
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 103.0
    files[0].write_text("{not json")  # a broken cache entry is measured again, not an error
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 104.0
    with pytest.raises(machine.MachineError, match="threads"):
        machine_profile(threads=0, cache_dir=tmp_path)


def test_profile_measured_under_load_is_not_cached(tmp_path, monkeypatch):
    calls = []
    queue = [(50.0, 1.5), (120.0, 0.0), (10.0, 1.5)]
    monkeypatch.setattr(machine, "measure_profile", _fake_measure(calls, queue))
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 50.0  # busy: used, not cached
    assert not list(tmp_path.glob("*.json"))
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 120.0  # measured again: quiet, cached
    assert machine_profile(threads=1, cache_dir=tmp_path).fp32_gops == 120.0  # from the cache
    assert calls == [1, 1]


def test_profile_really_measured():
    p = machine.measure_profile(threads=1, seconds=0.01)
    for v in (p.fp32_gops, p.int8_gops, p.qdq_int8_gops):
        assert v is not None and math.isfinite(v) and v > 0
    assert p.threads == 1 and p.cores >= 1 and p.ort_version and p.key
    assert set(p.flags) == set(machine.FLAG_NAMES)
    assert set(p.by_tokens) == {"fp32", "int8", "qdq_int8"}
    from workbench import serial
    data = serial.to_dict(p)
    for key in ("cpu_model", "flags", "cores", "threads", "ort_version", "fp32_gops", "int8_gops", "qdq_int8_gops",
                "measured_at", "shapes"):
        assert key in data
    json.dumps(data, allow_nan=False)
    assert serial.from_dict(MachineProfile, data) == p


# ---- the busy-machine check -------------------------------------------------------------------
def _check(contended, reasons=(), fraction=None, other=0.0, load=0.5):
    return LoadCheck(contended=contended, reasons=list(reasons), loadavg_1m=load, probe_fp32_gops=None,
                     probe_fraction=fraction, other_cpu=other, at="2026-01-01T00:00:00+00:00")


def test_combine_checks():
    quiet, busy = _check(False, fraction=0.98), _check(True, ["probe low"], fraction=0.6, other=1.2, load=2.0)
    both = combine_checks(quiet, busy)
    assert both.contended and both.reasons == ["after timing: probe low"]
    assert both.probe_fraction == 0.6 and both.other_cpu == 1.2 and both.loadavg_1m == 2.0
    assert not combine_checks(quiet, quiet).contended
    assert combine_checks(None, None) is None


SPIN = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"


def _detached_spinners(n: int) -> list[int]:
    """``n`` processes spinning on a CPU each, started through a shell that exits at once, so they
    are not this process's children: other work, as another engineer's job would be."""
    out = subprocess.run(["sh", "-c", " ".join(f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!;' for _ in range(n)),
                          SPIN], capture_output=True, text=True, timeout=30)
    return [int(x) for x in out.stdout.split()]


def _stop(pids):
    import os
    import signal
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_contention_flag_with_spinning_processes():
    """Keep every CPU busy with spinning processes: the check must say so, with a reason. The
    reference is a probe taken just before (the machine is shared, so an absolute "quiet" cannot be
    asserted); the quiet side is the same probe judged against itself."""
    cpus = machine.available_cores()
    base = machine.measure_gops("fp32", 128, cpus, seconds=0.1)
    ref = dataclasses.replace(profile(fp32=base, threads=cpus), by_tokens={"fp32": {"128": base}}, cores=cpus)
    pids = _detached_spinners(cpus)
    try:
        time.sleep(0.3)
        busy = check_load(ref)
    finally:
        _stop(pids)
    assert isinstance(busy, LoadCheck)
    assert busy.contended and busy.reasons
    assert busy.other_cpu is not None and busy.other_cpu > machine.OTHER_CPU_LIMIT
    assert any("other processes used" in r for r in busy.reasons)
    assert busy.probe_fp32_gops is not None and busy.probe_fp32_gops > 0


# ---- where the time goes ----------------------------------------------------------------------
def test_profile_ops_names_the_ops_and_shares_sum_to_one(fused_tiny):
    from workbench.ortinfer import profile_ops

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
        env["ORT_WORKBENCH_HOME"] = str(env_home)
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("value", ["0", "abc", "-2"])
def test_machine_cli_bad_threads_is_one_line_exit_2(value):
    proc = _cli("machine", f"--threads={value}")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--threads must be a positive whole number" in lines[0] and value in lines[0]
    assert "Traceback" not in proc.stderr


def test_machine_cli_json_from_the_cache(tmp_path):
    import onnxruntime as ort

    from workbench import serial

    home = tmp_path / "home"
    model, flags = machine.cpu_facts()
    cached = dataclasses.replace(profile(fp32=111.0, int8=222.0, threads=1), cpu_model=model, flags=flags,
                                 ort_version=ort.__version__, by_tokens={"fp32": {"128": 111.0}})
    cached = dataclasses.replace(cached, key=machine.profile_key(model, flags, 1, ort.__version__))
    (home / "machine").mkdir(parents=True)
    (home / "machine" / f"{cached.key}.json").write_text(json.dumps(serial.to_dict(cached)))
    proc = _cli("machine", "--json", "--threads", "1", env_home=home)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["fp32_gops"] == 111.0 and data["int8_gops"] == 222.0  # read from the cache, not measured
    assert data["int8_over_fp32"] == 2.0 and "isa" in data
    assert isinstance(data["contended"], bool) and data["load"]["contended"] == data["contended"]
    text = _cli("machine", "--threads", "1", env_home=home)
    assert text.returncode == 0 and "128 tokens   111.0" in text.stdout and "CPU" in text.stdout
    # every CPU kept busy by other processes: the output says so (exit code unchanged)
    pids = _detached_spinners(machine.available_cores())
    try:
        time.sleep(0.3)
        busy = _cli("machine", "--threads", "1", env_home=home)
    finally:
        _stop(pids)
    assert busy.returncode == 0 and "contended" in busy.stderr and "other processes used" in busy.stderr
