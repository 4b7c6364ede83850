"""GPU benchmark: the H100 table of docs/benchmarks/index.md through the workbench's own code, in one run on one GPU.

Rows (median ms per batch, sequence 128, batch 1 and 32 by default): PyTorch eager FP32, PyTorch
SDPA FP16, torch.compile reduce-overhead FP16 (CUDA graphs), ONNX Runtime CUDA exported FP32,
fused FP32, fused FP16, fused FP16 + CUDA graph (I/O binding, inputs and outputs on the device).
Everything comes from one ``run_fusion(..., FusionConfig.gpu())``: the same synthetic batches, warm-up
first, ``torch.cuda.synchronize`` inside every timed PyTorch call. Also printed: where each graph's
nodes ran, the Memcpy nodes ONNX Runtime inserted, why a CUDA graph was refused, the FP16
validation, and the goal (fused FP16 + CUDA graph >= 2.5x torch.compile at batch 1, >= 1.5x at
batch 32).

Without a CUDA device and ONNX Runtime's CUDA provider it measures nothing: it prints why and what
to install, writes ``{"skipped": reason}`` and exits 0 (``--require-gpu``: exit 2), so ``make bench``
runs on CPU machines. ``--cpu-dry-run`` runs the same code path on the CPU provider with the tiny
model (FP16 validated, no CUDA graphs, no PyTorch GPU peers) to check the script; those are not GPU
figures and are labelled so.

    .venv-gpu-infer/bin/python benchmarks/bench_gpu.py --out runs/bench/bench_gpu.json [--model minilm]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from workbench.core.options import shapes_arg

GOALS = {1: 2.5, 32: 1.5}  # fused FP16 + CUDA graph vs torch.compile reduce-overhead, per batch size
ROWS = (  # (label, where in the report)
    ("PyTorch eager FP32", ("pytorch", None)),
    ("PyTorch SDPA FP16", ("peer", "sdpa_fp16")),
    ("torch.compile reduce-overhead FP16 (CUDA graphs)", ("peer", "compile_fp16")),
    ("ONNX Runtime {dev}, exported FP32", ("variant", "unoptimized")),
    ("ONNX Runtime {dev}, fused FP32", ("variant", "transformer")),
    ("ONNX Runtime {dev}, fused FP16", ("variant", "transformer_fp16")),
    ("ONNX Runtime {dev}, fused FP16 + CUDA graph", ("graph", "transformer_fp16")),
)


def rows(report) -> list[tuple[str, dict[tuple[int, int], float]]]:
    """(label, {(batch, seq): median ms}) for every row of the table that this report measured."""
    dev = "CUDA" if report.device != "cpu" else "CPU"
    names = {v.name.value: v for v in report.variants}
    out = []
    for label, (kind, key) in ROWS:
        lat = {"pytorch": lambda: report.pytorch_latency,
               "peer": lambda: report.pytorch_peers.get(key, []),
               "variant": lambda: names[key].latency if key in names else [],
               "graph": lambda: report.cuda_graph_latency.get(key, [])}[kind]()
        if lat:
            out.append((label.format(dev=dev), {(s.batch, s.seq): s.stats.median_ms for s in lat}))
    return out


def goal_check(report) -> list[dict]:
    """Fused FP16 + CUDA graph vs torch.compile reduce-overhead, per shape whose batch has a goal."""
    graph = {(s.batch, s.seq): s.stats.median_ms for s in report.cuda_graph_latency.get("transformer_fp16", [])}
    comp = {(s.batch, s.seq): s.stats.median_ms for s in report.pytorch_peers.get("compile_fp16", [])}
    checks = []
    for shape in sorted(set(graph) & set(comp)):
        goal = GOALS.get(shape[0])
        ratio = comp[shape] / graph[shape]
        checks.append({"shape": list(shape), "ort_ms": graph[shape], "compile_ms": comp[shape], "speedup": ratio,
                       "goal": goal, "met": None if goal is None else ratio >= goal})
    return checks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench_gpu.json", help="JSON file to write")
    parser.add_argument("--model", default=None, help="'minilm' (default), 'tiny' or a model folder")
    parser.add_argument("--shapes", type=shapes_arg, help="BATCHxSEQ,... (default 1x128,32x128)")
    parser.add_argument("--repeats", type=int, help="timed runs per shape (default 100; quick: 10)")
    parser.add_argument("--warmup", type=int, help="untimed runs per shape first (default 10; quick: 3)")
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke run)")
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (default cuda)")
    parser.add_argument("--require-gpu", action="store_true", help="exit 2 instead of 0 when there is no usable GPU")
    parser.add_argument("--cpu-dry-run", action="store_true",
                        help="run the same code path on the CPU provider with the tiny model (not GPU figures)")
    parser.add_argument("--work", help="folder for the graphs (default: a temporary folder)")
    args = parser.parse_args(argv)

    from workbench.runtime.device import DeviceError, cuda_facts, require_device
    from workbench.runs import atomic_write_text

    out = Path(args.out)
    facts = cuda_facts()
    machine = {"platform": platform.platform(), "processor": platform.processor(), "python": platform.python_version(),
               "torch": facts.torch_version, "torch_cuda": facts.torch_cuda_build, "onnxruntime": facts.ort_dists,
               "gpus": [f"{n} (compute capability {c})" for n, c in zip(facts.device_names, facts.capabilities)]}
    if not args.cpu_dry_run:
        try:
            device = require_device(args.device, facts)
        except DeviceError as exc:
            reason = str(exc)
            print(f"GPU benchmark skipped, nothing measured: {reason}")
            atomic_write_text(out, json.dumps({"benchmark": "gpu", "skipped": reason, "machine": machine}, indent=2) + "\n")
            print(f"wrote {out}")
            return 2 if args.require_gpu else 0
        if device == "cpu":
            print("GPU benchmark: --device cpu is not a GPU; use benchmarks/bench_graph.py or --cpu-dry-run", file=sys.stderr)
            return 2
    else:
        device = "cpu"

    from workbench.graph import ExportConfig, run_export
    from workbench.graph import FusionConfig, run_fusion, summary, table

    model = args.model or ("tiny" if args.cpu_dry_run else "minilm")
    shapes = args.shapes or (((1, 16), (2, 16)) if args.cpu_dry_run else ((1, 128), (32, 128)))
    repeats = args.repeats or (3 if args.cpu_dry_run else 10 if args.quick else 100)
    warmup = args.warmup if args.warmup is not None else (1 if args.cpu_dry_run else 3 if args.quick else 10)
    work_ctx = tempfile.TemporaryDirectory(prefix="bench_gpu_") if args.work is None else None
    work = Path(args.work) if args.work else Path(work_ctx.name)

    t0 = time.perf_counter()
    exported = run_export(model, ExportConfig.quick(validation_examples=16 if args.cpu_dry_run or args.quick else 64), work)
    export_s = time.perf_counter() - t0
    if args.cpu_dry_run:
        # one thread: on a small shared CPU PyTorch's default thread pool next to ONNX Runtime's was 100x slower
        cfg = FusionConfig.gpu(device="cpu", cuda_graph=False, shapes=shapes, warmup=warmup, repeats=repeats,
                               threads=1, max_seconds_per_shape=10.0)
    else:
        cfg = FusionConfig.gpu(device=device, shapes=shapes, warmup=warmup, repeats=repeats, max_seconds_per_shape=120.0)
    t0 = time.perf_counter()
    report = run_fusion(exported, cfg, work)
    fusion_s = time.perf_counter() - t0

    where = (f"{', '.join(machine['gpus'])}" if device != "cpu"
             else "the CPU provider: a dry run of the GPU benchmark's code path, NOT GPU figures")
    print(f"model: {model} ({exported.model_info.num_parameters / 1e6:.1f}M parameters, opset {exported.opset}); "
          f"device: {where}; {warmup} warm-up + {repeats} timed runs per shape; torch {facts.torch_version}, "
          f"onnxruntime {', '.join(f'{d} {v}' for d, v in facts.ort_dists.items())}")
    table_rows = rows(report)
    width = max(len(label) for label, _ in table_rows)
    print(f"\n{'variant':<{width}} " + " ".join(f"{f'{b}x{s} ms':>12}" for b, s in shapes))
    for label, med in table_rows:
        print(f"{label:<{width}} " + " ".join(f"{med[s]:>12.3f}" if s in med else f"{'-':>12}" for s in shapes))
    fp16 = report.variant("transformer_fp16").validation
    print(f"\nFP16 validation (vs fused FP32, on {device}): {fp16.message}")
    goals = goal_check(report)
    for g in goals:
        verdict = "no goal" if g["goal"] is None else ("met" if g["met"] else "NOT met")
        print(f"goal {g['shape'][0]}x{g['shape'][1]}: fused FP16 + CUDA graph {g['ort_ms']:.3f} ms vs torch.compile "
              f"{g['compile_ms']:.3f} ms = {g['speedup']:.2f}x (goal {g['goal']}x: {verdict})")
    print("\n" + table(report))

    result = {
        "benchmark": "gpu", "command": [sys.executable, *sys.argv], "machine": machine, "device": device,
        "dry_run_on_cpu": bool(args.cpu_dry_run), "model": model, "shapes": [list(s) for s in shapes],
        "warmup": warmup, "repeats": repeats, "export_seconds": export_s, "fusion_seconds": fusion_s,
        "rows": [{"variant": label, "median_ms": {f"{b}x{s}": ms for (b, s), ms in med.items()}} for label, med in table_rows],
        "fp16_validation": {"passed": fp16.passed, "max_abs_diff": fp16.max_abs_diff, "tolerance": fp16.tolerance,
                            "label_agreement": fp16.label_agreement},
        "goals": goals, **summary(report),
    }
    atomic_write_text(out, json.dumps(result, indent=2, allow_nan=False) + "\n")
    print(f"\nwrote {out}")
    if work_ctx is not None:
        work_ctx.cleanup()
    ok = report.all_passed and all(g["met"] is not False for g in goals)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
