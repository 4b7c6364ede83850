"""Small batches against their floor: ONNX Runtime's session settings side by side at batch 1, and where a run's
time goes (ONNX Runtime's profiler, batch 1 against batch 32 per row).

    .venv/bin/python benchmarks/bench_small_batch.py [--graphs FUSED_FP32.onnx INT8.onnx] [--model minilm]
        [--work runs/bench/stacks] [--shapes 1x26 1x128] [--profile-batch 32] [--threads 2] [--rounds 15]
        [--settings workbench threads-1 no-spin ...] [--quick] [--out runs/bench/bench_small_batch.json]

Without ``--graphs`` the graphs are the built-in MiniLM's fused FP32 graph and its per-channel dynamic INT8 graph,
built (or found again) in ``--work`` as ``benchmarks/bench_stacks.py`` builds them (the same folder by default,
so either benchmark reuses the other's graphs).

1. Settings. Every setting opens its own session of each graph (:func:`workbench.runtime.session.make_session`),
   and per graph and shape all settings are timed in the same interleaved rounds
   (:func:`workbench.perf.speed.time_interleaved`: rotating order, paired ratios with bootstrap intervals, a load
   check before and after and a retime when the machine was busy) against ``workbench``, what the workbench's
   sessions use. Each row has its floor (the graph's multiply-adds at this machine's measured GEMM throughput,
   :func:`workbench.perf.speed.graph_floor`; ``threads-1`` against the one-thread profile) and how close it came.
2. Profile. One more session per graph with ONNX Runtime's profiler on, run at batch 1 and at ``--profile-batch``
   for each sequence length: the time per operator type per row (a batch of 32's time divided by 32), each type's
   share, and what lies between the kernels (a run's wall time inside ONNX Runtime less its kernels' time) and
   outside ONNX Runtime (the Python call's wall time less the run's): where batch 1 loses its time.

Prints the tables and writes JSON (the machine's CPU and flags, the versions, the date, every row and the
profile) to ``--out``. A benchmark, not a test: nothing is asserted; take figures on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import bench_stacks  # builds (or finds again) the graphs timed without --graphs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SCHEMA_VERSION = 1
BASE = "workbench"
# name -> make_session's keywords on top of the thread count ("io-binding" runs the workbench's session options
# through I/O binding with every output preallocated, instead of session.run)
SETTINGS: dict[str, dict] = {
    "workbench": {},
    "threads-1": {"threads": 1},
    "no-spin": {"allow_spinning": False},
    "keep-spinning": {"keep_spinning": True},
    "no-arena": {"cpu_arena": False},
    "no-mem-pattern": {"memory_pattern": False},
    "no-arena-no-pattern": {"cpu_arena": False, "memory_pattern": False},
    "parallel": {"execution_mode": "parallel"},
    "extended": {"graph_optimization": "extended"},
    "basic": {"graph_optimization": "basic"},
    "io-binding": {},
}
# keep-spinning leaves its workers spinning after a run returns, on the cores the next setting of the round runs on:
# it is there to be asked for (--settings), not in the default list
DEFAULT_SETTINGS = tuple(s for s in SETTINGS if s != "keep-spinning")
SHAPES = ("1x26", "1x128")  # batch 1 at about the median review's length, and at 128 tokens
QUICK = {"rounds": 3, "repeats": 2, "warmup": 1, "profile_runs": 3}
GEMM_OPS = {"MatMul", "FusedMatMul", "Gemm", "Attention", "QAttention", "DynamicQuantizeMatMul", "MatMulInteger",
            "QLinearMatMul", "MatMulIntegerToFloat", "QGemm"}


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", help="ONNX files to time (default: --model's fused FP32 and per-channel INT8 graphs)")
    p.add_argument("--model", default="minilm", help="what the graphs are built from without --graphs: 'minilm', 'tiny' "
                   "or a checkpoint folder")
    p.add_argument("--work", default="runs/bench/stacks", help="where the built graphs go (and are found again)")
    p.add_argument("--shapes", nargs="+", help=f"BATCHxSEQ shapes the settings are timed at (default: {' '.join(SHAPES)}; "
                   f"with --quick {SHAPES[0]})")
    p.add_argument("--profile-batch", type=int, default=32, help="the batch profiled beside batch 1, per sequence length")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads of every setting but threads-1")
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds per graph and shape")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per setting per round")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls per setting first")
    p.add_argument("--profile-runs", type=int, default=20, help="profiled runs per shape (after as many warm-up runs)")
    p.add_argument("--settings", nargs="+", default=list(DEFAULT_SETTINGS), choices=list(SETTINGS),
                   help=f"what to compare ({BASE} is always timed: the ratios are against it)")
    p.add_argument("--no-profile", action="store_true", help="leave the profiler's part out")
    p.add_argument("--quick", action="store_true", help="few rounds and profiled runs, 1x26 only, no retime on a busy "
                   "machine (a smoke run)")
    p.add_argument("--out", default="runs/bench/bench_small_batch.json", help="JSON file to write")
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.repeats, a.warmup, a.profile_runs = (min(getattr(a, k), v) for k, v in QUICK.items())
    a.shapes = a.shapes or (list(SHAPES[:1]) if a.quick else list(SHAPES))
    a.settings = [BASE, *dict.fromkeys(s for s in a.settings if s != BASE)]
    return a


def bad_input(a) -> str:
    """One line naming the value, the reason and the fix; empty when the arguments are usable."""
    from workbench.core.options import parse_shapes

    if a.threads < 1:
        return f"bench_small_batch: --threads {a.threads} must be at least 1; give 2 on a 2-core machine"
    for flag in ("rounds", "repeats", "profile_batch", "profile_runs"):
        if getattr(a, flag) < 1:
            return f"bench_small_batch: --{flag.replace('_', '-')} {getattr(a, flag)} must be at least 1"
    try:
        parse_shapes(",".join(a.shapes))
    except Exception as exc:  # noqa: BLE001 - the parser's own message says what was wrong
        return f"bench_small_batch: --shapes {' '.join(a.shapes)}: {exc}"
    for g in a.graphs or ():
        if not Path(g).is_file():
            return f"bench_small_batch: --graphs {g}: no such file; give ONNX files, or leave --graphs out to build MiniLM's"
    return ""


def graphs_to_time(a) -> tuple[dict[str, str], dict | None]:
    if a.graphs:
        return {Path(g).stem: str(Path(g).resolve()) for g in a.graphs}, None
    work = Path(a.work).resolve()
    built = bench_stacks.build_graphs(a.model, work)
    return {label: str(work / rel) for label, rel in built["graphs"].items()}, built


# ---- the settings, interleaved -----------------------------------------------------------------
def runner(session, feed: dict, io_binding: bool):
    """One call of ``session`` on ``feed``: ``session.run`` of its first output as the workbench's timing does, or a
    run through I/O binding with the inputs bound once and every output preallocated (its shape from one run)."""
    if not io_binding:
        out = session.get_outputs()[0].name
        return lambda: session.run([out], feed)
    import numpy as np
    import onnxruntime as ort

    names = [o.name for o in session.get_outputs()]
    first = session.run(names, feed)
    binding = session.io_binding()
    keep = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v)) for v in feed.values()]
    for name, value in zip(feed, keep):
        binding.bind_ortvalue_input(name, value)
    for name, value in zip(names, first):
        buf = ort.OrtValue.ortvalue_from_numpy(np.empty_like(value))
        keep.append(buf)
        binding.bind_ortvalue_output(name, buf)

    def run(b=binding, kept=keep):  # kept: the bound buffers live as long as the call
        session.run_with_iobinding(b)
    return run


def time_settings(a, graphs: dict[str, str], shapes) -> tuple[list[dict], list[str], str]:
    """Per graph and shape, every setting in the same interleaved rounds; one row each (the base's row too)."""
    from workbench.perf.machine_profile import machine_profile
    from workbench.perf.speed import RETIMES, graph_floor, time_interleaved
    from workbench.runtime.ortinfer import make_feed, synthetic_batch
    from workbench.runtime.session import make_session

    profiles = {t: machine_profile(t) for t in {a.threads, 1}}
    rows, notes, load = [], [], ""
    for label, path in graphs.items():
        sessions = {s: make_session(path, **{"threads": a.threads, **SETTINGS[s]}) for s in a.settings}
        groups = {}
        for batch, seq in shapes:
            arrays = synthetic_batch(batch, seq)
            groups[(batch, seq)] = {s: runner(sess, make_feed(sess, arrays), s == "io-binding") for s, sess in sessions.items()}
        print(f"timing {label}: {len(a.settings)} settings x {len(shapes)} shapes, {a.rounds} rounds", flush=True)
        timed = time_interleaved(groups, BASE, rounds=a.rounds, repeats=a.repeats, warmup=a.warmup,
                                 profile=profiles[a.threads], notes=notes, retimes=0 if a.quick else RETIMES)
        load = timed.load.text() if timed.load else ""
        for (batch, seq), r in timed.groups.items():
            for s in a.settings:
                threads = SETTINGS[s].get("threads", a.threads)
                floor = _floor(graph_floor, path, batch, seq, profiles[threads], notes)
                ms = r.median_ms(s)
                ratio = r.ratios.get(s)
                rows.append({"graph": label, "shape": f"{batch}x{seq}", "setting": s, "threads": threads, "ms": ms,
                             "speedup": ratio.value if ratio else 1.0, "lo": ratio.lo if ratio else 1.0,
                             "hi": ratio.hi if ratio else 1.0, "floor_ms": floor, "of_floor": floor / ms if floor else None,
                             "samples_ms": list(r.stats[s].samples_ms)})
        sessions.clear()
        groups.clear()
    return rows, notes, load


def _floor(graph_floor, path, batch, seq, profile, notes) -> float | None:
    try:
        return graph_floor(path, batch, seq, profile)
    except Exception as exc:  # noqa: BLE001 - a floor that cannot be counted is said, not fatal
        notes.append(f"no floor for {Path(path).name} at {batch}x{seq}: {exc}")
        return None


def settings_table(rows: list[dict]) -> str:
    lines = [f"{'graph':<20}{'shape':<8}{'setting':<22}{'ms':>9}{'vs ' + BASE + ' [95%]':>26}{'of floor':>10}"]
    for r in rows:
        ratio = "-" if r["setting"] == BASE else f"{r['speedup']:.3f}x [{r['lo']:.3f}, {r['hi']:.3f}]"
        of = f"{r['of_floor']:.0%}" if r["of_floor"] else "-"
        lines.append(f"{r['graph'][:19]:<20}{r['shape']:<8}{r['setting']:<22}{r['ms']:>9.3f}{ratio:>26}{of:>10}")
    return "\n".join(lines)


# ---- the profiler ------------------------------------------------------------------------------
def profile_events(path: str | os.PathLike, last: int) -> dict:
    """From ONNX Runtime's profile JSON: the last ``last`` runs (``model_run`` events) and the node kernels inside
    them. Returns run wall times (µs) and kernel µs summed per operator type over those runs."""
    events = json.loads(Path(path).read_text())
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"), key=lambda e: e["ts"])[-last:]
    if not runs:
        raise ValueError(f"no model_run events in {path}")
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in runs]
    per_op: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            ts = e.get("ts", 0)
            if any(lo <= ts <= hi for lo, hi in spans):
                per_op[e.get("args", {}).get("op_name", "?")] += float(e.get("dur", 0))
    return {"runs": len(runs), "run_us": [float(e["dur"]) for e in runs], "op_us": dict(per_op)}


