"""Training benchmark: eager PyTorch vs ORTModule vs torch.compile on MiniLM, plus the ONNX
Runtime knobs tried to close the ORTModule gap on this CPU, all measured side by side in one run.

Every variant runs in its own process (``run_training_isolated``), so peak RSS, thread pools and
compile caches are its own. Figures: median step time after the start-up steps (the first two),
samples/s, peak RSS, start-up (first step: export + graph build, or compilation), and the ratio
to eager of the same shape. Timings are printed and written as JSON; nothing here asserts them.

    .venv/bin/python benchmarks/bench_train.py --out runs/bench/bench_train.json            # full
    .venv/bin/python benchmarks/bench_train.py --out /tmp/bench_train.json --quick          # smoke
    .venv/bin/python benchmarks/bench_train.py --variants eager ortmodule ort-no-spin --shapes 16x128
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.runs import atomic_write_json  # noqa: E402
from workbench.train import TrainConfig, run_training_isolated  # noqa: E402

# name -> (backend, TrainConfig overrides, what it tries)
VARIANTS: dict[str, tuple[str, dict, str]] = {
    "eager": ("eager", {}, "PyTorch eager, AdamW (foreach): the baseline"),
    "compile": ("compile", {}, "torch.compile (Inductor, default mode), fixed shapes"),
    "ortmodule": ("ortmodule", {}, "ORTModule untuned (opset 17, ORT's default threads, spinning on)"),
    "ort-no-spin": ("ortmodule", {"ort_allow_spinning": False}, "ORT intra-op threads sleep when idle (they no longer spin while PyTorch runs the optimizer)"),
    "ort-1-thread": ("ortmodule", {"ort_threads": 1}, "ORT session with 1 intra-op thread"),
    "ort-opset14": ("ortmodule", {"opset": 14}, "export at opset 14"),
    "ort-opset18": ("ortmodule", {"opset": 18}, "export at opset 18"),
    "ort-extended": ("ortmodule", {"ort_graph_optimization": "extended"}, "session graph optimization 'extended' instead of 'all' (no layout transforms)"),
    "ort-basic": ("ortmodule", {"ort_graph_optimization": "basic"}, "session graph optimization 'basic' (no fusions at session level)"),
    "ort-no-compute-opt": ("ortmodule", {"ort_compute_optimizer": False}, "ORTModule's compute optimizer off"),
    "ort-recompute": ("ortmodule", {"memory_optimizer_level": 1}, "memory optimizer level 1 (layer-wise recompute): trades time for memory"),
    "eager-fused-adamw": ("eager", {"optimizer": "adamw_fused"}, "eager with torch's fused AdamW kernel"),
    "ort-fused-adamw": ("ortmodule", {"optimizer": "adamw_fused"}, "ORTModule with torch's fused AdamW kernel (ORT's FusedAdam is CUDA-only)"),
    "ort-best": ("ortmodule", {"optimizer": "adamw_fused", "ort_allow_spinning": False}, "fused AdamW + no spinning"),
}
DEFAULT_VARIANTS = ("eager", "compile", "ortmodule", "ort-no-spin", "ort-1-thread", "ort-opset14", "ort-opset18",
                    "ort-extended", "ort-basic", "ort-no-compute-opt", "ort-recompute", "eager-fused-adamw",
                    "ort-fused-adamw", "ort-best")
DEFAULT_SHAPES = ("16x128", "32x64")


def parse_shape(text: str) -> tuple[int, int]:
    try:
        b, s = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"shape must look like BATCHxSEQ (e.g. 16x128), got {text!r}") from None
    return b, s


def run_variant(name: str, batch: int, seq: int, steps: int, model: str, run_dir: Path, threads: int | None) -> dict:
    backend, overrides, what = VARIANTS[name]
    cfg = TrainConfig.bench(model=model, batch_size=batch, max_length=seq, max_steps=steps, threads=threads,
                            lr=1e-3 if model == "tiny" else 5e-5, **overrides)
    t0 = time.perf_counter()
    run = run_training_isolated(cfg, backend, run_dir / f"{batch}x{seq}" / name)
    timed = [s.step_s for s in run.timed_steps()]
    return {
        "variant": name, "backend": backend, "what": what, "overrides": overrides, "batch": batch, "seq": seq,
        "status": run.status.value, "reason": run.reason, "executed_in_onnxruntime": run.executed_in_onnxruntime,
        "steps": len(run.steps), "median_step_s": run.median_step_s,
        "min_step_s": min(timed) if timed else math.nan, "max_step_s": max(timed) if timed else math.nan,
        "samples_per_s": run.samples_per_s, "peak_rss_mib": run.peak_memory_mib,
        "rss_before_model_mib": run.memory_baseline_mib, "startup_s": run.startup_s, "setup_s": run.setup_s,
        "wall_s": time.perf_counter() - t0, "losses": run.losses,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench_train.json")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny model, 6 steps, eager/ortmodule/compile, one shape")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per variant (the first 2 are start-up)")
    parser.add_argument("--shapes", nargs="*", default=list(DEFAULT_SHAPES), help="BATCHxSEQ, every batch padded to SEQ")
    parser.add_argument("--variants", nargs="*", default=list(DEFAULT_VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.steps, args.shapes, args.variants = "tiny", 6, ["16x64"], ["eager", "ortmodule", "compile"]
    shapes = [parse_shape(s) for s in args.shapes]
    out = Path(args.out)
    run_root = Path(tempfile.mkdtemp(prefix="bench_train."))
    load = os.getloadavg()
    rows: list[dict] = []
    print(f"bench_train: model {args.model}, {args.steps} steps per variant, shapes {args.shapes}, "
          f"{os.cpu_count()} CPUs, load average before start {load[0]:.2f}", flush=True)
    for batch, seq in shapes:
        for name in args.variants:
            print(f"  {batch}x{seq} {name} ...", end="", flush=True)
            row = run_variant(name, batch, seq, args.steps, args.model, run_root, args.threads)
            row["load_avg_1m_after"] = os.getloadavg()[0]
            rows.append(row)
            print(f" {row['status']}, median {row['median_step_s'] * 1000:.0f} ms, load {row['load_avg_1m_after']:.2f}", flush=True)
    for row in rows:
        base = next((r for r in rows if r["variant"] == "eager" and (r["batch"], r["seq"]) == (row["batch"], row["seq"])), None)
        ok = base is not None and base["status"] == "ok" and row["status"] == "ok"
        row["speed_vs_eager"] = base["median_step_s"] / row["median_step_s"] if ok else None
        row["memory_vs_eager"] = row["peak_rss_mib"] / base["peak_rss_mib"] if ok else None
        row["max_loss_diff_vs_eager"] = max(abs(a - b) for a, b in zip(base["losses"], row["losses"])) if ok and row["losses"] else None
    print(table(rows))
    atomic_write_json(out, {
        "benchmark": "bench_train", "model": args.model, "steps": args.steps, "quick": args.quick,
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "load_avg_at_start": load},
        "note": "median step after 2 start-up steps; each variant in its own process; ratios are vs eager of the same "
                "shape in this run. The machine may be shared: compare ratios within one run, not absolute times across runs.",
        "rows": rows,
    })
    print(f"wrote {out}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def table(rows: list[dict]) -> str:
    head = f"{'shape':<7} {'variant':<19} {'status':<9} {'median ms':>9} {'min ms':>7} {'samples/s':>9} {'vs eager':>8} " \
           f"{'peak MiB':>8} {'mem x':>6} {'start-up s':>10} {'max dloss':>9}"
    lines = [head, "-" * len(head)]
    f = lambda v, spec: "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)  # noqa: E731
    for r in rows:
        lines.append(
            f"{r['batch']}x{r['seq']:<4} {r['variant']:<19} {r['status']:<9} {f(r['median_step_s'] * 1000, '.0f'):>9} "
            f"{f(r['min_step_s'] * 1000, '.0f'):>7} {f(r['samples_per_s'], '.1f'):>9} {f(r['speed_vs_eager'], '.2f'):>7}x "
            f"{f(r['peak_rss_mib'], '.0f'):>8} {f(r['memory_vs_eager'], '.2f'):>5}x {f(r['startup_s'], '.1f'):>10} "
            f"{f(r['max_loss_diff_vs_eager'], '.1e'):>9}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
