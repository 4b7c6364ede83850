"""``make bench``: every inference variant a user could pick, and the training step, side by side
in **one process** on the same machine, with the machine recorded.

Inference (the fine-tuned MiniLM of the workshop/demo, or ``--model``): PyTorch eager FP32, SDPA,
bf16 (only where the CPU has bf16 instructions), torch.compile, PyTorch dynamic INT8; ONNX Runtime
exported FP32, fused FP32 (transformer optimizer) and each INT8 variant (dynamic per-tensor,
per-channel, reduce-range on the fused graph; static QDQ presets on the exported graph), at batch
1 and 32 for sequence 32 and 128. Every variant is timed with the workbench's own measuring code
(:func:`workbench.core.latency.measure`,
then :func:`workbench.core.latency.interleaved`): warm-up first, then ``--rounds`` rounds in which
every variant takes ``--repeats`` timed runs in a rotating order, so a burst of load from other
processes hits all variants alike. Medians, p10/p90 and the interquartile range of all timed runs;
every ratio against PyTorch eager FP32 of the same shape is paired round by round
(:func:`workbench.core.latency.paired_ratio`: the median of the per-round ratios with a bootstrap 95%
interval). Threads are explicit and equal: ``--threads`` for PyTorch (``torch.set_num_threads``)
and ONNX Runtime (``intra_op_num_threads``). A busy-machine check (:func:`workbench.perf.machine_profile.check_load`)
runs before and after the timing; a contended run is flagged in the table header and the JSON.

Accuracy of the ONNX Runtime INT8 variants: scored by :func:`workbench.quant.run_quantization`
on the held-out test split (and golden set) against their FP32 graph, slice by slice; the budget
check is the benchmark's (0.5 points overall, 2 points per slice of >= 50 examples).

The floor (:mod:`workbench.perf.machine_profile`, :mod:`workbench.perf.work`): each graph's multiply-adds at each
shape, counted from the graph (FP32 and INT8 apart), over this machine's profile (FP32 and INT8
matrix-multiply throughput measured through ONNX Runtime, same threads): the fastest that graph
could run here, and each variant's ``of_floor`` (floor / measured). Each kernel's throughput is taken
at the shape's own row count (batch x seq; kernels run slower on few rows), and the floor at each
kernel's best figure is printed beside it (``peak_floor_ms``). PyTorch rows are held to the
floor of the exported FP32 graph (torch dynamic INT8: the dynamic INT8 graph's). Where the best
variant of a shape is below 90% of its floor, ONNX Runtime's profiler says which ops take the time.

Training (small section; the settings come from :mod:`workbench.train`: ``ortmodule`` is ORTModule
with its own defaults, ``ORTMODULE_OWN_DEFAULTS``, and ``ort-opset14-fused-no-spin`` the tuned set
``TrainConfig`` defaults to, ``TUNED_DEFAULTS``, so changing them there changes these rows): eager,
torch.compile, ORTModule defaults and ORTModule tuned, stepped in rotation (:func:`bench_train.interleaved`).

Prints the tables and writes JSON (``--out``). ``--quick`` runs every row on the tiny model with
few repeats (what the test runs). Nothing here asserts a timing.

    .venv/bin/python benchmarks/bench.py --out runs/bench/bench.json
    .venv/bin/python benchmarks/bench.py --quick --out /tmp/bench.json
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
# OpenMP threads that sleep when idle, like ONNX Runtime's with spinning off: on a shared machine,
# spin-waiting OpenMP threads that lose their core turn a 0.4 ms forward pass into hundreds of ms
# (measured here), which would flatter every ONNX Runtime row. Set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from workbench.core.options import shapes_arg  # noqa: E402
from workbench.quant import DEFAULT_BUDGET_PER_SLICE  # noqa: E402

SCHEMA_VERSION = 2  # 2: paired ratios with intervals, floors from the machine profile, the load check
FULL_SHAPES = ((1, 32), (1, 128), (32, 32), (32, 128))
QUICK_SHAPES = ((1, 16), (4, 16))
# overall: the benchmark's target (stricter than the library default); per slice: the library default
BUDGET_OVERALL, BUDGET_SLICE = 0.005, DEFAULT_BUDGET_PER_SLICE
TARGET_SPEEDUP = 5.0
# Inference rows, in table order: name -> (framework, what it is)
ROWS: dict[str, tuple[str, str]] = {
    "torch-eager-fp32": ("pytorch", "PyTorch eager FP32 (eager attention): the reference"),
    "torch-sdpa-fp32": ("pytorch", "PyTorch FP32 with scaled_dot_product_attention"),
    "torch-bf16": ("pytorch", "PyTorch bf16 weights and activations (eager attention)"),
    "torch-compile": ("pytorch", "torch.compile (Inductor, default mode) of the eager FP32 model"),
    "torch-dynamic-int8": ("pytorch", "torch.ao dynamic INT8 (nn.Linear weights qint8, activations per batch)"),
    "ort-exported-fp32": ("onnxruntime", "ONNX Runtime, exported graph (opset 17), session optimization 'all'"),
    "ort-fused-fp32": ("onnxruntime", "ONNX Runtime, transformer-optimized (fused) graph"),
}
# ONNX Runtime INT8 rows: name -> (FP32 graph it starts from, QuantConfig preset name)
INT8_ROWS: dict[str, tuple[str, str]] = {
    "ort-fused-int8-dynamic": ("fused", "dynamic"),
    "ort-fused-int8-dynamic-per-channel": ("fused", "dynamic-per-channel"),
    "ort-fused-int8-dynamic-fp32-embeddings": ("fused", "dynamic-fp32-embeddings"),
    "ort-fused-int8-dynamic-reduce-range": ("fused", "dynamic-reduce-range"),
    "ort-exported-int8-static-minmax": ("exported", "static-minmax"),
    "ort-exported-int8-static-best": ("exported", "static"),
    # weight-only 4-bit (MatMulNBits): FP32 compute, and INT8 compute (accuracy_level 4)
    "ort-fused-int4-weight-only": ("fused", "weight-only-int4"),
    "ort-fused-int4-weight-only-acc4": ("fused", "weight-only-int4-acc4"),
}
TRAIN_VARIANTS = ("eager", "compile", "ortmodule", "ort-opset14-fused-no-spin")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
RECORDED_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


# ---- the machine -----------------------------------------------------------------------------
def machine_info() -> dict:
    """CPU model, the flags that decide which kernels run (VNNI, AMX, bf16), cores, load, versions."""
    model, flags = platform.processor(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model in ("", "x86_64"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    lscpu = ""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        pass
    versions = {}
    for mod in ("torch", "onnxruntime", "transformers", "numpy"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = None
    return {
        "cpu_model": model, "flags": {f: f in flags for f in RECORDED_FLAGS},
        "logical_cpus": os.cpu_count(), "lscpu": lscpu, "platform": platform.platform(),
        "python": platform.python_version(), "versions": versions, "load_avg_start": list(os.getloadavg()),
    }


def bf16_unavailable_reason(info: dict) -> Optional[str]:
    if any(info["flags"].get(f) for f in BF16_FLAGS):
        return None
    return (f"not available: this CPU ({info['cpu_model']}) has no bf16 instructions ({' / '.join(BF16_FLAGS)} absent "
            "from its flags), so PyTorch would emulate bf16 with FP32 conversions: slower than FP32 and no fair peer")


# ---- rows ------------------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    framework: str
    what: str
    runner: Optional[Any] = None  # a model (PyTorch) or an onnxruntime session
    path: Optional[str] = None
    reason: str = ""  # why the row has no figures
    startup_s: dict = field(default_factory=dict)  # "BxS" -> first call (compilation) seconds
    samples: dict = field(default_factory=dict)  # "BxS" -> [ms], every timed run
    round_ms: dict = field(default_factory=dict)  # "BxS" -> [ms], one per interleaved round (paired across rows)
    floor_ms: dict = field(default_factory=dict)  # "BxS" -> this machine's floor for the row's graph
    # "BxS" -> the same work at each kernel's best throughput, whatever the row count (Floor.peak_floor_ms)
    peak_floor_ms: dict = field(default_factory=dict)
    loads: dict = field(default_factory=dict)  # "BxS" -> load average while measured
    accuracy: Optional[dict] = None
    size_mib: Optional[float] = None


def key(shape) -> str:
    return f"{shape[0]}x{shape[1]}"


def quantiles(samples: list[float]) -> dict:
    from workbench.core.latency import summarize

    s = summarize(samples)
    return {"median_ms": s.median_ms, "p10_ms": s.p10_ms, "p25_ms": s.p25_ms, "p75_ms": s.p75_ms, "p90_ms": s.p90_ms,
            "iqr_ms": s.iqr_ms, "min_ms": s.min_ms, "runs": s.repeats}


def time_once(row: Row, shape, vocab: int, threads: int, repeats: int, warmup: int) -> list[float]:
    """``repeats`` timed runs of one row at one shape, the same call the interleaved rounds time
    (used for each row's first call: its start-up, compilation included)."""
    import torch

    from workbench.core.latency import measure
    from workbench.runtime.ortinfer import torch_threads

    with torch_threads(threads if row.framework != "onnxruntime" else None), torch.inference_mode():
        return measure(call_of(row, shape, vocab), warmup=warmup, repeats=repeats).samples_ms


def call_of(row: Row, shape, vocab: int):
    """One forward pass of ``row`` at ``shape`` on the shared synthetic batch, as a no-argument call."""
    from workbench.runtime.ortinfer import make_feed, synthetic_batch

    batch = synthetic_batch(shape[0], shape[1], vocab)
    if row.framework == "onnxruntime":
        sess = row.runner
        feed, out = make_feed(sess, batch), sess.get_outputs()[0].name
        return lambda: sess.run([out], feed)
    import torch

    from workbench.data.batches import model_inputs

    enc = model_inputs(row.runner, {k: torch.from_numpy(v) for k, v in batch.items()})
    return lambda: row.runner(**enc)


def interleave(rows: list[Row], shapes, vocab: int, threads: int, rounds: int, repeats: int, warmup: int, log) -> None:
    """Per shape: warm every row (the first call is its start-up: compilation, graph build), then
    ``rounds`` rounds of ``repeats`` runs per row in a rotating order (:func:`workbench.core.latency.interleaved`):
    ``round_ms[k][i]`` of every row is the median of its runs in round ``i`` (the pairs the ratios use),
    ``samples[k]`` every timed run."""
    import torch

    from workbench.core.latency import interleaved

    live = [r for r in rows if not r.reason]
    for shape in shapes:
        k = key(shape)
        for r in live:
            if r.reason:
                continue
            t0 = time.perf_counter()
            try:
                time_once(r, shape, vocab, threads, repeats=1, warmup=0)
            except Exception as exc:  # noqa: BLE001 - recorded as the row's reason, the others go on
                r.reason = f"failed at {k}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                log(f"    {r.name}: {r.reason}")
                continue
            r.startup_s[k] = time.perf_counter() - t0
        ok = [r for r in live if not r.reason]
        if not ok:
            continue
        load0 = os.getloadavg()[0]
        runs: dict = {}
        with torch.inference_mode():
            stats = interleaved({r.name: call_of(r, shape, vocab) for r in ok}, rounds=rounds, repeats=repeats,
                                warmup=max(1, warmup - 1), runs=runs)
        load1 = os.getloadavg()[0]
        for r in ok:
            r.round_ms[k] = stats[r.name].samples_ms
            r.samples[k] = runs[r.name]
            r.loads[k] = [load0, load1]
        log(f"  {k}: {rounds} rounds x {repeats} runs of {len(ok)} rows done, load {load1:.2f}")


# ---- building the variants -------------------------------------------------------------------
def load_torch_models(model_dir: str, info: dict, threads: int, log) -> dict[str, Row]:
    import torch

    from workbench.models.load import load_model

    rows = {n: Row(n, *ROWS[n]) for n in ROWS if ROWS[n][0] == "pytorch"}
    eager = load_model(model_dir, attn_implementation="eager", dropout=False).model.eval()
    rows["torch-eager-fp32"].runner = eager
    rows["torch-sdpa-fp32"].runner = load_model(model_dir, attn_implementation="sdpa", dropout=False).model.eval()
    reason = bf16_unavailable_reason(info)
    if reason:
        rows["torch-bf16"].reason = reason
    else:
        rows["torch-bf16"].runner = load_model(model_dir, attn_implementation="eager", dropout=False).model.eval().to(torch.bfloat16)
    try:
        rows["torch-compile"].runner = torch.compile(load_model(model_dir, attn_implementation="eager", dropout=False).model.eval())
    except Exception as exc:  # noqa: BLE001 - the row says why
        rows["torch-compile"].reason = f"torch.compile failed: {type(exc).__name__}: {exc}"
    rows["torch-dynamic-int8"].runner = torch.ao.quantization.quantize_dynamic(
        load_model(model_dir, attn_implementation="eager", dropout=False).model.eval(), {torch.nn.Linear}, dtype=torch.qint8)
    return rows


def build_onnx(model_dir: str, data, work: Path, max_length: int, threads: int, quick: bool, log) -> tuple[dict[str, Row], dict]:
    """Export, fuse, quantize (each INT8 preset, scored on the test split against its FP32 graph)."""
    from workbench.graph import ExportConfig, run_export
    from workbench.runs import layout
    from workbench.graph import FusionConfig, run_fusion
    from workbench.runtime.ortinfer import make_session
    from workbench.quant import BaselineConfig, EvalConfig, QuantConfig, TimingConfig, check_budget, prepare_baseline, run_quantization

    t0 = time.perf_counter()
    exp = run_export(model_dir, ExportConfig(max_length=max_length, validation_examples=16 if quick else 32), work / layout.EXPORT_DIR,
                     data=data)
    fus = run_fusion(exp, FusionConfig.transformer_only(measure_latency=False, time_pytorch=False), work / layout.FUSION_DIR)
    graphs = {"exported": Path(exp.onnx_path), "fused": Path(fus.fused_path)}
    log(f"  export + fusion: {time.perf_counter() - t0:.0f} s; fused ops {dict(sorted(fus.variants[-1].fused_ops.items()))}")
    rows = {}
    for name, g in (("ort-exported-fp32", "exported"), ("ort-fused-fp32", "fused")):
        rows[name] = Row(name, *ROWS[name], path=str(graphs[g]))
    timing = TimingConfig(shapes=((1, 16),), warmup=0, repeats=1, threads=threads, max_seconds=1.0)  # timed later, side by side
    baselines = {}
    for g in ("exported", "fused"):
        baselines[g] = prepare_baseline(graphs[g], data, work / f"baseline-{g}",
                                        BaselineConfig(timing=timing, calibration_samples=64 if quick else 256, batch_size=32), export=exp)
    for name, (g, preset) in INT8_ROWS.items():
        cfg = QuantConfig.preset(preset)
        if quick and cfg.mode.value == "static":
            cfg = QuantConfig.preset(preset, calibration={"samples": 32})
        t1 = time.perf_counter()
        row = Row(name, "onnxruntime", f"ONNX Runtime {g} graph, {'weight-only' if cfg.mode.value == 'weight-only' else 'INT8'} "
                                       f"preset {preset!r} ({cfg.label})")
        try:
            res = run_quantization(baselines[g], cfg, work / name,
                                   evaluation=EvalConfig(n_boot=100 if quick else 300, node_error_samples=0))
        except Exception as exc:  # noqa: BLE001 - the row says why
            row.reason = f"quantization failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            rows[name] = row
            continue
        chk = check_budget(res.reports, BUDGET_OVERALL, BUDGET_SLICE)
        row.path, row.size_mib = str(res.quantized_path), res.size_mib
        row.accuracy = {"accuracy": res.accuracy, "fp32_accuracy": res.accuracy - res.accuracy_delta,
                        "delta": res.accuracy_delta, "worst_slice": chk.worst_slice, "worst_slice_drop": chk.worst_slice_drop,
                        "within_budget": chk.feasible, "violations": chk.violations, "n": res.report.overall.n,
                        "config": cfg.label, "quantize_s": round(time.perf_counter() - t1, 1)}
        rows[name] = row
        log(f"  {name}: accuracy {res.accuracy:.4f} ({res.accuracy_delta:+.4f}), worst slice {chk.worst_slice} "
            f"{-chk.worst_slice_drop:+.4f}, within budget {chk.feasible} ({time.perf_counter() - t1:.0f} s)")
    for r in rows.values():
        if r.path and not r.reason:
            # spinning during a run, stopped when it returns (make_session's default): a pool still
            # spinning after its run would slow the rows that run next
            r.runner = make_session(r.path, threads=threads)
    meta = {"fused_ops": fus.variants[-1].fused_ops,
            "export_validation": exp.validation.passed, "test_examples": baselines["exported"].eval_sets[0].n}
    return rows, meta


# ---- the floor -------------------------------------------------------------------------------
FLOOR_GRAPH_OF_TORCH = {"torch-dynamic-int8": "ort-fused-int8-dynamic"}  # else: the exported FP32 graph
FAR_FROM_FLOOR = 0.9


def floors(rows: list[Row], shapes, profile) -> dict:
    """Each row's floor per shape (``Row.floor_ms``) and the work behind it: {shape: {graph row: work}}."""
    from workbench.perf.work import floor_for, graph_work

    by_name = {r.name: r for r in rows}
    works: dict = {}
    for shape in shapes:
        k = key(shape)
        works[k] = {}
        for r in rows:
            if r.framework != "onnxruntime" or not r.path:
                continue
            w = graph_work(r.path, *shape)
            works[k][r.name] = w
            f = floor_for(w, profile)
            r.floor_ms[k], r.peak_floor_ms[k] = f.floor_ms, f.peak_floor_ms
        for r in rows:
            if r.framework == "pytorch":
                src = by_name.get(FLOOR_GRAPH_OF_TORCH.get(r.name, "ort-exported-fp32"))
                if src is not None and k in src.floor_ms:
                    r.floor_ms[k], r.peak_floor_ms[k] = src.floor_ms[k], src.peak_floor_ms.get(k)
    return works


def floor_analysis(rows: list[Row], shapes, works: dict, threads: int, log) -> dict:
    """Per shape: the work, each ONNX Runtime row's floor and of_floor, the best variant, and where
    it is below 90% of its floor, which ops take its time (ONNX Runtime's profiler)."""
    from workbench.runtime.ortinfer import profile_ops

    out = {}
    for shape in shapes:
        k = key(shape)
        med = {r.name: statistics.median(r.samples[k]) for r in rows if k in r.samples and r.framework == "onnxruntime"}
        best = min(med, key=med.get) if med else None
        ref = works[k].get("ort-exported-fp32")
        entry = {"shape": k, "total_macs": ref.total_macs if ref else None,
                 "work": {n: {"fp32_macs": w.fp32_macs, "int8_macs": w.int8_macs, "by_op": w.by_op}
                          for n, w in works[k].items()},
                 "floor_ms": {r.name: r.floor_ms.get(k) for r in rows if k in r.floor_ms},
                 "of_floor": {n: next(r for r in rows if r.name == n).floor_ms[k] / v for n, v in med.items()
                              if k in next(r for r in rows if r.name == n).floor_ms},
                 "peak_floor_ms": {r.name: r.peak_floor_ms.get(k) for r in rows if k in r.peak_floor_ms},
                 "of_peak_floor": {n: next(r for r in rows if r.name == n).peak_floor_ms[k] / v for n, v in med.items()
                                   if next(r for r in rows if r.name == n).peak_floor_ms.get(k)},
                 "best_ort": best, "best_ort_ms": med.get(best), "ops": None}
        entry["best_of_floor"] = entry["of_floor"].get(best) if best else None
        if best and entry["best_of_floor"] is not None and entry["best_of_floor"] < FAR_FROM_FLOOR:
            row = next(r for r in rows if r.name == best)
            try:
                entry["ops"] = [{"op_type": o, "ms": ms, "share": sh}
                                for o, ms, sh in profile_ops(row.path, shape[0], shape[1], threads=threads, runs=5)]
            except Exception as exc:  # noqa: BLE001 - the profile is an explanation; say why it is missing
                entry["ops_error"] = f"{type(exc).__name__}: {exc}"
        out[k] = entry
    return out


# ---- training (small; the defaults are workbench.train's) ------------------------------------
def training_section(model: str, shape, warmup: int, steps: int, threads: int, log) -> list[dict]:
    import bench_train

    names = bench_train.with_baselines(list(TRAIN_VARIANTS), model, shape[0], shape[1], warmup + steps, threads)
    log(f"  training {shape[0]}x{shape[1]}: {', '.join(names)}, one process each, taking turns step by step; "
        "each backend against the eager variant with the same settings")
    root = Path(tempfile.mkdtemp(prefix="bench_train."))
    rows = bench_train.interleaved_lockstep(names, model, shape[0], shape[1], warmup, steps, threads, root)
    rows = bench_train.add_ratios(rows, warmup, model, threads)
    for r in rows:
        r["what"] = bench_train.VARIANTS[r["variant"]][2]
        timed = r["step_s"][warmup:]
        if len(timed) >= 2:
            q = statistics.quantiles(timed, n=10, method="inclusive")
            r["p10_step_s"], r["p90_step_s"] = q[0], q[-1]
    return rows


# ---- output ----------------------------------------------------------------------------------
def fmt(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def row_json(r: Row, shapes, eager: Row) -> dict:
    from workbench.core.latency import paired_ratio

    out = {"name": r.name, "framework": r.framework, "what": r.what, "available": not r.reason, "reason": r.reason,
           "size_mib": r.size_mib, "accuracy": r.accuracy, "shapes": {}}
    for s in shapes:
        k = key(s)
        if k not in r.samples:
            out["shapes"][k] = {"available": False, "reason": r.reason or "not measured"}
            continue
        q = quantiles(r.samples[k])
        ratio = None
        if k in eager.round_ms and len(r.round_ms[k]) >= 2:
            rr = paired_ratio(eager.round_ms[k], r.round_ms[k])
            ratio = {"value": rr.value, "lo": rr.lo, "hi": rr.hi, "rounds": rr.rounds, "text": rr.text(),
                     "is_gain": rr.is_gain}
        floor = r.floor_ms.get(k)
        out["shapes"][k] = {"available": True, **q, "round_ms": r.round_ms[k],
                            "speedup_vs_eager": ratio["value"] if ratio else None, "ratio_vs_eager": ratio,
                            "floor_ms": floor, "of_floor": floor / q["median_ms"] if floor else None,
                            "startup_s": r.startup_s.get(k), "load_avg": statistics.median(r.loads[k])}
    return out


def inference_table(rows_json: list[dict], shapes) -> str:
    head = (f"{'variant':<36}" + "".join(f" {key(s) + ' ms':>10} {'p10-p90':>13} {'vs eager (95% interval)':>23} {'floor':>6}"
                                         for s in shapes) + f" {'acc':>6} {'drop':>6} {'worst slice':>22}")
    lines = [head, "-" * len(head)]
    for r in rows_json:
        cells = ""
        for s in shapes:
            c = r["shapes"][key(s)]
            if not c["available"]:
                cells += f" {'n/a':>10} {'':>13} {'':>23} {'':>6}"
            else:
                ratio = c["ratio_vs_eager"]["text"] if c["ratio_vs_eager"] else "-"
                cells += (f" {c['median_ms']:>10.2f} {fmt(c['p10_ms'], '.1f') + '-' + fmt(c['p90_ms'], '.1f'):>13} "
                          f"{ratio:>23} {fmt(c['of_floor'], '.0%'):>6}")
        a = r["accuracy"]
        acc = (f" {a['accuracy']:>6.3f} {-a['delta'] * 100:>5.2f}p {a['worst_slice'][-16:]:>16} {a['worst_slice_drop'] * 100:>4.1f}p"
               if a else f" {'':>6} {'':>6} {'':>22}")
        lines.append(f"{r['name']:<36}{cells}{acc}")
    for r in rows_json:
        if not r["available"]:
            lines.append(f"  {r['name']}: {r['reason']}")
    return "\n".join(lines)


def train_table(rows: list[dict]) -> str:
    import bench_train

    head = (f"{'training variant':<28} {'status':<7} {'median s':>9} {'p10-p90 s':>13} {'against (same settings)':<24} "
            f"{'speed (95%)':>19} {'first step s':>12}")
    lines = [head, "-" * len(head)]
    for r in rows:
        against = "-" if r["variant"] == r["baseline"] else r["baseline"] + (" (setting)" if r["comparison"] == "pytorch setting" else "")
        lines.append(f"{r['variant']:<28} {r['status']:<7} {fmt(r['median_step_s'], '.3f'):>9} "
                     f"{fmt(r.get('p10_step_s'), '.2f') + '-' + fmt(r.get('p90_step_s'), '.2f'):>13} "
                     f"{against:<24} {bench_train.ratio_text(r):>19} {fmt(r['first_step_s'], '.1f'):>12}")
        if r["status"] != "ok":
            lines.append(f"  {r['variant']}: {r['reason']}")
    return "\n".join(lines)


def floor_text(fl: dict, profile: dict) -> str:
    lines = [f"machine: {profile['cpu_model']} ({profile['isa']}); {profile['threads']} threads, ONNX Runtime "
             f"{profile['ort_version']}: FP32 MatMul {profile['fp32_gops']:.0f} GFLOP/s, INT8 DynamicQuantizeMatMul "
             f"{profile['int8_gops']:.0f} GOP/s" + (f", QDQ QLinearMatMul {profile['qdq_int8_gops']:.0f} GOP/s"
                                                    if profile.get("qdq_int8_gops") else "")]
    for k, e in fl.items():
        if e["total_macs"]:
            lines.append(f"{k}: {e['total_macs'] / 1e9:.4f} G multiply-adds a forward pass (from the exported graph)")
        for name, f in e["floor_ms"].items():
            if name.startswith("ort-"):
                of = e["of_floor"].get(name)
                peak, of_peak = (e.get("peak_floor_ms") or {}).get(name), (e.get("of_peak_floor") or {}).get(name)
                lines.append(f"  {name:<40} floor {f:8.3f} ms   measured at {fmt(of, '.0%')} of it"
                             + (f"   (peak floor {peak:.3f} ms: {fmt(of_peak, '.0%')})" if peak else ""))
        if e["best_ort"]:
            lines.append(f"  best ONNX Runtime variant {e['best_ort']} {e['best_ort_ms']:.2f} ms = "
                         f"{fmt(e['best_of_floor'], '.0%')} of its floor")
        if e.get("ops"):
            top = ", ".join(f"{o['op_type']} {o['share']:.0%}" for o in e["ops"][:6])
            lines.append(f"  below {FAR_FROM_FLOOR:.0%} of its floor; where its time goes (ONNX Runtime profiler): {top}")
        elif e.get("ops_error"):
            lines.append(f"  (no op profile: {e['ops_error']})")
    return "\n".join(lines)


def markdown(result: dict) -> str:
    """The README's table: the command, the machine, the inference rows, the floor and training."""
    m, shapes = result["machine"], result["settings"]["shapes"]
    flags = ", ".join(f"{f} {'yes' if v else 'no'}" for f, v in m["flags"].items())
    lines = [(f"**CONTENDED**: {'; '.join(result['load_check']['reasons'])}. " if result["contended"] else "")
             + f"`{result['command']}` on {m['cpu_model']}, {m['logical_cpus']} CPUs ({flags}); load average "
             f"{m['load_avg_start'][0]:.1f} at start, {m['load_avg_end'][0]:.1f} at end; {result['threads']} threads for both "
             f"frameworks; median of {result['settings']['rounds']} interleaved rounds x {result['settings']['repeats']} runs "
             f"(p10-p90 in brackets); accuracy on {result['onnx']['test_examples']} held-out test reviews.", ""]
    lines.append("| variant | " + " | ".join(f"{k} ms" for k in shapes) + " | vs eager (" + shapes[min(1, len(shapes) - 1)]
                 + ", 95% interval) | of floor | accuracy (change vs FP32 graph, worst slice) |")
    lines.append("| --- " * (len(shapes) + 4) + "|")
    ref = shapes[min(1, len(shapes) - 1)]
    for r in result["inference"]:
        cells = []
        for k in shapes:
            c = r["shapes"][k]
            cells.append(f"{c['median_ms']:.2f} [{c['p10_ms']:.1f}-{c['p90_ms']:.1f}]" if c["available"] else "n/a")
        c = r["shapes"][ref]
        sp = c["ratio_vs_eager"]["text"] if c["available"] and c["ratio_vs_eager"] else "n/a"
        of = fmt(c.get("of_floor"), ".0%") if c["available"] else "n/a"
        a = r["accuracy"]
        acc = (f"{a['accuracy']:.3f} ({a['delta'] * 100:+.2f} pt; {a['worst_slice']} {-a['worst_slice_drop'] * 100:+.1f} pt)"
               if a else "")
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {sp} | {of} | {acc} |")
    for r in result["inference"]:
        if not r["available"]:
            lines.append(f"\n{r['name']}: {r['reason']}")
    lines += ["", "```", floor_text(result["floor"], result["machine_profile"]), "```"]
    if result["training"]:
        lines += ["", "```", train_table(result["training"]), "```"]
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------------------
def resolve_model(name: str, quick: bool, log) -> str:
    """A model folder (or built-in name): default the workshop's fine-tuned MiniLM (trained once and
    cached if missing), ``tiny`` in quick mode."""
    if name:
        return name
    if quick:
        return "tiny"
    from workbench.teaching.workshop import ensure_finetuned

    return str(ensure_finetuned("minilm", log=log))


def data_length_shapes(shapes, model_dir: str, data) -> tuple[tuple, Any]:
    """``shapes`` plus batch 1 at the test split's median and 95th-percentile token length under the
    model's tokenizer (truncated at the longest fixed shape), and the length statistics."""
    from workbench.data.token_lengths import length_stats, with_data_shapes
    from workbench.models.load import load_model

    tok = load_model(model_dir, dropout=False).tokenizer
    stats = length_stats(data, tok, max(s for _, s in shapes), split="test")
    return with_data_shapes(shapes, stats), stats


def run(args) -> dict:
    import torch

    from workbench.data.load import DataConfig, load_data
    from workbench.models.load import load_model
    from workbench.core import serial
    from workbench.perf.machine_profile import check_load, combine_checks, machine_profile
    from workbench.runs import atomic_write_json

    log = print
    t_start = time.perf_counter()
    shapes = tuple(args.shapes) if args.shapes else (QUICK_SHAPES if args.quick else FULL_SHAPES)
    info = machine_info()
    log(f"bench: {info['cpu_model']}, {info['logical_cpus']} CPUs, flags "
        f"{' '.join(f for f, v in info['flags'].items() if v)}; load {info['load_avg_start'][0]:.2f}; threads {args.threads}")
    torch.set_num_threads(args.threads)
    model_dir = resolve_model(args.model, args.quick, log)
    data = load_data(DataConfig.quick() if args.quick else DataConfig(max_eval=args.eval_examples))
    work = Path(args.work or tempfile.mkdtemp(prefix="bench."))
    log(f"model {model_dir}; test split {len(data['test'])} examples; work folder {work}")
    lengths = None
    if args.data_lengths if args.data_lengths is not None else not args.quick:
        shapes, lengths = data_length_shapes(shapes, model_dir, data)
        log(f"the data's token lengths (test split): {lengths.text()}; also timed at batch 1 x the median and 95th "
            f"percentile: shapes {', '.join(key(s) for s in shapes)}")

    torch_rows = load_torch_models(model_dir, info, args.threads, log)
    ort_rows, meta = build_onnx(model_dir, data, work, max(s for _, s in shapes), args.threads, args.quick, log)
    rows = [*torch_rows.values(), *ort_rows.values()]
    vocab = load_model(model_dir, dropout=False).model.config.vocab_size
    profile = machine_profile(threads=args.threads)  # cached; measured (seconds) the first time
    works = floors(rows, shapes, profile)
    before = check_load(profile)
    log(f"load check before timing: {before.text()}")
    log(f"timing {len(rows)} rows x {len(shapes)} shapes, {args.rounds} rounds x {args.repeats} runs, interleaved")
    interleave(rows, shapes, vocab, args.threads, args.rounds, args.repeats, args.warmup, log)
    after = check_load(profile)
    load = combine_checks(before, after)
    log(f"load check after timing: {after.text()}")
    eager = torch_rows["torch-eager-fp32"]
    rows_json = [row_json(r, shapes, eager) for r in rows]
    for r in rows:  # free sessions and models before the op profiles and training
        r.runner = None
    gc.collect()
    fl = floor_analysis(rows, shapes, works, args.threads, log)
    prof_json = {**serial.to_dict(profile), "key": profile.key, "isa": profile.isa_text()}
    train_shape = tuple(args.train_shape[0]) if args.train_shape else ((8, 32) if args.quick else (16, 128))
    train_warmup, train_steps = (1 if args.quick else 2), args.train_steps or (2 if args.quick else 6)
    train = [] if args.no_train else training_section(
        "tiny" if args.quick else "minilm", train_shape, train_warmup, train_steps, args.threads, log)

    info["load_avg_end"] = list(os.getloadavg())
    result = {
        "schema_version": SCHEMA_VERSION, "benchmark": "bench", "quick": args.quick, "model": str(model_dir),
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "machine": info, "threads": args.threads,
        "settings": {"shapes": [key(s) for s in shapes], "rounds": args.rounds, "repeats": args.repeats, "warmup": args.warmup,
                     "train_shape": list(train_shape), "train_warmup": train_warmup, "train_steps": train_steps,
                     "ort_session": "graph optimization 'all', intra_op_num_threads = threads, inter_op 1, spinning during a run, stopped "
                                    "after it (session.force_spinning_stop)",
                     "torch": f"torch.set_num_threads(threads), OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}",
                     "budget_overall": BUDGET_OVERALL, "budget_per_slice": BUDGET_SLICE},
        "data_lengths": serial.to_dict(lengths) if lengths is not None else None,
        "inference": rows_json, "onnx": meta, "machine_profile": prof_json, "floor": fl, "training": train,
        "contended": load.contended, "load_check": {**serial.to_dict(load), "before": before, "after": after},
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    if load.contended:
        log("\nWARNING: CONTENDED: these figures were taken while other work ran (" + "; ".join(load.reasons)
            + "); measure again on a quiet machine before quoting them")
    log("\n== inference" + (" [CONTENDED]" if load.contended else "")
        + " (median ms, p10-p90, speed-up vs PyTorch eager FP32 of the same shape: median of paired rounds with its "
        "95% bootstrap interval; floor = this machine's floor / measured; accuracy on the test split)")
    log(inference_table(rows_json, shapes))
    log("\n== the floor")
    log(floor_text(fl, prof_json))
    if train:
        log("\n== training steps (interleaved)")
        log(train_table(train))
    log(f"\nload average start {info['load_avg_start'][0]:.2f}, end {info['load_avg_end'][0]:.2f}; wall {result['wall_s']:.0f} s")
    atomic_write_json(Path(args.out), result)
    md = Path(args.out).with_suffix(".md")
    md.write_text(markdown(result) + "\n")
    log(f"wrote {args.out} and {md}")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench.json", help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="every row on the tiny model, small shapes, few repeats")
    parser.add_argument("--model", default="", help="model folder or built-in name (default: the workshop's fine-tuned MiniLM)")
    parser.add_argument("--threads", type=int, help="intra-op threads for PyTorch and ONNX Runtime alike (default: "
                                                    "OMP_NUM_THREADS where set, otherwise one per CPU)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per shape (default 5; quick 2)")
    parser.add_argument("--repeats", type=int, help="timed runs per row per round (default 6; quick 2)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per row and shape")
    parser.add_argument("--no-train", action="store_true", help="skip the training section")
    parser.add_argument("--shapes", type=shapes_arg, help="BATCHxSEQ,... (default 1x32,1x128,32x32,32x128; quick 1x16,4x16)")
    parser.add_argument("--eval-examples", type=int, help="cap the test split scored for accuracy (default: all of it)")
    parser.add_argument("--train-shape", type=shapes_arg, help="BATCHxSEQ of the training steps (default 16x128; quick 8x32)")
    parser.add_argument("--train-steps", type=int, help="timed training steps per variant (default 6; quick 2)")
    parser.add_argument("--work", help="folder for graphs (default: a temporary folder)")
    parser.add_argument("--data-lengths", action=argparse.BooleanOptionalAction, default=None,
                        help="also time batch 1 at the test split's median and 95th-percentile token length "
                             "(default: on; off with --quick)")
    args = parser.parse_args(argv)
    if args.threads is None:
        from workbench.perf.machine_profile import default_threads

        args.threads = default_threads()
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    args.rounds = args.rounds or (2 if args.quick else 5)
    args.repeats = args.repeats or (2 if args.quick else 6)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
