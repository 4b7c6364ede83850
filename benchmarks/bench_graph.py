"""Graph benchmark: PyTorch eager vs ONNX Runtime unoptimized vs each optimized variant
(session levels basic/extended/all, transformer optimizer), on MiniLM, over a few shapes.

Everything is measured in one process and one run, with the same synthetic batches, warm-up
first and medians reported (workbench.core.latency.measure); PyTorch is timed before any ONNX Runtime
session exists. Prints a table, writes JSON to --out.

    .venv/bin/python benchmarks/bench_graph.py --out runs/bench/bench_graph.json [--quick]
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench_graph.json", help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="two shapes, 5 timed runs each (a smoke run)")
    parser.add_argument("--model", default="minilm", help="'minilm', 'tiny' or a model folder")
    parser.add_argument("--shapes", type=shapes_arg, help="BATCHxSEQ,... (default 1x32,1x128,8x128; quick: 1x32,1x128)")
    parser.add_argument("--repeats", type=int, help="timed runs per shape (default 30; quick: 5)")
    parser.add_argument("--warmup", type=int, help="untimed runs per shape first (default 5; quick: 2)")
    parser.add_argument("--threads", type=int, help="intra-op threads for both runtimes (default: each runtime's own)")
    parser.add_argument("--work", help="folder for the graphs (default: a temporary folder)")
    args = parser.parse_args(argv)

    import onnxruntime
    import torch

    from workbench.graph import ExportConfig, run_export
    from workbench.graph import FusionConfig, run_fusion, summary, table

    shapes = args.shapes or (((1, 32), (1, 128)) if args.quick else ((1, 32), (1, 128), (8, 128)))
    repeats = args.repeats or (5 if args.quick else 30)
    warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    work_ctx = tempfile.TemporaryDirectory(prefix="bench_graph_") if args.work is None else None
    work = Path(args.work) if args.work else Path(work_ctx.name)

    t0 = time.perf_counter()
    exported = run_export(args.model, ExportConfig.quick(validation_examples=16 if args.quick else 64), work)
    export_s = time.perf_counter() - t0
    cfg = FusionConfig(shapes=shapes, warmup=warmup, repeats=repeats, threads=args.threads, max_seconds_per_shape=60.0)
    t0 = time.perf_counter()
    report = run_fusion(exported, cfg, work)
    fusion_s = time.perf_counter() - t0

    print(f"model: {args.model} ({exported.model_info.num_parameters / 1e6:.1f}M parameters, "
          f"{exported.attn_implementation} attention, opset {exported.opset}); threads: {args.threads or 'runtime default'}; "
          f"{warmup} warm-up + {repeats} timed runs per shape")
    print(table(report))

    result = {
        "benchmark": "graph",
        "command": [sys.executable, *sys.argv],
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "python": platform.python_version(),
                    "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
                    "torch_threads_default": torch.get_num_threads()},
        "model": args.model, "quick": args.quick, "shapes": [list(s) for s in shapes], "warmup": warmup,
        "repeats": repeats, "threads": args.threads, "export_seconds": export_s, "fusion_seconds": fusion_s,
        "speedup_vs_unoptimized": report.speedups("unoptimized"),
        "latency": {
            "pytorch": [{"batch": s.batch, "seq": s.seq, "median_ms": s.stats.median_ms, "p90_ms": s.stats.p90_ms,
                         "min_ms": s.stats.min_ms, "repeats": s.stats.repeats} for s in report.pytorch_latency],
            **{v.name.value: [{"batch": s.batch, "seq": s.seq, "median_ms": s.stats.median_ms, "p90_ms": s.stats.p90_ms,
                               "min_ms": s.stats.min_ms, "repeats": s.stats.repeats} for s in v.latency]
               for v in report.variants},
        },
        **summary(report),
    }
    out = Path(args.out)
    from workbench.runs import atomic_write_text

    atomic_write_text(out, json.dumps(result, indent=2, allow_nan=False) + "\n")
    print(f"\nwrote {out}")
    if work_ctx is not None:
        work_ctx.cleanup()
    return 0 if report.all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
