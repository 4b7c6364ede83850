"""Quantization benchmark: FP32 vs dynamic INT8 vs static INT8 (QDQ) on MiniLM, on the exported
and the fused graph: latency, size on disk, accuracy and its drift slice by slice.

1. A fine-tuned MiniLM (``--checkpoint DIR``, or a short eager fine-tune here; ``--no-train``
   keeps the random classifier head: drift is still measured, accuracy is chance).
2. Export (workbench.graph.export) and the transformer-optimized graph (workbench.graph.fusion).
3. ``workbench.quant.run_search`` over the configurations on both graphs: every
   variant is scored on the same test split and golden set, against its own FP32 graph.
4. Per-node SQNR of dynamic INT8 and a re-quantization without the 3 worst nodes.
5. A separate timing pass: every graph in one process, round-robin over several rounds (so a
   burst of load on the machine hits all variants alike), medians of all timed runs, ratios
   against the FP32 exported graph measured in the same pass.

Prints a table and writes JSON to --out. A benchmark, not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_quant.py --out runs/bench/bench_quant.json [--quick]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from workbench.core.options import shapes_arg


def _configs(quick: bool):
    from workbench.quant import QuantConfig

    if quick:
        return [QuantConfig.preset("dynamic"), QuantConfig.preset("static-minmax", calibration={"samples": 64})]
    return [
        QuantConfig.preset("dynamic"),
        QuantConfig.preset("dynamic-per-channel"),
        QuantConfig.preset("static-minmax", calibration={"samples": 128}),
        QuantConfig.preset("static-entropy", calibration={"samples": 128}),
        QuantConfig.preset("static-percentile", calibration={"samples": 128}),
    ]


def _timing_pass(paths: dict[str, Path], shapes, rounds: int, repeats: int, warmup: int, threads, vocab: int) -> dict:
    """Median latency per (variant, shape) over ``rounds`` round-robin rounds."""
    from workbench.runtime.ortinfer import latency_by_shape, make_session

    sessions = {name: make_session(p, threads=threads) for name, p in paths.items()}
    samples: dict[tuple[str, tuple[int, int]], list[float]] = {}
    for shape in shapes:
        for r in range(rounds):
            for name, sess in sessions.items():
                lat = latency_by_shape(sess, [shape], warmup=warmup if r == 0 else 1, repeats=repeats, vocab_size=vocab)
                samples.setdefault((name, shape), []).extend(lat[0].stats.samples_ms)
    return {k: {"median_ms": statistics.median(v), "runs": len(v), "min_ms": min(v)} for k, v in samples.items()}


def main(argv=None) -> int:
    from workbench.quant import DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench_quant.json", help="JSON file to write")
    parser.add_argument("--quick", action="store_true",
                        help="quick data (128 test reviews), max length 64, 2 configs, 1x64 only, few timing runs")
    parser.add_argument("--checkpoint", help="a fine-tuned model folder (default: fine-tune MiniLM briefly here)")
    parser.add_argument("--no-train", action="store_true", help="use MiniLM with its random classifier head (no fine-tuning)")
    parser.add_argument("--train-steps", type=int, help="fine-tuning steps when no checkpoint is given (default 40; full 100)")
    parser.add_argument("--shapes", type=shapes_arg, help="BATCHxSEQ,... to time (default 1x128,8x128; quick: 1x64)")
    parser.add_argument("--rounds", type=int, help="round-robin timing rounds (default 5; quick 2)")
    parser.add_argument("--repeats", type=int, help="timed runs per variant per round (default 10; quick 5)")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: ONNX Runtime's own)")
    parser.add_argument("--budget-overall", type=float, default=DEFAULT_BUDGET_OVERALL,
                        help=f"accuracy drop allowed overall (default {DEFAULT_BUDGET_OVERALL}; 0.01 = 1 point)")
    parser.add_argument("--budget-slice", type=float, default=DEFAULT_BUDGET_PER_SLICE,
                        help=f"accuracy drop allowed on any slice (default {DEFAULT_BUDGET_PER_SLICE}; 0.02 = 2 points)")
    parser.add_argument("--n-boot", type=int, help="bootstrap replicates (default 1000; quick 300)")
    parser.add_argument("--work", help="folder for models and graphs (default: a temporary folder)")
    args = parser.parse_args(argv)

    import onnxruntime
    import torch

    from workbench.data.load import DataConfig, load_data
    from workbench.graph import ExportConfig, run_export
    from workbench.runs import layout
    from workbench.graph import FusionConfig, run_fusion
    from workbench.quant import BaselineConfig, EvalConfig, SearchConfig, TimingConfig, requantize_excluding, run_quantization, run_search

    quick = args.quick
    max_length = 64 if quick else 128
    shapes = args.shapes or (((1, 64),) if quick else ((1, 128), (8, 128)))
    rounds = args.rounds or (2 if quick else 5)
    repeats = args.repeats or (5 if quick else 10)
    n_boot = args.n_boot or (300 if quick else 1000)
    work_ctx = tempfile.TemporaryDirectory(prefix="bench_quant_") if args.work is None else None
    work = Path(args.work) if args.work else Path(work_ctx.name)
    work.mkdir(parents=True, exist_ok=True)
    phases: dict[str, float] = {}

    data_cfg = DataConfig.quick() if quick else DataConfig(max_train=1600, max_eval=800)
    dd = load_data(data_cfg)

    # 1. the model
    t0 = time.perf_counter()
    if args.checkpoint:
        model_src, trained = args.checkpoint, "given checkpoint"
    elif args.no_train:
        model_src, trained = "minilm", "random classifier head (not fine-tuned)"
    else:
        from workbench.train import TrainConfig, run_training

        steps = args.train_steps or (40 if quick else 100)
        tcfg = TrainConfig(model="minilm", data=data_cfg, max_length=64, batch_size=16, max_steps=steps, lr=1e-4,
                           warmup_steps=4, eval_every=0, save_graphs="off")
        run = run_training(tcfg, "eager", run_dir=work / layout.TRAIN_DIR)
        if getattr(run.status, "value", run.status) != "ok":
            print(f"fine-tuning failed: {run.reason}", file=sys.stderr)
            return 1
        model_src, trained = str(run.checkpoint_dir), f"fine-tuned here: {steps} steps of 16, eager"
    phases["model"] = time.perf_counter() - t0

    # 2. export and fusion
    t0 = time.perf_counter()
    exported = run_export(model_src, ExportConfig.quick(max_length=max_length, validation_examples=16 if quick else 64),
                          work / layout.EXPORT_DIR, data=dd)
    fusion = run_fusion(exported, FusionConfig.transformer_only(measure_latency=False, time_pytorch=False), work / layout.FUSION_DIR)
    phases["export+fusion"] = time.perf_counter() - t0
    graphs = {"exported": exported}
    if fusion.fused_path is not None:
        graphs["fused"] = fusion
    else:
        print(f"no fused graph (fusion notes: {fusion.notes}); quantizing the exported graph only", file=sys.stderr)

    # 3. quantize and score every configuration on every graph
    t0 = time.perf_counter()
    search_cfg = SearchConfig(candidates=tuple(_configs(quick)), budget_overall=args.budget_overall,
                              budget_per_slice=args.budget_slice, evaluation=EvalConfig(n_boot=n_boot),
                              baseline=BaselineConfig(timing=TimingConfig(shapes=(shapes[0],), warmup=1, repeats=3, max_seconds=5.0)))
    search = run_search(graphs, search_cfg, work / layout.SEARCH_DIR, data=dd, export=exported,
                        progress=lambda d, t, name: print(f"  [{d}/{t}] {name}", file=sys.stderr, flush=True))
    phases["search"] = time.perf_counter() - t0

    # 4. per-node error and the exclusion fix, on the exported graph with dynamic INT8
    t0 = time.perf_counter()
    from workbench.quant import EvalConfig, QuantConfig, load_baseline, load_quant_result

    base = load_baseline(work / layout.SEARCH_DIR / "exported")
    dyn = run_quantization(base, QuantConfig.preset("dynamic"), work / "nodes", evaluation=EvalConfig(n_boot=n_boot, node_error_samples=16))
    fixed = requantize_excluding(dyn, worst_k=3, n_boot=n_boot, node_error_samples=0)
    phases["node errors + exclusion"] = time.perf_counter() - t0

    # 5. timing pass
    t0 = time.perf_counter()
    rows = []
    paths: dict[str, Path] = {}
    for c in search.candidates:
        paths[c.name] = Path(c.onnx_path)
    paths["exported/dynamic-qint8-excl3"] = Path(fixed.quantized_path)
    timing = _timing_pass(paths, shapes, rounds, repeats, 3, args.threads, exported.model_info.vocab_size)
    phases["timing"] = time.perf_counter() - t0
    ref_name = "exported/fp32"

    def row_for(name: str, graph: str, precision: str, size: float, res) -> dict:
        row = {"variant": name, "graph": graph, "precision": precision, "size_mib": round(size, 2), "latency": {}}
        for shape in shapes:
            ms = timing[(name, shape)]["median_ms"]
            ref = timing[(ref_name, shape)]["median_ms"]
            row["latency"][f"{shape[0]}x{shape[1]}"] = {"median_ms": round(ms, 3), "speedup_vs_fp32_exported": round(ref / ms, 3),
                                                       "runs": timing[(name, shape)]["runs"]}
        if res is None:
            return row
        rep = res.report
        row.update({
            "accuracy": rep.overall.candidate.accuracy, "fp32_accuracy": rep.overall.reference.accuracy,
            "accuracy_delta": rep.overall.delta, "ci95": [rep.overall.ci_low, rep.overall.ci_high],
            "significant": rep.overall.significant, "agreement": rep.overall.candidate.agreement,
            "macro_f1_delta": rep.overall.deltas["macro_f1"].delta, "ece_delta": rep.overall.deltas["ece"].delta,
            "flips": len(rep.flips), "flips_broken": sum(f.kind.value == "broken" for f in rep.flips),
            "flips_fixed": sum(f.kind.value == "fixed" for f in rep.flips),
            "worst_slice": (lambda w: {"slice": w.slice, "n": w.n, "delta": w.delta, "ci95": [w.ci_low, w.ci_high]})(
                rep.worst_slices(include_small=False)[0]) if rep.worst_slices(include_small=False) else None,
            "golden_flips": len(res.golden.flips) if res.golden else None,
            "validation": res.validation.message, "quantize_s": round(res.quantize_seconds, 2),
        })
        return row

    for c in search.candidates:
        res = load_quant_result(c.result_path) if c.result_path else None
        row = row_for(c.name, c.graph, c.precision, c.size_mib, res)
        row["within_budget"] = c.feasible
        row["budget_violations"] = c.check.violations
        if res is None:
            row["accuracy"] = c.accuracy
        rows.append(row)
    excl = row_for("exported/dynamic-qint8-excl3", "exported", "int8", fixed.size_mib, fixed)
    excl["excluded_nodes"] = fixed.excluded_nodes
    rows.append(excl)

    # print
    sh = [f"{b}x{s}" for b, s in shapes]
    print(f"\nmodel: MiniLM-L6 ({trained}); data: {len(dd['test'])} test reviews + 24 golden; max length {max_length}; "
          f"onnxruntime {onnxruntime.__version__}, torch {torch.__version__}; threads: {args.threads or 'ORT default'}")
    print(f"timing: {rounds} round-robin rounds x {repeats} runs per variant and shape, medians; ratios vs {ref_name}\n")
    head = f"{'variant':<36} {'MiB':>6} " + " ".join(f"{s + ' ms':>10} {'x':>5}" for s in sh) + \
        f" {'acc %':>6} {'Δ pts [95% CI]':>22} {'agree':>6} {'flips':>5} {'worst slice Δ pts':>26} {'gold':>4} {'ok':>3}"
    print(head)
    print("-" * len(head))
    for r in rows:
        lat = " ".join(f"{r['latency'][s]['median_ms']:>10.2f} {r['latency'][s]['speedup_vs_fp32_exported']:>5.2f}" for s in sh)
        if "accuracy_delta" in r:
            ci = f"{100 * r['accuracy_delta']:+.1f} [{100 * r['ci95'][0]:+.1f}, {100 * r['ci95'][1]:+.1f}]"
            w = r["worst_slice"]
            worst = f"{w['slice']} {100 * w['delta']:+.1f} (n={w['n']})" if w else "-"
            extra = f"{100 * r['accuracy']:>6.1f} {ci:>22} {r['agreement']:>6.3f} {r['flips']:>5} {worst:>26} {r['golden_flips']:>4}"
        else:
            extra = f"{100 * r['accuracy']:>6.1f} {'(reference)':>22} {'':>6} {'':>5} {'':>26} {'':>4}"
        ok = "yes" if r.get("within_budget") else ("no" if "within_budget" in r else "")
        print(f"{r['variant']:<36} {r['size_mib']:>6.1f} {lat} {extra} {ok:>3}")
    print(f"\nsearch (budget {100 * args.budget_overall:.1f} pts overall, {100 * args.budget_slice:.1f} per slice of "
          f">= 50 examples): {search.message}")
    print("dynamic INT8, worst nodes by own quantization SQNR (dB):")
    for e in dyn.node_errors[:5]:
        print(f"  {e.node:<55} {e.op_type:<8} local {e.local_sqnr_db:6.1f}  weight {e.weight_sqnr_db:6.1f}  "
              f"activation {e.activation_sqnr_db:6.1f}  output {e.output_sqnr_db:6.1f}")
    print("phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in phases.items()))

    out = Path(args.out)
    payload = {
        "benchmark": "bench_quant", "quick": quick,
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "python": platform.python_version()},
        "versions": {"onnxruntime": onnxruntime.__version__, "torch": torch.__version__},
        "model": trained, "data": {"test": len(dd["test"]), "train": len(dd["train"]), "golden": 24},
        "max_length": max_length, "shapes": [list(s) for s in shapes], "rounds": rounds, "repeats": repeats,
        "threads": args.threads, "reference": ref_name,
        "budget": {"overall": args.budget_overall, "per_slice": args.budget_slice, "chosen": search.chosen, "message": search.message},
        "rows": rows,
        "node_errors_dynamic": [{"node": e.node, "op": e.op_type, "local_db": e.local_sqnr_db, "weight_db": e.weight_sqnr_db,
                                 "activation_db": e.activation_sqnr_db, "output_db": e.output_sqnr_db}
                                for e in dyn.node_errors[:10]],
        "phases_s": {k: round(v, 1) for k, v in phases.items()},
    }
    from workbench.runs import atomic_write_json

    atomic_write_json(out, payload)  # strict JSON: NaN becomes null
    print(f"wrote {out}")
    if work_ctx is not None:
        work_ctx.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