def profile_shape(path: str, batch: int, seq: int, threads: int, runs: int, folder: Path) -> dict:
    """The workbench's session with the profiler on, ``runs`` warm-up runs then ``runs`` profiled ones at
    ``batch`` x ``seq``; per row (÷ batch), means over the profiled runs: µs per operator type, all kernels, the run
    inside ONNX Runtime (so between its kernels: the run less the kernels), the Python call around it."""
    from workbench.runtime.ortinfer import make_feed, synthetic_batch
    from workbench.runtime.session import make_session

    folder.mkdir(parents=True, exist_ok=True)
    session = make_session(path, threads=threads, profile_prefix=str(folder / f"{Path(path).stem}_{batch}x{seq}"))
    feed = make_feed(session, synthetic_batch(batch, seq))
    out = session.get_outputs()[0].name
    wall = []
    for i in range(2 * runs):
        t0 = time.perf_counter()
        session.run([out], feed)
        if i >= runs:
            wall.append((time.perf_counter() - t0) * 1e6)
    prof = session.end_profiling()
    ev = profile_events(prof, runs)
    Path(prof).unlink()
    n = ev["runs"] * batch
    kernels = sum(ev["op_us"].values()) / n
    run_us = sum(ev["run_us"]) / n  # means over the same runs, so the differences below add up
    return {"shape": f"{batch}x{seq}", "runs": ev["runs"], "op_us_per_row": {k: v / n for k, v in ev["op_us"].items()},
            "kernels_us_per_row": kernels, "run_us_per_row": run_us, "between_kernels_us_per_row": run_us - kernels,
            "python_call_us_per_row": statistics.fmean(wall) / batch,
            "gemm_share": sum(v for k, v in ev["op_us"].items() if k in GEMM_OPS) / max(sum(ev["op_us"].values()), 1e-9)}


