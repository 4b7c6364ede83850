"""Time the same ONNX graphs under the two stacks' ONNX Runtimes, in alternating processes, per session setting.

    .venv/bin/python scripts/compare_runtimes.py --graphs FUSED_FP32.onnx INT8.onnx \
        [--venvs .venv .venv-current] [--shapes 1x26 1x128 32x47] [--threads 2] [--rounds 3] \
        [--settings workbench ort-default no-spin extended] [--profile] [--out runtimes.json]

Each (round, graph, setting) runs one worker process per venv, the venvs' order swapped every round, so a
drift of the machine's speed falls on both runtimes alike. A worker opens the graph with the setting's session
options, warms up, and times every shape on the same synthetic batch (median of ``--iters`` runs; fewer for the
large shapes). Settings:

- ``workbench``: what the workbench's sessions use (workbench.runtime.session.make_session): ``threads`` intra-op
  threads, one inter-op thread, spinning while a run lasts and stopped when it returns, every graph optimization;
- ``ort-default``: ONNX Runtime's own defaults apart from the thread count (idle workers keep spinning);
- ``no-spin``: never spin (``session.intra_op.allow_spinning`` 0);
- ``extended``: the workbench's, at graph-optimization level EXTENDED instead of ALL (no layout transforms);
- ``parallel``: the workbench's with the parallel execution mode;
- ``spin-1ms``: the workbench's, idle workers spinning 1 ms (``session.intra_op.spin_duration_us``; ONNX Runtime
  1.19.2 has no such key and ignores it);
- ``dispatch-latency``, ``dispatch-memory``: the workbench's with ``session.kernel_dispatch_policy`` set so
  (a key of recent versions; 1.19.2 ignores it);
- ``no-skipln-fusion``: the workbench's, with ONNX Runtime's own SkipLayerNormFusion disabled, so a graph of Add +
  LayerNormalization runs those two kernels (a graph the transformer optimizer fused keeps its fused nodes).

A graph may also be a single operator whose float inputs have symbolic (batch, seq) dimensions: its inputs are
random numbers of each shape, so one kernel is timed alone.

``--profile`` also runs ONNX Runtime's profiler once per venv and graph at the first shape and prints the time per
kernel (operator type and the kernel's provider), so two runtimes' kernels can be compared op by op. The table
printed at the end gives every median and the ratio current / training per graph, shape and setting; ``--out``
writes it as JSON. Take a quiet machine: another busy process halves such figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from collections import defaultdict
from pathlib import Path

SETTINGS = ("workbench", "ort-default", "no-spin", "extended", "parallel", "spin-1ms", "dispatch-latency", "dispatch-memory",
            "no-skipln-fusion")


def _options(ort, setting: str, threads: int):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = threads
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if setting == "ort-default":
        return opts
    opts.inter_op_num_threads = 1
    if setting == "no-spin":
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return opts
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
    opts.add_session_config_entry("session.force_spinning_stop", "1")
    if setting == "extended":
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    elif setting == "parallel":
        opts.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    elif setting in ("dispatch-latency", "dispatch-memory"):  # the kernel dispatch policy (a key 1.19.2 ignores)
        opts.add_session_config_entry("session.kernel_dispatch_policy", setting.split("-")[1])
    elif setting == "no-skipln-fusion":
        pass  # the workbench's options; the worker disables ONNX Runtime's SkipLayerNormFusion
    elif setting == "spin-1ms":  # a fixed spin time instead of the iteration count (keys read by 1.26 and later)
        opts.add_session_config_entry("session.intra_op.spin_duration_us", "1000")
    elif setting != "workbench":
        raise SystemExit(f"compare_runtimes: setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    return opts


def _feed(session, batch: int, seq: int):
    import numpy as np

    rng = np.random.default_rng(0)
    feed = {}
    for i in session.get_inputs():
        if "float" in i.type:  # a single-operator graph: symbolic dims are (batch, seq) in order
            dims = iter((batch, seq))
            shape = [d if isinstance(d, int) else next(dims, 1) for d in i.shape]
            feed[i.name] = rng.standard_normal(shape).astype(np.float32)
            continue
        dtype = np.int64 if "int64" in i.type else np.int32
        if i.name == "input_ids":
            feed[i.name] = rng.integers(1000, 20000, size=(batch, seq)).astype(dtype)
        elif i.name == "attention_mask":
            feed[i.name] = np.ones((batch, seq), dtype=dtype)
        else:
            feed[i.name] = np.zeros((batch, seq), dtype=dtype)
    return feed


def worker(args) -> None:
    import onnxruntime as ort

    opts = _options(ort, args.setting, args.threads)
    if args.profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = args.profile_prefix
    disabled = ["SkipLayerNormFusion"] if args.setting == "no-skipln-fusion" else None  # Add + LayerNormalization kept
    session = ort.InferenceSession(args.graph, sess_options=opts, providers=["CPUExecutionProvider"],
                                   disabled_optimizers=disabled)
    out = {"ort": ort.__version__, "ms": {}}
    for shape in args.shapes:
        batch, seq = (int(x) for x in shape.split("x"))
        feed = _feed(session, batch, seq)
        iters = max(5, args.iters // max(1, batch * seq // 256))
        for _ in range(3):
            session.run(None, feed)
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            session.run(None, feed)
            times.append((time.perf_counter() - t0) * 1e3)
        out["ms"][shape] = statistics.median(times)
        if args.profile_prefix:
            break
    if args.profile_prefix:
        out["profile"] = _kernel_times(session.end_profiling())
    print(json.dumps(out))


def _kernel_times(path: str) -> dict[str, float]:
    """Microseconds per operator type summed over the profiled runs (node events of the profiler's JSON)."""
    totals: dict[str, float] = defaultdict(float)
    for event in json.loads(Path(path).read_text()):
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            totals[event.get("args", {}).get("op_name", "?")] += float(event.get("dur", 0))
    Path(path).unlink()
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def _run(venv: str, argv: list[str]) -> dict:
    cmd = [str(Path(venv) / "bin" / "python"), __file__, "--worker", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"compare_runtimes: the worker in {venv} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def driver(args) -> None:
    common = ["--threads", str(args.threads), "--iters", str(args.iters), "--shapes", *args.shapes]
    ms: dict = defaultdict(list)  # (venv, graph, setting, shape) -> medians, one per round
    versions = {}
    for rnd in range(args.rounds):
        venvs = args.venvs if rnd % 2 == 0 else args.venvs[::-1]
        for graph in args.graphs:
            for setting in args.settings:
                for venv in venvs:
                    got = _run(venv, ["--graph", graph, "--setting", setting, *common])
                    versions[venv] = got["ort"]
                    for shape, value in got["ms"].items():
                        ms[(venv, graph, setting, shape)].append(value)
    rows = []
    base, new = args.venvs[0], args.venvs[-1]
    print(f"{'graph':<16}{'setting':<13}{'shape':<8}{'ort ' + versions[base]:>14}{'ort ' + versions[new]:>14}{'ratio':>8}")
    for graph in args.graphs:
        for setting in args.settings:
            for shape in args.shapes:
                a = statistics.median(ms[(base, graph, setting, shape)])
                b = statistics.median(ms[(new, graph, setting, shape)])
                rows.append({"graph": Path(graph).name, "setting": setting, "shape": shape, "training_ms": a,
                             "current_ms": b, "ratio": b / a, "rounds": {"training": ms[(base, graph, setting, shape)],
                                                                            "current": ms[(new, graph, setting, shape)]}})
                print(f"{Path(graph).name:<16}{setting:<13}{shape:<8}{a:>14.2f}{b:>14.2f}{b / a:>8.2f}")
    profiles = {}
    if args.profile:
        for graph in args.graphs:
            for venv in args.venvs:
                got = _run(venv, ["--graph", graph, "--setting", "workbench", "--profile-prefix",
                                  str(Path(args.out or ".").resolve().parent / f"profile_{Path(venv).name}"), *common])
                profiles[f"{Path(graph).name} {versions[venv]}"] = got["profile"]
                top = ", ".join(f"{op} {us / 1e3:.1f}" for op, us in list(got["profile"].items())[:8])
                print(f"kernels, ms summed over the profiled runs ({Path(graph).name}, onnxruntime {versions[venv]}): {top}")
    if args.out:
        Path(args.out).write_text(json.dumps({"versions": versions, "threads": args.threads, "rows": rows,
                                              "profiles": profiles}, indent=1))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--graph", help=argparse.SUPPRESS)
    p.add_argument("--setting", default="workbench", help=argparse.SUPPRESS)
    p.add_argument("--profile-prefix", default="", help=argparse.SUPPRESS)
    p.add_argument("--graphs", nargs="+", help="ONNX files to time (the fused FP32 graph, its INT8 version)")
    p.add_argument("--venvs", nargs=2, default=[".venv", ".venv-current"], help="the training venv, then the current one")
    p.add_argument("--shapes", nargs="+", default=["1x26", "1x128", "32x47"], help="BATCHxSEQ")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=40, help="runs per shape at 1x256 tokens or fewer (fewer for larger shapes)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--settings", nargs="+", default=["workbench"], choices=SETTINGS)
    p.add_argument("--profile", action="store_true", help="also print the time per kernel, per runtime")
    p.add_argument("--out", default="", help="write the table as JSON here")
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
    elif not args.graphs:
        p.error("--graphs is required")
    else:
        driver(args)


if __name__ == "__main__":
    main()
