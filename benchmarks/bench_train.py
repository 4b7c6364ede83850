"""Training benchmark: eager PyTorch vs ORTModule vs torch.compile on MiniLM, plus the ONNX
Runtime knobs tried to close the ORTModule gap on this CPU, measured side by side in one run.

Two parts, because a shared 2-core machine changes speed from minute to minute:

1. **Interleaved step times** (one process). One :class:`workbench.train.Trainer` per variant,
   all built first, then stepped in rotation: step 1 of every variant, step 2 of every variant,
   ... (the order rotates each round). Whatever load the machine has hits every variant alike, so
   the *ratios* hold even when absolute times drift. The first ``--warmup`` steps of each variant
   (export/graph build, compilation, recompilation) are left out of the medians. Every variant
   trains the same batches from the same seed, so the largest loss difference to eager is
   reported too.
2. **Isolated runs** (one process per backend, ``run_training_isolated``): start-up cost (first
   step, including export or compilation) and peak RSS, which in a shared process would mix the
   variants' memory.

Every variant starts from the *untuned* settings (``ORTMODULE_OWN_DEFAULTS``: ORTModule's own opset
17 and thread spinning, torch's foreach AdamW) and changes only what its name says; the tuned set
that ``TrainConfig`` defaults to (``TUNED_DEFAULTS``) is the variant ``ort-opset14-fused-no-spin``.
Each row records the settings it ran with.

Prints a table and writes JSON (``--out``). Nothing here asserts a timing.

    .venv/bin/python benchmarks/bench_train.py --out runs/bench/bench_train.json            # full
    .venv/bin/python benchmarks/bench_train.py --out /tmp/bench_train.json --quick          # smoke
    .venv/bin/python benchmarks/bench_train.py --shapes 16x128 --variants eager ortmodule ort-no-spin
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.core.options import parse_shapes  # noqa: E402
from workbench.runs import atomic_write_json  # noqa: E402
from workbench.train import (  # noqa: E402
    DEFAULT_BACKENDS,
    ORTMODULE_OWN_DEFAULTS,
    STEP_WARMUP,
    TUNED_DEFAULTS,
    TrainConfig,
    Trainer,
    run_training_isolated,
)

# Every variant starts from the *untuned* settings, ORTModule's own defaults (opset 17, spinning on,
# torch's foreach AdamW: ORTMODULE_OWN_DEFAULTS), not from TrainConfig's defaults (the tuned set
# these variants found: TUNED_DEFAULTS); each variant then changes what it names from there.
UNTUNED = dict(ORTMODULE_OWN_DEFAULTS)
# the knobs the two sets differ in, recorded in every row
SETTINGS = tuple(sorted(set(ORTMODULE_OWN_DEFAULTS) | set(TUNED_DEFAULTS)))
# name -> (backend, TrainConfig overrides on top of UNTUNED, what it tries)
VARIANTS: dict[str, tuple[str, dict, str]] = {
    "eager": ("eager", {}, "PyTorch eager, AdamW (foreach): the baseline"),
    "compile": ("compile", {}, "torch.compile (Inductor, default mode), fixed shapes"),
    "ortmodule": ("ortmodule", {}, "ORTModule untuned (opset 17, ORT's default threads, spinning on, graph opt 'all')"),
    "ort-no-spin": ("ortmodule", {"ort_allow_spinning": False}, "ORT's intra-op threads sleep when idle instead of spinning (they otherwise compete with PyTorch's optimizer step)"),
    "ort-1-thread": ("ortmodule", {"ort_threads": 1}, "ORT session with 1 intra-op thread"),
    "ort-opset14": ("ortmodule", {"opset": 14}, "export at opset 14"),
    "ort-opset18": ("ortmodule", {"opset": 18}, "export at opset 18"),
    "ort-basic": ("ortmodule", {"ort_graph_optimization": "basic"}, "session graph optimization 'basic' (no session-level fusions)"),
    "ort-recompute": ("ortmodule", {"memory_optimizer_level": 1}, "memory optimizer level 1 (layer-wise recompute): trades time for memory"),
    "eager-fused-adamw": ("eager", {"optimizer": "adamw_fused"}, "eager with torch's fused AdamW kernel"),
    "ort-fused-adamw": ("ortmodule", {"optimizer": "adamw_fused"}, "ORTModule with torch's fused AdamW kernel (ORT's FusedAdam is CUDA-only)"),
    "ort-fused-no-spin": ("ortmodule", {"optimizer": "adamw_fused", "ort_allow_spinning": False}, "fused AdamW + no spinning"),
    "ort-opset14-fused-no-spin": ("ortmodule", dict(TUNED_DEFAULTS), "opset 14 + fused AdamW + no spinning: the tuned set, TrainConfig's defaults"),
    "eager-sdpa": ("eager", {"attn_implementation": "sdpa"}, "eager with PyTorch's SDPA attention (what a PyTorch user might pick; ORTModule needs eager attention)"),
    "eager-dropout": ("eager", {"dropout": True}, "eager, dropout on (a normal fine-tune)"),
    "ort-dropout": ("ortmodule", {"dropout": True}, "ORTModule, dropout on (Dropout/BitmaskDropout and their gradients in the graph)"),
    "compile-dropout": ("compile", {"dropout": True}, "torch.compile, dropout on"),
}
DEFAULT_VARIANTS = ("eager", "compile", "ortmodule", "ort-no-spin", "ort-1-thread", "ort-opset14", "ort-opset18",
                    "ort-basic", "ort-recompute", "eager-fused-adamw", "ort-fused-adamw", "ort-fused-no-spin",
                    "ort-opset14-fused-no-spin", "eager-sdpa", "eager-dropout", "ort-dropout")
DEFAULT_SHAPES = ("16x128", "32x64")
ISOLATED = tuple(b.value for b in DEFAULT_BACKENDS)  # one variant per backend, named after it
QUICK_VARIANTS = ("eager", "ortmodule", "ort-opset14-fused-no-spin", "compile")


def config_for(name: str, model: str, batch: int, seq: int, steps: int, threads) -> TrainConfig:
    """The variant's config: the benchmark shape, the untuned settings, then the variant's own overrides."""
    _, overrides, _ = VARIANTS[name]
    return TrainConfig.bench(model=model, batch_size=batch, max_length=seq, max_steps=steps, threads=threads,
                             lr=1e-3 if model == "tiny" else 5e-5, **{**UNTUNED, **overrides})


def settings(cfg: TrainConfig) -> dict:
    """The knobs that tell untuned from tuned, as run (JSON-ready)."""
    return {k: getattr(getattr(cfg, k), "value", getattr(cfg, k)) for k in SETTINGS}


def interleaved(names: list[str], model: str, batch: int, seq: int, warmup: int, steps: int, threads) -> list[dict]:
    """Build one Trainer per variant, then step them in rotation; returns one row per variant."""
    from workbench.data.load import class_names
    from workbench.models.load import load_for_data
    from workbench.train import _load_data, explain_failure

    total = warmup + steps
    trainers, rows = {}, {}
    for name in names:
        backend, overrides, what = VARIANTS[name]
        cfg = config_for(name, model, batch, seq, total, threads)
        dd = _load_data(cfg.data)
        loaded = load_for_data(cfg.model, class_names(dd), attn_implementation=cfg.attn_implementation, dropout=cfg.dropout, seed=cfg.seed)
        trainers[name] = Trainer(cfg, backend, loaded, dd["train"], total)
        rows[name] = {"variant": name, "backend": backend, "what": what, "overrides": overrides, "settings": settings(cfg),
                      "batch": batch, "seq": seq,
                      "status": "ok", "reason": "", "step_s": [], "losses": []}
    for i in range(total):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            row = rows[name]
            if row["status"] != "ok":
                continue
            try:
                rec = trainers[name].step()
            except Exception as exc:  # noqa: BLE001 - recorded in the table with its cause, the others go on
                row["status"], row["reason"] = "failed", explain_failure(exc, trainers[name].backend, trainers[name].cfg)
                continue
            row["step_s"].append(rec.step_s)
            row["losses"].append(rec.loss)
        print(f"    round {i + 1}/{total} done, load {os.getloadavg()[0]:.2f}", flush=True)
    out = []
    for name in names:
        row = rows[name]
        timed = row["step_s"][warmup:]
        row["first_step_s"] = row["step_s"][0] if row["step_s"] else math.nan
        row["median_step_s"] = statistics.median(timed) if timed else math.nan
        row["min_step_s"] = min(timed) if timed else math.nan
        row["samples_per_s"] = batch / row["median_step_s"] if timed else math.nan
        row["executed_in_onnxruntime"] = row["backend"] == "ortmodule" and row["status"] == "ok"
        out.append(row)
    base = rows.get("eager")
    for row in out:
        ok = base is not None and base["status"] == "ok" and row["status"] == "ok"
        row["speed_vs_eager"] = base["median_step_s"] / row["median_step_s"] if ok else None
        row["max_loss_diff_vs_eager"] = max(abs(a - b) for a, b in zip(base["losses"], row["losses"])) if ok else None
    return out


def isolated(names: list[str], model: str, batch: int, seq: int, steps: int, threads, root: Path) -> list[dict]:
    rows = []
    for name in names:
        backend = VARIANTS[name][0]
        cfg = config_for(name, model, batch, seq, steps, threads)
        t0 = time.perf_counter()
        # a fresh Inductor cache: the compile start-up is the cold one a new user pays
        env = {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor.", dir=root)} if backend == "compile" else None
        run = run_training_isolated(cfg, backend, root / f"{batch}x{seq}" / name, env=env)
        rows.append({"variant": name, "backend": backend, "settings": settings(cfg), "batch": batch, "seq": seq,
                     "status": run.status.value,
                     "reason": run.reason, "startup_s": run.startup_s, "setup_s": run.setup_s,
                     "peak_rss_mib": run.peak_memory_mib, "rss_before_model_mib": run.memory_baseline_mib,
                     "median_step_s": run.median_step_s, "steps": len(run.steps), "wall_s": time.perf_counter() - t0,
                     "executed_in_onnxruntime": run.executed_in_onnxruntime})
        print(f"    isolated {name}: {run.status.value}, start-up {run.startup_s:.1f} s, peak {run.peak_memory_mib:.0f} MiB", flush=True)
    base = next((r for r in rows if r["variant"] == "eager" and r["status"] == "ok"), None)
    for r in rows:
        r["memory_vs_eager"] = r["peak_rss_mib"] / base["peak_rss_mib"] if base and r["status"] == "ok" else None
    return rows


def fmt(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def table(inter: list[dict], iso: list[dict]) -> str:
    head = f"{'shape':<7} {'variant':<26} {'status':<7} {'median ms':>9} {'min ms':>7} {'samples/s':>9} {'vs eager':>8} {'max dloss':>9}"
    lines = ["interleaved step times (one process, variants stepped in rotation)", head, "-" * len(head)]
    for r in inter:
        lines.append(f"{r['batch']}x{r['seq']:<4} {r['variant']:<26} {r['status']:<7} {fmt(r['median_step_s'] * 1000, '.0f'):>9} "
                     f"{fmt(r['min_step_s'] * 1000, '.0f'):>7} {fmt(r['samples_per_s'], '.1f'):>9} "
                     f"{fmt(r['speed_vs_eager'], '.2f'):>7}x {fmt(r['max_loss_diff_vs_eager'], '.1e'):>9}")
    head = f"{'shape':<7} {'backend':<26} {'status':<7} {'start-up s':>10} {'peak MiB':>8} {'mem vs eager':>12}"
    lines += ["", "isolated runs (one process each): start-up and peak RSS", head, "-" * len(head)]
    for r in iso:
        lines.append(f"{r['batch']}x{r['seq']:<4} {r['variant']:<26} {r['status']:<7} {fmt(r['startup_s'], '.1f'):>10} "
                     f"{fmt(r['peak_rss_mib'], '.0f'):>8} {fmt(r['memory_vs_eager'], '.2f'):>11}x")
    failed = [r for r in inter + iso if r["status"] != "ok"]
    lines += [f"{r['variant']} ({r['batch']}x{r['seq']}): {r['status']}: {r['reason']}" for r in failed]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench_train.json")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: tiny model, {'/'.join(QUICK_VARIANTS)}, one shape, few steps")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant (after --warmup)")
    parser.add_argument("--warmup", type=int, default=STEP_WARMUP, help="steps per variant left out of the medians")
    parser.add_argument("--isolated-steps", type=int, default=4, help="steps of each isolated run (start-up, memory)")
    parser.add_argument("--shapes", nargs="*", default=list(DEFAULT_SHAPES), help="BATCHxSEQ, every batch padded to SEQ")
    parser.add_argument("--variants", nargs="*", default=list(DEFAULT_VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--second-shape-variants", nargs="*", default=["eager", "compile", "ortmodule", "ort-no-spin", "ort-fused-no-spin"],
                        choices=list(VARIANTS), help="variants for shapes after the first (fewer, to keep the run short)")
    parser.add_argument("--no-isolated", action="store_true", help="skip the isolated start-up/memory runs")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.steps, args.warmup, args.isolated_steps = "tiny", 4, STEP_WARMUP, 3
        args.shapes, args.variants, args.second_shape_variants = ["16x64"], list(QUICK_VARIANTS), []
    shapes = [shape for text in args.shapes for shape in parse_shapes(text, error=SystemExit)]
    root = Path(tempfile.mkdtemp(prefix="bench_train."))
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    print(f"bench_train: model {args.model}, {args.warmup}+{args.steps} steps per variant, shapes {args.shapes}, "
          f"{os.cpu_count()} CPUs, load average at start {load0[0]:.2f} (a shared machine: read the ratios)", flush=True)
    inter, iso = [], []
    for k, (batch, seq) in enumerate(shapes):
        names = list(args.variants if k == 0 else args.second_shape_variants)
        if not names:
            continue
        if "eager" not in names:
            names.insert(0, "eager")
        print(f"  {batch}x{seq}: interleaving {', '.join(names)}", flush=True)
        inter += interleaved(names, args.model, batch, seq, args.warmup, args.steps, args.threads)
        if not args.no_isolated:
            iso += isolated([n for n in ISOLATED if n in names], args.model, batch, seq, args.isolated_steps, args.threads, root)
    print(table(inter, iso))
    atomic_write_json(Path(args.out), {
        "benchmark": "bench_train", "model": args.model, "warmup": args.warmup, "steps": args.steps, "quick": args.quick,
        "untuned": UNTUNED, "tuned": TUNED_DEFAULTS,
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "load_avg_at_start": load0, "load_avg_at_end": os.getloadavg(), "wall_s": time.perf_counter() - t_start},
        "note": "interleaved: variants stepped in rotation in one process, medians after warm-up, ratios vs eager of the "
                "same shape; isolated: one process per backend for start-up and peak RSS. The machine may be shared.",
        "interleaved": inter, "isolated": iso,
    })
    print(f"wrote {args.out}")
    return 0 if all(r["status"] == "ok" for r in inter + iso) else 1


if __name__ == "__main__":
    sys.exit(main())