def profiles(a, graphs: dict[str, str], shapes, folder: Path) -> dict:
    seqs = list(dict.fromkeys(seq for _, seq in shapes))
    out = {}
    for label, path in graphs.items():
        for seq in seqs:
            pair = [profile_shape(path, b, seq, a.threads, a.profile_runs, folder) for b in (1, a.profile_batch)]
            out[f"{label} seq {seq}"] = {"graph": label, "seq": seq, "batch_1": pair[0], f"batch_{a.profile_batch}": pair[1]}
            print("\n" + profile_table(label, seq, pair[0], pair[1], a.profile_batch), flush=True)
    return out


def profile_table(label: str, seq: int, one: dict, many: dict, batch: int, top: int = 10) -> str:
    ops = sorted(one["op_us_per_row"], key=lambda k: -one["op_us_per_row"][k])[:top]
    k1, kb = one["kernels_us_per_row"], many["kernels_us_per_row"]
    lines = [f"{label}, seq {seq}: µs per row (batch {batch} divided by {batch})",
             f"  {'operator':<26}{'batch 1':>10}{'share':>8}{f'batch {batch}':>10}{'share':>8}{'1 / ' + str(batch):>8}"]
    for op in ops:
        u1, ub = one["op_us_per_row"][op], many["op_us_per_row"].get(op, 0.0)
        lines.append(f"  {op:<26}{u1:>10.1f}{u1 / k1:>8.0%}{ub:>10.1f}{ub / kb:>8.0%}{(u1 / ub if ub else float('nan')):>8.2f}")
    for name, key in (("all kernels", "kernels_us_per_row"), ("between kernels", "between_kernels_us_per_row"),
                      ("the run (ORT)", "run_us_per_row"), ("the Python call", "python_call_us_per_row")):
        u1, ub = one[key], many[key]
        lines.append(f"  {name:<26}{u1:>10.1f}{'':>8}{ub:>10.1f}{'':>8}{(u1 / ub if ub else float('nan')):>8.2f}")
    lines.append(f"  matrix products' share of kernel time: {one['gemm_share']:.0%} at batch 1, {many['gemm_share']:.0%} at batch {batch}")
    return "\n".join(lines)


