"""``quantize``: INT8 variants of a graph with their drift slice by slice, or (``--search``) the accuracy-constrained search."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from ..core.options import int_at_least
from .common import fail, locked, print_json, run_of, say, output_flags
from .flags import Flag, add_config_flags, build, cli_only

QUANT_FLAGS = ("per_channel", "reduce_range", Flag("calibration.method", "calibration"), Flag("calibration.samples", "samples"),
               "op_types",
               Flag("nodes_to_exclude", "exclude", nargs="*", split=False, metavar="NODE"), "accuracy_level", "block_size")
TIMING_FLAGS = ("shapes", "repeats", "device")
EVAL_FLAGS = ("n_boot", Flag("node_error_samples", "node-samples"))
BASELINE_FLAGS = (Flag("batch_size", "eval-batch-size"),)
SEARCH_FLAGS = ("budget_overall", Flag("budget_per_slice", "budget-slice"), Flag("include_small_slices", "include-small"),
                "min_speedup")


def _quant_source(source: Path, which: str):
    """(FP32 graph, ExportResult or None, run root or folder, note) from any folder of a run, a result file in it or an
    .onnx file; ``which``: auto (workbench.flow.handoffs's rule: the fused graph when there is one), fused or exported."""
    from ..graph import load_export
    from ..graph.facts import load_graph
    from ..runs import layout

    run = run_of(source)
    if source.is_file() and source.suffix == ".onnx":  # an explicit graph is quantized as given
        load_graph(source)  # a truncated or foreign file is one line naming it, before anything else
        export = load_export(source.parent) if (source.parent / layout.EXPORT_FILE).is_file() else None
        if export is None and run is not None:
            export = run.export()
        return source, export, (run.root if run is not None else source.parent), f"quantizing {source} (as given)"
    if run is None:
        raise FileNotFoundError(f"{source} is neither an .onnx file nor a folder of a run with an export "
                                "(export.json): run `workbench export` first")
    export_hint = f"run `workbench export --model MODEL --run-dir {run.root}` first"
    pick = run.require("exported or fused graph", run.graph_to_quantize(which), export_hint)  # flow's rule, or the one asked for
    export = run.export()
    return pick.path, export, run.root, pick.note


def _quant_config(args):
    from ..quant import QuantConfig

    return build(QuantConfig, args, base=QuantConfig.preset(args.preset))


def _slice_row(d) -> dict:
    return {"slice": d.slice, "n": d.n, "delta": d.delta, "ci95": [d.ci_low, d.ci_high], "significant": d.significant,
            "too_small": d.too_small, "flips": d.flips}


def _cmd_quantize(args) -> int:
    from ..data.load import DataConfig, load_data
    from ..graph import ExportError
    from ..quant import (BASELINE_DIR, BaselineConfig, EvalConfig, SearchConfig, TimingConfig, prepare_baseline,
                         requantize_excluding, result_text, run_quantization, run_search, search_text, variant_row)
    from ..runs import layout
    from ..runtime.device import require_device

    try:
        require_device(args.device or "cpu")  # a device that cannot be used here: a DeviceError, before any work
        cfg = _quant_config(args)  # the settings first: they need no file
        graph, export, folder, note = _quant_source(Path(args.source), args.graph)
        say(note, args.json)
        timing = build(TimingConfig, args, base=TimingConfig.quick() if args.quick else TimingConfig())
        data = load_data(DataConfig.quick(source=args.data) if args.quick else DataConfig(source=args.data))
        evaluation = build(EvalConfig, args, base=EvalConfig(n_boot=200) if args.quick else EvalConfig())
        scoring = build(BaselineConfig, args, timing=timing)
        tok = args.tokenizer
        if args.search:
            out = Path(args.run_dir) if args.run_dir else folder / layout.SEARCH_DIR
            search = build(SearchConfig, args, evaluation=evaluation, baseline=dataclasses.replace(scoring, seed=evaluation.seed))
            with locked(out, args, "quantize --search"):
                found = run_search(graph, search, out, data=data, tokenizer=tok, export=export,
                                   progress=None if args.json else (lambda i, n, what: print(f"  [{i}/{n}] {what}", file=sys.stderr)))
            if args.json:
                print_json({"run_dir": str(out), "result": str(out / layout.SEARCH_FILE), "chosen": found.chosen, "message": found.message,
                             "candidates": [{"name": c.name, "latency_ms": c.latency_ms, "size_mib": c.size_mib, "accuracy": c.accuracy,
                                             "accuracy_delta": c.accuracy_delta, "feasible": c.feasible,
                                             "worst_slice": c.check.worst_slice, "worst_slice_drop": c.check.worst_slice_drop,
                                             "violations": c.check.violations} for c in found.candidates]})
            else:
                print(search_text(found))
                print(f"saved: {out / layout.SEARCH_FILE}")
            return 0 if found.chosen else 1
        out = Path(args.run_dir) if args.run_dir else folder / layout.quantize_dir(cfg.label)
        with locked(out, args, "quantize"):
            texts = max(scoring.calibration_samples, cfg.calibration.samples)
            baseline = prepare_baseline(graph, data, out / BASELINE_DIR,
                                        dataclasses.replace(scoring, calibration_samples=texts, seed=evaluation.seed),
                                        tokenizer=tok, export=export)
            result = run_quantization(baseline, cfg, out, evaluation=evaluation)
            if args.exclude_worst:
                result = requantize_excluding(result, worst_k=args.exclude_worst, node_error_samples=evaluation.node_error_samples)
    except (ExportError, FileNotFoundError, ValueError) as exc:  # QuantizeError, InferenceError, DataError: ValueErrors
        return fail(str(exc))
    rep = result.report
    worst = rep.worst_slices(k=5)
    if args.json:
        print_json({
            **variant_row(result).as_dict(),  # the variant's figures, as the report's table and the panel show them
            "run_dir": str(result.out_dir), "result": str(Path(result.out_dir) / layout.QUANTIZE_FILE), "input": note,
            "graph": str(result.source_path), "quantized_path": str(result.quantized_path), "validation": result.validation,
            "overall": _slice_row(rep.overall), "worst_slices": [_slice_row(d) for d in worst], "flips": len(rep.flips),
            "golden_flips": len(result.golden.flips) if result.golden else None, "excluded_nodes": result.excluded_nodes,
            "worst_nodes": [{"node": e.node, "op_type": e.op_type, "local_sqnr_db": e.local_sqnr_db,
                             "output_sqnr_db": e.output_sqnr_db} for e in result.node_errors[:5]],
            "notes": result.notes,
        })
    else:
        print(result_text(result))
        print(f"saved:      {Path(result.out_dir) / layout.QUANTIZE_FILE}")
    return 0 if result.validation.passed else 1


def add_quant(sub) -> None:
    from ..quant import BaselineConfig, EvalConfig, QuantConfig, SearchConfig, TimingConfig
    from ..quant.config import PRESET_TABLE

    p = sub.add_parser("quantize", help="INT8-quantize an exported or fused graph and report accuracy drift slice by slice")
    p.add_argument("source", help="any folder of a run (its root, export/, fusion/, quantize/..., a result file): its "
                                  "newest graph (--graph); or an .onnx file")
    cli_only(p, "--graph", default="auto", choices=["auto", "exported", "fused"],
             help="which FP32 graph of the run folder (auto: the fused one when `workbench fuse` ran)")
    cli_only(p, "--preset", default="dynamic", choices=list(PRESET_TABLE),
             help="starting point, whose values the flags below change (defaults shown are dynamic's): "
                  + "; ".join(f"{name}: {text}" for name, (text, _) in PRESET_TABLE.items()))
    add_config_flags(p, QuantConfig, QUANT_FLAGS, base=QuantConfig.preset("dynamic"))
    cli_only(p, "--exclude-worst", type=int_at_least(1), help="then re-quantize without the K nodes with the lowest SQNR")
    add_config_flags(p, EvalConfig, EVAL_FLAGS[1:], base=EvalConfig())
    cli_only(p, "--search", action="store_true", help="accuracy-constrained search over the standard candidates instead")
    add_config_flags(p, SearchConfig, SEARCH_FLAGS, base=SearchConfig())
    cli_only(p, "--data", default="reviews", help="'reviews' or a CSV/TSV/JSONL/Parquet file with text and label columns")
    cli_only(p, "--tokenizer", help="tokenizer folder (needed for a bare .onnx file without export.json beside it)")
    cli_only(p, "--quick", action="store_true", help="small data, short timing, 200 bootstrap replicates")
    add_config_flags(p, TimingConfig, TIMING_FLAGS, base=TimingConfig())
    add_config_flags(p, EvalConfig, EVAL_FLAGS[:1], base=EvalConfig())
    add_config_flags(p, BaselineConfig, BASELINE_FLAGS, base=BaselineConfig())
    output_flags(p, "where to write (default: <run folder>/quantize/<name>, or <run folder>/search)", new_runs=False)
    p.set_defaults(func=_cmd_quantize)
