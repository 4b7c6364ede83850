"""Training benchmark: eager PyTorch vs ORTModule vs torch.compile on MiniLM, plus the ONNX
Runtime knobs tried to close the ORTModule gap on this CPU, measured side by side in one run.

**Like for like.** Every ratio in the headline compares a variant with the eager variant that runs
the same shared settings (optimizer, attention, dropout, precision, batch: everything but the
backend's own knobs, ``workbench.train.shared_differences``): ORTModule with fused AdamW against
eager with fused AdamW, never against eager with foreach AdamW, which would credit ORTModule with
an optimizer that speeds eager up as much. The baseline a variant needs is added to the run when it
was not asked for. Rows that change a PyTorch setting (``eager-fused-adamw``, ``eager-sdpa``, ...)
are reported against plain ``eager`` in a table of their own, labelled as the setting they change.

Two parts, because a shared 2-core machine changes speed from minute to minute:

1. **Interleaved step times.** By default each variant trains in its own process and the processes
   take turns step by step (``workbench.train.run_lockstep``: step 1 of every variant, step 2 of
   every variant, ..., the order rotated each round), so every step runs alone on the machine and
   next in time to the other variants' same step, and no variant's thread pools touch another's
   steps: the method ``make demo`` uses. ``--one-process`` steps all variants in one process
   instead (one :class:`workbench.train.Trainer` each). The first ``--warmup`` steps of each
   variant (export/graph build, compilation, recompilation) are left out; each ratio is the median
   of the per-round ratios with a 95% bootstrap interval (``workbench.core.latency.paired_ratio``).
   Every variant trains the same batches from the same seed: the largest loss difference to its
   baseline is reported too.
2. **Isolated runs** (one process per backend, run one after the other): start-up cost (first
   step, including export or compilation) and peak RSS.

Every variant starts from the *untuned* settings (``ORTMODULE_OWN_DEFAULTS``: ORTModule's own opset
17 and thread spinning, torch's foreach AdamW) and changes only what its name says. The machine's
load is checked before and after (``workbench.perf.machine_profile.check_load``): a run taken while other work
ran says so and its verdicts are "unmeasured".

Prints tables and writes JSON (``--out``). Nothing here asserts a timing.

    .venv/bin/python benchmarks/bench_train.py --out runs/bench/bench_train.json            # full
    .venv/bin/python benchmarks/bench_train.py --out /tmp/bench_train.json --quick          # smoke
    .venv/bin/python benchmarks/bench_train.py --shapes 16x64 16x128 --variants ortmodule ort-opset14-fused-no-spin --no-isolated
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
from workbench.core.latency import paired_ratio  # noqa: E402
from workbench.perf.machine_profile import check_load, combine_checks, machine_profile  # noqa: E402
from workbench.train import (  # noqa: E402
    DEFAULT_BACKENDS,
    ORTMODULE_OWN_DEFAULTS,
    STEP_WARMUP,
    TUNED_DEFAULTS,
    LockstepJob,
    NotLikeForLike,
    TrainConfig,
    Trainer,
    require_like_for_like,
    run_lockstep,
    run_training_isolated,
    settings_text,
    shared_differences,
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
    "ort-no-spin": ("ortmodule", {"ort_allow_spinning": False},
                    "ORT's intra-op threads sleep when idle instead of spinning (they otherwise compete with PyTorch's optimizer step)"),
    "ort-1-thread": ("ortmodule", {"ort_threads": 1}, "ORT session with 1 intra-op thread"),
    "ort-opset14": ("ortmodule", {"opset": 14}, "export at opset 14"),
    "ort-opset18": ("ortmodule", {"opset": 18}, "export at opset 18"),
    "ort-basic": ("ortmodule", {"ort_graph_optimization": "basic"}, "session graph optimization 'basic' (no session-level fusions)"),
    "ort-recompute": ("ortmodule", {"memory_optimizer_level": 1},
                      "memory optimizer level 1 (layer-wise recompute): trades time for memory"),
    "eager-fused-adamw": ("eager", {"optimizer": "adamw_fused"}, "eager with torch's fused AdamW kernel"),
    "ort-fused-adamw": ("ortmodule", {"optimizer": "adamw_fused"},
                        "ORTModule with torch's fused AdamW kernel (ORT's FusedAdam is CUDA-only)"),
    "ort-fused-no-spin": ("ortmodule", {"optimizer": "adamw_fused", "ort_allow_spinning": False}, "fused AdamW + no spinning"),
    "ort-opset14-fused-no-spin": ("ortmodule", dict(TUNED_DEFAULTS),
                                  "opset 14 + fused AdamW + no spinning: the tuned set, TrainConfig's defaults"),
    "eager-sdpa": ("eager", {"attn_implementation": "sdpa"},
                   "eager with PyTorch's SDPA attention (what a PyTorch user might pick; ORTModule needs eager attention)"),
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


def baseline_for(name: str, model: str, batch: int, seq: int, steps: int, threads) -> str:
    """The eager variant that runs every shared setting ``name`` runs (like for like); for an eager
    variant, itself. Raises NotLikeForLike when VARIANTS has none."""
    cfg = config_for(name, model, batch, seq, steps, threads)
    for cand, (backend, _, _) in VARIANTS.items():
        if backend == "eager" and not shared_differences(cfg, config_for(cand, model, batch, seq, steps, threads)):
            return cand
    raise NotLikeForLike(f"no eager variant in VARIANTS runs {name}'s shared settings ({settings_text(cfg)}); add one")


def with_baselines(names: list[str], model: str, batch: int, seq: int, steps: int, threads) -> list[str]:
    """``names`` plus the like-for-like baseline of each, and plain ``eager`` (the settings table's
    reference), each once, baselines first."""
    need = ["eager"] + [baseline_for(n, model, batch, seq, steps, threads) for n in names]
    return list(dict.fromkeys(need + list(names)))


def _row(name: str, cfg: TrainConfig, batch: int, seq: int) -> dict:
    backend, overrides, what = VARIANTS[name]
    return {"variant": name, "backend": backend, "what": what, "overrides": overrides, "settings": settings(cfg),
            "shared_settings": settings_text(cfg), "batch": batch, "seq": seq,
            "status": "ok", "reason": "", "step_s": [], "losses": [], "executed_in_onnxruntime": False}


def interleaved_one_process(names: list[str], model: str, batch: int, seq: int, warmup: int, steps: int, threads) -> list[dict]:
    """One Trainer per variant in this process, stepped in rotation; one row per variant."""
    from workbench.data.load import class_names
    from workbench.models.load import load_for_data
    from workbench.train import load_train_data, explain_failure

    total = warmup + steps
    trainers, rows = {}, {}
    for name in names:
        cfg = config_for(name, model, batch, seq, total, threads)
        dd = load_train_data(cfg.data)
        loaded = load_for_data(cfg.model, class_names(dd), attn_implementation=cfg.attn_implementation, dropout=cfg.dropout, seed=cfg.seed)
        trainers[name] = Trainer(cfg, VARIANTS[name][0], loaded, dd["train"], total)
        rows[name] = _row(name, cfg, batch, seq)
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
    for name in names:
        t = trainers[name]
        rows[name]["executed_in_onnxruntime"] = bool(rows[name]["status"] == "ok" and t.ort_module is not None)
    return [rows[n] for n in names]


def interleaved_lockstep(names: list[str], model: str, batch: int, seq: int, warmup: int, steps: int, threads,
                         root: Path) -> list[dict]:
    """Each variant in its own process, the processes taking turns step by step (run_lockstep)."""
    total = warmup + steps
    cfgs = {n: config_for(n, model, batch, seq, total, threads) for n in names}
    jobs = [LockstepJob(cfgs[n], VARIANTS[n][0], root / f"{batch}x{seq}" / n) for n in names]
    done = {"n": 0}

    def progress(p) -> None:
        if p.phase == "train" and p.step > done["n"]:
            done["n"] = p.step
            print(f"    step {p.step}/{total} reached, load {os.getloadavg()[0]:.2f}", flush=True)

    runs = run_lockstep(jobs, progress=progress)
    rows = []
    for name, run in zip(names, runs):
        row = _row(name, cfgs[name], batch, seq)
        row["step_s"] = [st.step_s for st in run.steps]
        row["losses"] = [st.loss for st in run.steps]
        row["executed_in_onnxruntime"] = run.executed_in_onnxruntime
        if run.status.value not in ("ok", "stopped") or not run.steps:
            row["status"], row["reason"] = run.status.value, run.reason
        rows.append(row)
    return rows


def add_ratios(rows: list[dict], warmup: int, model: str, threads) -> list[dict]:
    """Medians after warm-up, and each row's speed against its like-for-like baseline (headline) and,
    for eager variants, against plain eager (a PyTorch setting, labelled as such)."""
    by_name = {r["variant"]: r for r in rows}
    for row in rows:
        timed = row["step_s"][warmup:]
        row["first_step_s"] = row["step_s"][0] if row["step_s"] else math.nan
        row["median_step_s"] = statistics.median(timed) if timed else math.nan
        row["min_step_s"] = min(timed) if timed else math.nan
        row["samples_per_s"] = row["batch"] / row["median_step_s"] if timed else math.nan
    for row in rows:
        steps = len(row["step_s"])
        own = baseline_for(row["variant"], model, row["batch"], row["seq"], steps, threads)
        ref = "eager" if row["backend"] == "eager" else own
        row["baseline"] = ref
        row["comparison"] = ("backend" if row["backend"] != "eager" else
                             ("baseline" if row["variant"] == "eager" else "pytorch setting"))
        base = by_name.get(ref)
        row["speed_vs_baseline"] = row["interval"] = row["max_loss_diff_vs_baseline"] = None
        if row["variant"] == ref or base is None or base["status"] != "ok" or row["status"] != "ok":
            continue
        if row["comparison"] == "backend":  # a headline ratio: the two sides must share every setting
            require_like_for_like(config_for(row["variant"], model, row["batch"], row["seq"], steps, threads),
                                  config_for(ref, model, row["batch"], row["seq"], steps, threads),
                                  f"{row['variant']} against {ref}")
        n = min(len(base["step_s"]), len(row["step_s"]))
        if n - warmup >= 2:
            r = paired_ratio(base["step_s"][warmup:n], row["step_s"][warmup:n])
            row["speed_vs_baseline"], row["interval"] = r.value, [r.lo, r.hi]
            row["verdict"] = "faster" if r.is_gain else ("slower" if r.is_loss else "no measurable difference")
        row["max_loss_diff_vs_baseline"] = max(abs(a - b) for a, b in zip(base["losses"], row["losses"]))
    return rows


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


def ratio_text(r: dict) -> str:
    if r.get("speed_vs_baseline") is None:
        return "-"
    lo, hi = r["interval"]
    return f"{r['speed_vs_baseline']:.2f}x ({lo:.2f}-{hi:.2f})"


def table(inter: list[dict], iso: list[dict]) -> str:
    head = (f"{'shape':<7} {'variant':<26} {'status':<7} {'median ms':>9} {'like-for-like baseline':<22} "
            f"{'base ms':>7} {'vs baseline (95%)':>19} {'max dloss':>9}")
    lines = ["backends, like for like: each variant against the eager variant with the same shared settings "
             "(optimizer, attention, dropout, precision, batch); steps interleaved", head, "-" * len(head)]
    by = {(r["batch"], r["seq"], r["variant"]): r for r in inter}
    for r in inter:
        if r["comparison"] != "backend":
            continue
        base = by.get((r["batch"], r["seq"], r["baseline"]), {})
        lines.append(f"{r['batch']}x{r['seq']:<4} {r['variant']:<26} {r['status']:<7} {fmt(r['median_step_s'] * 1000, '.0f'):>9} "
                     f"{r['baseline']:<22} {fmt(base.get('median_step_s', math.nan) * 1000, '.0f'):>7} {ratio_text(r):>19} "
                     f"{fmt(r['max_loss_diff_vs_baseline'], '.1e'):>9}")
    settings_rows = [r for r in inter if r["comparison"] != "backend"]
    if settings_rows:
        head2 = f"{'shape':<7} {'eager variant':<26} {'status':<7} {'median ms':>9} {'what it changes':<44} {'vs eager (95%)':>19}"
        lines += ["", "PyTorch settings (not a backend): eager variants against plain eager (foreach AdamW, eager attention, "
                  "dropout off); a backend's gain is only ever read against the same setting", head2, "-" * len(head2)]
        for r in settings_rows:
            lines.append(f"{r['batch']}x{r['seq']:<4} {r['variant']:<26} {r['status']:<7} {fmt(r['median_step_s'] * 1000, '.0f'):>9} "
                         f"{r['what'][:44]:<44} {('baseline' if r['variant'] == 'eager' else ratio_text(r)):>19}")
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
    parser.add_argument("--one-process", action="store_true",
                        help="step every variant in this one process instead of one process each taking turns")
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.steps, args.warmup, args.isolated_steps = "tiny", 4, STEP_WARMUP, 3
        args.shapes, args.variants, args.second_shape_variants = ["16x64"], list(QUICK_VARIANTS), []
    shapes = [shape for text in args.shapes for shape in parse_shapes(text, error=SystemExit)]
    root = Path(tempfile.mkdtemp(prefix="bench_train."))
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    profile = machine_profile()
    before = check_load(profile)
    method = "one process, variants stepped in rotation" if args.one_process else "one process per variant, taking turns step by step"
    print(f"bench_train: model {args.model}, {args.warmup}+{args.steps} steps per variant, shapes {args.shapes}, "
          f"{method}; {profile.cpu_model} ({profile.isa_text()}), {os.cpu_count()} CPUs; {before.text()}", flush=True)
    inter, iso = [], []
    for k, (batch, seq) in enumerate(shapes):
        asked = list(args.variants if k == 0 else args.second_shape_variants)
        if not asked:
            continue
        names = with_baselines(asked, args.model, batch, seq, args.warmup + args.steps, args.threads)
        added = [n for n in names if n not in asked]
        print(f"  {batch}x{seq}: interleaving {', '.join(names)}"
              + (f" (added as like-for-like baselines: {', '.join(added)})" if added else ""), flush=True)
        if args.one_process:
            rows = interleaved_one_process(names, args.model, batch, seq, args.warmup, args.steps, args.threads)
        else:
            rows = interleaved_lockstep(names, args.model, batch, seq, args.warmup, args.steps, args.threads, root)
        inter += add_ratios(rows, args.warmup, args.model, args.threads)
        if not args.no_isolated:
            iso += isolated([n for n in ISOLATED if n in names], args.model, batch, seq, args.isolated_steps, args.threads, root)
    load = combine_checks(before, check_load(profile))
    print(table(inter, iso))
    print(f"machine: {profile.cpu_model} ({profile.isa_text()}); load: {load.text()}")
    atomic_write_json(Path(args.out), {
        "benchmark": "bench_train", "model": args.model, "warmup": args.warmup, "steps": args.steps, "quick": args.quick,
        "method": "one-process" if args.one_process else "lockstep",
        "untuned": UNTUNED, "tuned": TUNED_DEFAULTS,
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "cpu_model": profile.cpu_model, "isa": profile.isa_text(),
                    "flags": sorted(k for k, v in profile.flags.items() if v),
                    "load_avg_at_start": load0, "load_avg_at_end": os.getloadavg(), "wall_s": time.perf_counter() - t_start},
        "load": {"contended": load.contended, "text": load.text()},
        "note": "headline ratios: each variant against the eager variant with the same shared settings (like for like), "
                "median of per-round ratios after warm-up with a 95% bootstrap interval; rows with comparison 'pytorch "
                "setting' are eager variants against plain eager; isolated: one process per backend for start-up and peak "
                "RSS. Figures taken while the load check says contended are not verdicts.",
        "interleaved": inter, "isolated": iso,
    })
    print(f"wrote {args.out}")
    return 0 if all(r["status"] == "ok" for r in inter + iso) else 1


if __name__ == "__main__":
    sys.exit(main())