# ---- the run -----------------------------------------------------------------------------------
def machine() -> dict:
    from workbench.perf.machine_profile import cpu_model_and_flags, usable_cpus

    model, flags = cpu_model_and_flags()
    return {"cpu_model": model, "flags": flags, "cpus": usable_cpus(), "platform": platform.platform(),
            "python": platform.python_version(), "load_avg_start": list(os.getloadavg())}


# the packages whose versions the JSON records
VERSIONS = ("onnxruntime", "onnxruntime-training", "onnxruntime-training-cpu", "numpy", "onnx")


def main(argv=None) -> int:
    a = _args(argv)
    refusal = bad_input(a)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    from workbench.core.options import parse_shapes
    from workbench.runs import atomic_write_json

    t0 = time.perf_counter()
    shapes = parse_shapes(",".join(a.shapes))
    graphs, built = graphs_to_time(a)
    info = machine()
    rows, notes, load = time_settings(a, graphs, shapes)
    print(f"\n{info['cpu_model']}; {a.threads} threads, {a.rounds} rounds x {a.repeats} calls; {load} (median ms; speed-up "
          f"over {BASE} from the same rounds; of floor: the graph's floor / its time)")
    print(settings_table(rows), flush=True)
    prof = {} if a.no_profile else profiles(a, graphs, shapes, Path(a.out).resolve().parent / "small_batch_profiles")
    info["load_avg_end"] = list(os.getloadavg())
    for line in notes:
        print("note: " + line)
    result = {"schema_version": SCHEMA_VERSION, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": info,
              "versions": bench_stacks.installed_versions(VERSIONS),
              "threads": a.threads, "rounds": a.rounds, "repeats": a.repeats, "quick": a.quick,
              "shapes": [f"{b}x{s}" for b, s in shapes], "settings": {s: SETTINGS[s] for s in a.settings}, "base": BASE,
              "graphs": graphs, "built": built, "load": load, "rows": rows, "profile": prof, "notes": notes,
              "seconds": time.perf_counter() - t0}
    atomic_write_json(Path(a.out), result)
    print(f"wrote {a.out} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
