"""``make bench-stacks``: the same ONNX graphs under the two stacks' ONNX Runtimes (the training stack's
onnxruntime-training in ``.venv``, the current stack's onnxruntime in ``.venv-current``), in alternating worker
processes, per session setting.

    .venv/bin/python benchmarks/bench_stacks.py [--graphs FUSED_FP32.onnx INT8.onnx] [--model minilm] \
        [--work runs/bench/stacks] [--venvs .venv .venv-current] [--shapes 1x26 1x128 32x47] [--threads 2] \
        [--rounds 3] [--settings workbench ort-default no-spin extended] [--profile] [--out runtimes.json]

Without ``--graphs`` it builds the graphs it times, with the workbench's own stages in the Python that runs it:
``--model`` (the built-in MiniLM unless told otherwise) exported (:func:`workbench.graph.run_export`),
transformer-optimized (:func:`workbench.graph.run_fusion`, ``FusionConfig.transformer_only``: the fused FP32 graph)
and that graph quantized to dynamic INT8 per channel (:func:`workbench.quant.quantize_graph`,
``QuantConfig.preset("dynamic-per-channel")``), into ``--work``. ``graphs.json`` there names the model they came from; a later
run for the same model times them again without rebuilding.

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
writes it as JSON with the machine (CPU model and the flags that pick ONNX Runtime's kernels, from
:func:`workbench.perf.machine_profile.cpu_model_and_flags`; the load average before and after), both runtimes'
versions, threads, rounds and the graphs. Take a quiet machine: another busy process halves such figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the driver imports the workbench; a worker needs only onnxruntime and numpy

SCHEMA_VERSION = 1
SETTINGS = ("workbench", "ort-default", "no-spin", "extended", "parallel", "spin-1ms", "dispatch-latency", "dispatch-memory",
            "no-skipln-fusion")
ROLES = ("training", "current")
SETUP_COMMAND = {"training": "make setup", "current": "make setup-current"}
GRAPHS_FILE = "graphs.json"  # in --work: the model the built graphs came from, and their paths
INT8_GRAPH = "model_fused_int8_per_channel.onnx"


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
        raise SystemExit(f"bench_stacks: --settings must be among {', '.join(SETTINGS)}, got {setting!r}")
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
    """In the venv being measured: open one graph with one setting, time every shape, print one JSON line."""
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


def _python(venv: str) -> Path:
    return Path(venv) / "bin" / "python"


def _run(venv: str, argv: list[str]) -> dict:
    cmd = [str(_python(venv)), __file__, "--worker", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench_stacks: the worker in {venv} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- input checks and the graphs ---------------------------------------------------------------
def bad_input(args) -> str:
    """The one line that refuses ``args`` (the value, the reason, the fix), or "" when they can be run."""
    for name in ("threads", "rounds", "iters"):
        if getattr(args, name) < 1:
            return f"bench_stacks: --{name} must be a whole number of at least 1, got {getattr(args, name)}"
    for shape in args.shapes:
        parts = shape.split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            return f"bench_stacks: --shapes: {shape!r} is not BATCHxSEQ with positive whole numbers; give e.g. 1x128"
    for graph in args.graphs or ():
        if not Path(graph).is_file():
            return (f"bench_stacks: --graphs: {graph} is not a file; give existing ONNX files, or leave --graphs out "
                    f"to build {args.model}'s fused FP32 and INT8 graphs into {args.work}")
    if not args.graphs:
        from workbench.models.load import ModelError, resolve_model_path

        try:
            resolve_model_path(args.model)
        except ModelError as exc:
            return f"bench_stacks: --model: {exc}"
    for role, venv in zip(ROLES, args.venvs):
        if not _python(venv).is_file():
            return (f"bench_stacks: --venvs: {venv} has no bin/python (the {role} stack's virtual environment); set it up "
                    f"with `{SETUP_COMMAND[role]}`, or name the two environments with --venvs TRAINING CURRENT")
    return ""


def built_graphs(work: Path, model: str) -> dict | None:
    """The record of graphs already built into ``work`` for ``model`` (every file still there), else None."""
    try:
        record = json.loads((work / GRAPHS_FILE).read_text())
    except (OSError, ValueError):
        return None
    if record.get("model") != model or not all((work / rel).is_file() for rel in record.get("graphs", {}).values()):
        return None
    return record


def build_graphs(model: str, work: Path, log=print) -> dict:
    """``model``'s fused FP32 graph and its per-channel dynamic INT8 version in ``work`` (built here unless
    ``graphs.json`` says they already are); returns that record: the model, each graph's path relative to
    ``work``, and what built them."""
    found = built_graphs(work, model)
    if found is not None:
        log(f"reusing the graphs of {model} in {work} (built {found['built_at']}; delete {work / GRAPHS_FILE} to rebuild)")
        return found
    import onnxruntime
    import torch

    from workbench.graph import ExportConfig, FusionConfig, run_export, run_fusion
    from workbench.quant import QuantConfig, quantize_graph
    from workbench.runs import atomic_write_json, layout

    t0 = time.perf_counter()
    log(f"building {model}'s fused FP32 and per-channel INT8 graphs into {work} (export, fusion, quantization)")
    exp = run_export(model, ExportConfig(), work / layout.EXPORT_DIR)
    fus = run_fusion(exp, FusionConfig.transformer_only(measure_latency=False, time_pytorch=False), work / layout.FUSION_DIR)
    if fus.fused_path is None:
        raise SystemExit(f"bench_stacks: the transformer optimizer gave no fused graph of {model}: {'; '.join(fus.notes)}")
    int8 = work / layout.QUANTIZE_DIR / INT8_GRAPH
    int8.parent.mkdir(parents=True, exist_ok=True)
    quantize_graph(fus.fused_path, QuantConfig.preset("dynamic-per-channel"), int8)
    record = {"model": model, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "built_with": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__},
              "export_validation_passed": exp.validation.passed, "fused_ops": fus.variants[-1].fused_ops,
              "graphs": {"fused-fp32": Path(fus.fused_path).resolve().relative_to(work).as_posix(),
                         "int8-per-channel": int8.relative_to(work).as_posix()}}
    atomic_write_json(work / GRAPHS_FILE, record)
    log(f"  built in {time.perf_counter() - t0:.0f} s; fused ops {dict(sorted(record['fused_ops'].items()))}")
    return record


def machine() -> dict:
    """The CPU (model, the flags that pick ONNX Runtime's kernels), the CPUs this process may use, the platform."""
    from workbench.perf.machine_profile import cpu_model_and_flags, usable_cpus

    model, flags = cpu_model_and_flags()
    return {"cpu_model": model, "flags": flags, "cpus": usable_cpus(), "platform": platform.platform(),
            "python": platform.python_version(), "load_avg_start": list(os.getloadavg())}


def installed_versions(names) -> dict:
    """``{name: version}`` of the packages among ``names`` installed in this interpreter's environment."""
    import importlib.metadata as md

    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


# ---- timing ------------------------------------------------------------------------------------
def time_graphs(args, graphs: dict[str, str]) -> tuple[dict, list[dict]]:
    """Every (round, graph, setting) in one worker per venv, the venvs' order swapped each round; returns the
    runtimes' versions by role and one row per graph, setting and shape (medians over the rounds and the ratio)."""
    common = ["--threads", str(args.threads), "--iters", str(args.iters), "--shapes", *args.shapes]
    ms: dict = defaultdict(list)  # (role, graph, setting, shape) -> medians, one per round
    versions = {}
    for rnd in range(args.rounds):
        order = list(zip(ROLES, args.venvs))
        for label, graph in graphs.items():
            for setting in args.settings:
                for role, venv in (order if rnd % 2 == 0 else order[::-1]):
                    got = _run(venv, ["--graph", graph, "--setting", setting, *common])
                    versions[role] = got["ort"]
                    for shape, value in got["ms"].items():
                        ms[(role, label, setting, shape)].append(value)
    rows = []
    for label in graphs:
        for setting in args.settings:
            for shape in args.shapes:
                a, b = (statistics.median(ms[(role, label, setting, shape)]) for role in ROLES)
                rows.append({"graph": label, "setting": setting, "shape": shape, "training_ms": a, "current_ms": b,
                             "ratio": b / a, "rounds": {role: ms[(role, label, setting, shape)] for role in ROLES}})
    return versions, rows


def table(versions: dict, rows: list[dict]) -> str:
    width = max([len("graph"), *(len(r["graph"]) for r in rows)]) + 2
    lines = [f"{'graph':<{width}}{'setting':<18}{'shape':<8}{'ort ' + versions['training']:>14}"
             f"{'ort ' + versions['current']:>14}{'ratio':>8}"]
    lines += [f"{r['graph']:<{width}}{r['setting']:<18}{r['shape']:<8}{r['training_ms']:>14.2f}{r['current_ms']:>14.2f}"
              f"{r['ratio']:>8.2f}" for r in rows]
    return "\n".join(lines)


def kernel_profiles(args, graphs: dict[str, str], versions: dict) -> dict:
    common = ["--threads", str(args.threads), "--iters", str(args.iters), "--shapes", *args.shapes]
    profiles = {}
    for label, graph in graphs.items():
        for role, venv in zip(ROLES, args.venvs):
            prefix = str(Path(args.out or ".").resolve().parent / f"profile_{Path(venv).name}")
            got = _run(venv, ["--graph", graph, "--setting", "workbench", "--profile-prefix", prefix, *common])
            profiles[f"{label} {versions[role]}"] = got["profile"]
            top = ", ".join(f"{op} {us / 1e3:.1f}" for op, us in list(got["profile"].items())[:8])
            print(f"kernels, ms summed over the profiled runs ({label}, onnxruntime {versions[role]}): {top}", flush=True)
    return profiles


def run(args) -> dict:
    """Build (or reuse) the graphs, time them under both venvs, print the table; returns what --out writes."""
    if args.graphs:
        graphs, built = {Path(g).name: str(Path(g).resolve()) for g in args.graphs}, None
    else:
        work = Path(args.work).resolve()
        built = build_graphs(args.model, work)
        graphs = {label: str(work / rel) for label, rel in built["graphs"].items()}
    info = machine()
    versions, rows = time_graphs(args, graphs)
    info["load_avg_end"] = list(os.getloadavg())
    print(f"\n{info['cpu_model']}; {args.threads} threads, {args.rounds} rounds; load average "
          f"{info['load_avg_start'][0]:.2f} before, {info['load_avg_end'][0]:.2f} after (median ms; ratio current / training)")
    print(table(versions, rows), flush=True)
    profiles = kernel_profiles(args, graphs, versions) if args.profile else {}
    return {"schema_version": SCHEMA_VERSION, "machine": info, "venvs": dict(zip(ROLES, args.venvs)), "versions": versions,
            "threads": args.threads, "rounds": args.rounds, "iters": args.iters, "shapes": args.shapes,
            "settings": args.settings, "graphs": graphs, "built": built, "rows": rows, "profiles": profiles}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="The same ONNX graphs under the two stacks' ONNX Runtimes, in alternating "
                                "processes (make bench-stacks).")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--graph", help=argparse.SUPPRESS)
    p.add_argument("--setting", default="workbench", help=argparse.SUPPRESS)
    p.add_argument("--profile-prefix", default="", help=argparse.SUPPRESS)
    p.add_argument("--graphs", nargs="+", help="ONNX files to time (default: build --model's fused FP32 and INT8 graphs)")
    p.add_argument("--model", default="minilm", help="what to build the graphs from without --graphs: 'minilm', "
                   "'tiny' or a checkpoint folder")
    p.add_argument("--work", default="runs/bench/stacks", help="where the built graphs go (and are found again)")
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
        return 0
    refusal = bad_input(args)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    result = run(args)
    if args.out:
        from workbench.runs import atomic_write_json

        atomic_write_json(args.out, result)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
