"""Command-line front: ``workbench <command>``. Thin: every command calls the same library
functions the widgets call, prints a table or ``--json``, and writes into a run folder.

Each stage registers its sub-commands in its own ``_add_<stage>`` function below.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from .. import serial
from ..options import shapes_arg


def _print_json(obj) -> None:
    print(json.dumps(serial.to_dict(obj), indent=2, allow_nan=False))


def _fail(message: str, code: int = 2) -> int:
    print(f"workbench: error: {message}", file=sys.stderr)
    return code


def _device_problem(args) -> Optional[str]:
    """The message when ``--device`` names a device that cannot be used here (checked before any work)."""
    from ..device import DeviceError, require_device

    try:
        require_device(getattr(args, "device", None) or "cpu")
    except DeviceError as exc:
        return str(exc)
    return None


def _add_device_flag(p) -> None:
    p.add_argument("--device", default=None, help="where ONNX Runtime runs the graphs: cpu (default), cuda or cuda:N "
                                                    "(needs onnxruntime-gpu: make setup-gpu-infer)")


class TerminalProgress:
    """A one-line progress bar on stderr: ``[#####.....] 50/100 loss 0.41 eta 12s``."""

    def __init__(self, label: str, width: int = 30, stream=None):
        self.label, self.width, self.stream = label, width, stream or sys.stderr
        self._last_len = 0

    def update(self, done: int, total: int, extra: str = "") -> None:
        total = max(total, 1)
        filled = int(self.width * min(done, total) / total)
        line = f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {extra}".rstrip()
        pad = " " * max(0, self._last_len - len(line))
        if self.stream.isatty():
            self.stream.write("\r" + line + pad)
        elif done == total or done % max(1, total // 10) == 0:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._last_len = len(line)

    def close(self) -> None:
        if self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------------------------
# doctor, data, runs
# --------------------------------------------------------------------------------------------
def _cmd_doctor(args) -> int:
    from ..env import run_doctor

    report = run_doctor()
    if args.json:
        _print_json({"ok": report.ok, "checks": [{**serial.to_dict(c), "status": c.status} for c in report.checks]})
    else:
        print(report.as_text())
    return 0 if report.ok else 1


def _cmd_data(args) -> int:
    from ..data import DataConfig, DataError, load_data, summarize
    from ..slices import slice_collection

    try:
        cfg = DataConfig(
            source=args.source, text_column=args.text_column, label_column=args.label_column,
            slice_columns=tuple(args.slice_columns or ()), seed=args.seed,
        )
        dd = load_data(cfg)
    except DataError as exc:
        return _fail(str(exc))
    summary = summarize(dd, args.source)
    names = summary.classes
    slices = slice_collection(args.slices, names, dd["train"]["text"], cfg.slice_columns, dd["test"])
    sizes = {k: int(v.sum()) for k, v in slices.membership(dd["test"]).items()}
    if args.json:
        _print_json({"summary": summary, "test_slice_sizes": sizes})
        return 0
    print(f"source: {summary.source}   classes: {names}")
    if summary.dropped_rows:
        left_out = "; ".join(f"{n} with {why}" for why, n in summary.dropped_rows.items())
        print(f"  left out {sum(summary.dropped_rows.values())} row(s): {left_out}")
    for split, n in summary.split_sizes.items():
        print(f"  {split:<10} {n:>6}  {summary.class_counts[split]}")
    print(f"slices ({args.slices}) on the test split:")
    for name, n in sizes.items():
        print(f"  {name:<28} {n:>6}")
    return 0


def _cmd_runs(args) -> int:
    from ..runs import find_results, list_runs

    runs = list_runs(args.runs)
    if args.json:  # with each stage's newest result, where the run layout (or an older one) put it
        _print_json([{"path": str(r.path), "stages": list(r.stages),
                      "results": {k: v.relative_to(r.path).as_posix() for k, v in find_results(r.path).items()}}
                     for r in runs])
        return 0
    if not runs:
        print(f"no runs under {args.runs}")
    for r in runs:
        print(f"{r.path}  {', '.join(r.stages) or '(empty)'}")
    return 0


def _add_core(sub) -> None:
    p = sub.add_parser("doctor", help="check the environment; non-zero exit when a needed piece is missing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("data", help="load data, show splits and slice sizes")
    p.add_argument("--source", default="reviews", help="'reviews' (built in) or a CSV/TSV/JSONL/Parquet file")
    p.add_argument("--text-column", default="text")
    p.add_argument("--label-column", default="label")
    p.add_argument("--slice-columns", nargs="*", help="user columns to slice by")
    p.add_argument("--slices", default="default", choices=["default", "golden"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_data)

    p = sub.add_parser("runs", help="list run folders")
    p.add_argument("--runs", default="runs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_runs)


# --------------------------------------------------------------------------------------------
# train, compare  (issue 3)
# --------------------------------------------------------------------------------------------
_TRAIN_PRESETS = ("quick", "demo", "full", "bench")


def _train_config(args):
    """TrainConfig from a preset plus the flags given on the command line."""
    from ..data import DataConfig
    from ..models import BUILTIN_MODELS, ModelError, check_model_type, resolve_model_path
    from ..train import TrainConfig, TrainConfigError

    overrides = {}
    for flag, key in (("model", "model"), ("steps", "max_steps"), ("epochs", "epochs"), ("batch_size", "batch_size"),
                      ("grad_accum", "grad_accum"), ("max_length", "max_length"), ("lr", "lr"), ("schedule", "schedule"),
                      ("warmup_steps", "warmup_steps"), ("seed", "seed"), ("eval_every", "eval_every"),
                      ("threads", "threads"), ("device", "device"), ("precision", "precision"), ("opset", "opset"),
                      ("memory_optimizer_level", "memory_optimizer_level"), ("ort_threads", "ort_threads"),
                      ("ort_graph_optimization", "ort_graph_optimization"), ("fallback", "fallback"),
                      ("save_graphs", "save_graphs"), ("optimizer", "optimizer"), ("compile_mode", "compile_mode")):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[key] = value
    if args.dropout is not None:
        overrides["dropout"] = args.dropout
    if args.pad_to_max:
        overrides["pad_to_max"] = True
    if args.no_spinning:
        overrides["ort_allow_spinning"] = False
    if getattr(args, "spinning", False):
        overrides["ort_allow_spinning"] = True
    if args.data is not None or args.max_train is not None:
        base = getattr(TrainConfig, args.preset)().data
        overrides["data"] = DataConfig(**{**{f: getattr(base, f) for f in ("text_column", "label_column", "validation_fraction",
                                                                           "test_fraction", "seed", "max_eval")},
                                          "source": args.data or base.source,
                                          "max_train": args.max_train if args.max_train is not None else base.max_train})
    if overrides.get("model", BUILTIN_MODELS[0]) not in BUILTIN_MODELS:
        # a wrong folder or model type is one line (the types that work), before any data is read
        try:
            check_model_type(resolve_model_path(overrides["model"]))
        except ModelError as exc:
            raise TrainConfigError(str(exc)) from exc
    return getattr(TrainConfig, args.preset)(**overrides)


class _TrainProgressBar:
    """Adapts workbench.train.Progress to the terminal bar, one bar per backend."""

    def __init__(self):
        self.bars: dict[str, TerminalProgress] = {}

    def __call__(self, p) -> None:
        name = p.backend.value if hasattr(p.backend, "value") else str(p.backend)
        bar = self.bars.get(name)
        if bar is None:
            bar = self.bars[name] = TerminalProgress(f"{name:<9}")
        if p.phase == "startup":
            bar.update(0, p.total_steps, "starting (export / compile happen on the first step)")
            return
        extra = f"loss {p.loss:.4f}  {p.samples_per_s:.1f} samples/s  eta {p.eta_s:.0f}s"
        if p.val_accuracy is not None:
            extra += f"  val acc {p.val_accuracy:.3f}"
        bar.update(p.step, p.total_steps, extra)
        if p.phase == "done":
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _stop_on_sigint():
    """A threading.Event set by the first Ctrl-C, so the run stops cleanly between steps."""
    import signal
    import threading

    stop = threading.Event()

    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        print("\nstopping after this step (Ctrl-C again to abort)", file=sys.stderr)
        stop.set()

    signal.signal(signal.SIGINT, handler)
    return stop


def _run_summary(run) -> dict:
    return {
        "backend": run.backend.value, "status": run.status.value, "reason": run.reason,
        "executed_in_onnxruntime": run.executed_in_onnxruntime, "fell_back": run.status.value == "fell_back",
        "steps": len(run.steps), "median_step_s": run.median_step_s, "samples_per_s": run.samples_per_s,
        "peak_memory_mib": run.peak_memory_mib, "startup_s": run.startup_s, "total_s": run.total_s,
        "final_val_loss": run.final_val_loss, "final_accuracy": run.final_accuracy, "checkpoint_dir": run.checkpoint_dir,
        "graphs_dir": run.graphs.folder if run.graphs else None,
    }


def _cmd_train(args) -> int:
    from ..runs import new_run_dir
    from ..train import TrainConfigError, run_training

    try:
        cfg = _train_config(args)
    except (TrainConfigError, ValueError) as exc:
        return _fail(str(exc))
    run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(f"train-{args.backend}", args.runs)
    out = _stage_dir(run_dir, "train")  # the run layout: <run>/train/<backend>/
    bar = None if args.json else _TrainProgressBar()
    try:
        if args.nproc > 1:
            from ..train import run_distributed

            result = run_distributed(cfg, args.backend, nproc=args.nproc, run_dir=out)
            run = result.run
        else:
            run = run_training(cfg, args.backend, out, progress=bar, stop=_stop_on_sigint())
    except TrainConfigError as exc:
        return _fail(str(exc))
    finally:
        if bar is not None:
            bar.close()
    summary = _run_summary(run)
    if args.nproc > 1:
        summary.update(world_size=args.nproc, identical_weights_across_ranks=result.identical_weights)
    if args.json:
        _print_json({**summary, "run_dir": str(run_dir)})
    else:
        print(f"{run.backend.value}: {run.status.value}; {len(run.steps)} steps, median step {run.median_step_s * 1000:.0f} ms, "
              f"{run.samples_per_s:.1f} samples/s, peak {run.peak_memory_mib:.0f} MiB, start-up {run.startup_s:.1f} s, "
              f"val acc {run.final_accuracy:.3f}")
        if run.reason:
            print(f"reason: {run.reason}")
        print(f"saved: {out / run.backend.value}")
    return 0 if run.status.value in ("ok", "stopped") else 1


def _cmd_compare(args) -> int:
    from ..train import comparison_table, run_comparison
    from ..runs import new_run_dir
    from ..train import TrainConfigError

    try:
        cfg = _train_config(args)
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir("compare", args.runs)
        out = _stage_dir(run_dir, "train")  # the run layout: <run>/train/compare.json, <run>/train/<backend>/
        bar = None if args.json else _TrainProgressBar()
        try:
            c = run_comparison(cfg, backends, out, progress=bar, stop=_stop_on_sigint(),
                               tolerance=args.tolerance, isolate=not args.in_process)
        finally:
            if bar is not None:
                bar.close()
    except TrainConfigError as exc:
        return _fail(str(exc))
    if args.json:
        _print_json({
            "run_dir": str(run_dir), "baseline": c.baseline.value, "loss_parity": c.loss_parity,
            "tolerance": c.tolerance, "parity_basis": c.parity_basis,
            "backends": {s.backend.value: {**_run_summary(c.run(s.backend)),
                                           "metrics": [m for m in s.metrics()]} for s in c.summaries},
            "ratios": {r.backend.value: r for r in c.ratios}, "notes": c.notes,
        })
    else:
        print(comparison_table(c))
        print(f"saved: {out / 'compare.json'}   next: workbench export --model {run_dir}")
    return 0 if all(s.status.value == "ok" for s in c.summaries) and c.loss_parity else 1


def _train_flags(p, steps_help: str) -> None:
    p.add_argument("--preset", default="quick", choices=_TRAIN_PRESETS,
                   help="starting point: quick (tiny model, seconds), demo (MiniLM, minutes), full (MiniLM, all data), bench")
    p.add_argument("--model", help="'minilm', 'tiny' or a Hugging Face model folder")
    p.add_argument("--data", help="'reviews' or a CSV/TSV/JSONL/Parquet file with text and label columns")
    p.add_argument("--max-train", type=int, help="use at most this many training examples")
    p.add_argument("--steps", type=int, help=steps_help)
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--grad-accum", type=int)
    p.add_argument("--max-length", type=int)
    p.add_argument("--pad-to-max", action="store_true", help="pad every batch to --max-length (fixed shapes)")
    p.add_argument("--lr", type=float)
    p.add_argument("--schedule", choices=["constant", "linear", "cosine"])
    p.add_argument("--warmup-steps", type=int)
    p.add_argument("--optimizer", choices=["adamw", "adamw_fused", "ort_fused_adam"])
    p.add_argument("--seed", type=int)
    p.add_argument("--dropout", action=argparse.BooleanOptionalAction, default=None, help="dropout on/off (off: loss curves comparable)")
    p.add_argument("--eval-every", type=int, help="evaluate every N steps (0: at the end only)")
    p.add_argument("--threads", type=int, help="torch intra-op threads")
    p.add_argument("--device", help="cpu, cuda or cuda:N")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"])
    g = p.add_argument_group("ORTModule")
    g.add_argument("--opset", type=int)
    g.add_argument("--memory-optimizer-level", type=int, choices=[0, 1, 2])
    g.add_argument("--ort-threads", type=int, help="intra-op threads of ONNX Runtime's session")
    g.add_argument("--ort-graph-optimization", choices=["disabled", "basic", "extended", "all"])
    spin = g.add_mutually_exclusive_group()
    spin.add_argument("--no-spinning", action="store_true", help="ONNX Runtime threads sleep instead of spinning when idle (the default)")
    spin.add_argument("--spinning", action="store_true", help="ONNX Runtime's idle threads spin (ORTModule's own default; measured slower here)")
    g.add_argument("--fallback", choices=["disable", "detect"], help="disable: fail loudly; detect: stop and mark fell_back")
    g.add_argument("--save-graphs", action=argparse.BooleanOptionalAction, default=None,
                   help="keep ORTModule's training graphs in the run folder (default: yes)")
    p.add_argument("--compile-mode", choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"])
    p.add_argument("--runs", default="runs", help="folder for new run folders")
    p.add_argument("--run-dir", help="write into this run folder instead of a new one")
    p.add_argument("--json", action="store_true", help="print the result as JSON (no progress bar)")


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="fine-tune with one backend (eager, ortmodule, compile); Ctrl-C stops cleanly")
    p.add_argument("--backend", default="eager", choices=["eager", "ortmodule", "compile"])
    p.add_argument("--nproc", type=int, default=1, help="processes under torchrun with DistributedDataParallel (eager, ortmodule)")
    _train_flags(p, "optimizer steps (overrides --epochs)")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("compare", help="train several backends with the same config and compare them")
    p.add_argument("--backends", default="eager,ortmodule,compile", help="comma-separated: eager,ortmodule,compile")
    p.add_argument("--tolerance", type=float, help="loss-parity tolerance (default: justified per precision/dropout)")
    p.add_argument("--in-process", action="store_true", help="run the backends in this process (default: one process each, "
                                                              "so peak memory is per backend)")
    _train_flags(p, "optimizer steps per backend")
    p.set_defaults(func=_cmd_compare)


# --------------------------------------------------------------------------------------------
# export, fuse  (issue 4)
# --------------------------------------------------------------------------------------------
def _cmd_export(args) -> int:
    from ..data import DataConfig, DataError, load_data
    from ..graph import ExportConfig, ExportError, run_export
    from ..models import BUILTIN_MODELS, ModelError, check_model_type, resolve_model_path
    from ..runs import RunError, layout, new_run_dir

    if (problem := _device_problem(args)) is not None:
        return _fail(problem)
    try:
        overrides = {k: v for k, v in (("opset", args.opset), ("max_length", args.max_length),
                                       ("attn_implementation", args.attn), ("tolerance", args.tolerance),
                                       ("validation_examples", args.validation_examples),
                                       ("validation_split", args.split), ("device", args.device)) if v is not None}
        cfg = getattr(ExportConfig, args.preset)(**overrides)
        model, run, note = args.model, None, None
        given = Path(model)
        if (model not in BUILTIN_MODELS and given.exists() and not (given / "config.json").is_file()
                and (run := _run_of(given)) is not None):
            # a run folder, one of its folders or a result file: export the checkpoint workbench.flow picks
            pick = run.require("finished training run with a checkpoint", run.checkpoint_to_export(),
                               f"run `workbench compare --run-dir {run.root}` first, or pass --model a checkpoint folder")
            model, note = str(pick.path), pick.note
        elif given.is_dir():
            run = _run_of(given)  # a checkpoint inside a run: the export goes into that run
        if model not in BUILTIN_MODELS:  # a wrong folder or model type fails before the data is read
            check_model_type(resolve_model_path(model))
        if note:
            _say(note, args.json)
        data = load_data(DataConfig.quick(source=args.data) if args.preset == "quick" else DataConfig(source=args.data))
        run_dir = Path(args.run_dir) if args.run_dir else (run.root if run is not None else
                                                           new_run_dir(f"export-{Path(model).name}", args.runs))
        out = _stage_dir(run_dir, "export")
        result = run_export(model, cfg, out, data=data)
    except (ExportError, ModelError, DataError, ValueError, RunError) as exc:
        return _fail(str(exc))
    v = result.validation
    if args.json:
        _print_json({"run_dir": str(run_dir), "result": str(out / layout.EXPORT_FILE), "input": note,
                     "onnx_path": str(result.onnx_path), "opset": result.opset,
                     "attn_implementation": result.attn_implementation, "node_count": result.node_count,
                     "size_mib": result.size_mib, "input_names": result.input_names, "class_names": result.class_names,
                     "validation": v, "op_histogram": result.op_histogram})
    else:
        top = ", ".join(f"{op} {n}" for op, n in list(result.op_histogram.items())[:8])
        print(f"exported {result.model_name} ({result.attn_implementation} attention, opset {result.opset}) "
              f"in {result.export_seconds:.1f} s")
        print(f"graph:      {result.onnx_path} ({result.size_mib:.1f} MiB, {result.node_count} nodes: {top}, ...)")
        print(f"inputs:     {', '.join(result.input_names)} (what {result.model_info.model_type or 'the model'}'s forward() takes)")
        print(f"validation: {v.message}")
        print(f"saved:      {out / layout.EXPORT_FILE}   next: workbench fuse {run_dir}")
    return 0 if v.passed else 1


def _cmd_fuse(args) -> int:
    from ..graph import ExportError
    from ..graph import FusionConfig, FusionError, run_fusion, summary, table
    from ..ortinfer import InferenceError
    from ..runs import RunError

    source = Path(args.source)
    if (problem := _device_problem(args)) is not None:
        return _fail(problem)
    try:
        run = _run_of(source)
        src, out_dir = source, (source if source.is_dir() else source.parent)  # a bare graph or export folder
        if run is not None:
            if not (source.suffix == ".onnx" and source.is_file()):  # an explicit graph is fused as given
                pick = run.require("export", run.export_to_fuse(),
                                   f"run `workbench export --model MODEL --run-dir {run.root}` first")
                src = pick.path
                _say(pick.note, args.json)
            out_dir = run.stage_dir("fusion")
        overrides = {k: v for k, v in (("shapes", args.shapes), ("threads", args.threads), ("warmup", args.warmup),
                                       ("repeats", args.repeats), ("transformer_session", args.transformer_session),
                                       ("tolerance", args.tolerance), ("num_heads", args.num_heads),
                                       ("hidden_size", args.hidden_size), ("opt_level", args.opt_level)) if v is not None}
        if args.variants:
            overrides["variants"] = tuple(v.strip() for v in args.variants.split(",") if v.strip())
        if args.no_latency:
            overrides.update(measure_latency=False, time_pytorch=False)
        if args.device is not None:  # else the preset's device (cpu; cuda for --preset gpu)
            overrides["device"] = args.device
        if args.fp16:
            overrides["fp16"] = True
        if args.cuda_graph:
            overrides["cuda_graph"] = True
        preset = {"default": "default", "quick": "quick", "inspect": "inspect_only", "gpu": "gpu"}[args.preset]
        cfg = getattr(FusionConfig, preset)(**overrides)
        out_dir = Path(args.run_dir) if args.run_dir else out_dir
        report = run_fusion(src, cfg, out_dir)
    except (FusionError, ExportError, InferenceError, FileNotFoundError, ValueError, RunError) as exc:
        return _fail(str(exc))
    if args.json:
        _print_json({"run_dir": str(out_dir), "result": str(out_dir / "fusion.json"), **summary(report)})
    else:
        print(table(report))
        print(f"\nsaved: {out_dir / 'fusion.json'}   fused graph: {report.fused_path}")
    return 0 if report.all_passed else 1


def _add_graph(sub) -> None:
    p = sub.add_parser("export", help="export a model to ONNX and validate it against PyTorch on real examples")
    p.add_argument("--model", default="minilm", help="'minilm', 'tiny' or a checkpoint / Hugging Face model folder")
    p.add_argument("--preset", default="default", choices=["default", "quick", "strict"],
                   help="default: opset 17, 128 tokens, tolerance 1e-3; quick: fewer, shorter examples; strict: tolerance 1e-5")
    p.add_argument("--opset", type=int, help="ONNX opset (11-20; 17 writes LayerNormalization as one op)")
    p.add_argument("--max-length", type=int, help="longest sequence in the validation batches")
    p.add_argument("--attn", choices=["eager", "sdpa"], help="attention implementation to load the model with "
                                                              "(eager: what ONNX Runtime fuses)")
    p.add_argument("--tolerance", type=float, help="largest |logit difference| allowed against PyTorch")
    p.add_argument("--validation-examples", type=int, help="how many examples to validate on")
    p.add_argument("--split", help="data split to validate on (default: validation)")
    p.add_argument("--data", default="reviews", help="'reviews' or a CSV/TSV/JSONL/Parquet file with text and label columns")
    p.add_argument("--runs", default="runs", help="folder for new run folders")
    p.add_argument("--run-dir", help="write into this run folder instead of a new one")
    p.add_argument("--json", action="store_true")
    _add_device_flag(p)
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("fuse", help="optimize an exported graph (session levels, transformer optimizer): "
                                    "validate, time, diff, trace fused nodes, diagnose missing fusions")
    p.add_argument("source", help="any folder of a run (its root, export/, fusion/, ...) or a result file in it: the "
                                  "run's newest export is fused into <run>/fusion; or an export folder or an .onnx file")
    p.add_argument("--preset", default="default", choices=["default", "quick", "inspect", "gpu"],
                   help="default: 3 shapes x 20 runs; quick: 2 small shapes x 3 runs, 1 thread; inspect: no timing; "
                        "gpu: CUDA, FP16, CUDA graphs and PyTorch's GPU peers at 1x128 and 32x128")
    p.add_argument("--variants", help="comma-separated: unoptimized,ort_basic,ort_extended,ort_all,transformer (default: all)")
    p.add_argument("--shapes", type=shapes_arg, help="BATCHxSEQ,... to time, e.g. 1x32,1x128,8x128")
    p.add_argument("--threads", type=int, help="intra-op threads for ONNX Runtime and PyTorch (default: each runtime's own)")
    p.add_argument("--warmup", type=int)
    p.add_argument("--repeats", type=int)
    p.add_argument("--no-latency", action="store_true", help="build, validate and diff only")
    p.add_argument("--transformer-session", choices=["disabled", "basic", "extended", "all"],
                   help="session level the transformer-optimized graph runs with (default: all)")
    p.add_argument("--opt-level", type=int, choices=[0, 1, 2, 99], help="transformer optimizer opt_level (default 1)")
    p.add_argument("--num-heads", type=int, help="attention heads (default: from the export)")
    p.add_argument("--hidden-size", type=int, help="hidden size (default: from the export)")
    p.add_argument("--tolerance", type=float, help="override the export's validation tolerance")
    p.add_argument("--run-dir", help="where to write (default: <run>/fusion; the source's folder outside a run)")
    p.add_argument("--json", action="store_true", help="print a summary as JSON (the full report is fusion.json)")
    _add_device_flag(p)
    p.add_argument("--fp16", action="store_true", help="also build the fused graph in float16 (inputs/outputs float32), "
                                                        "validated against FP32 with FP16's tolerance")
    p.add_argument("--cuda-graph", action="store_true", help="CUDA only: also time each variant as a CUDA graph where "
                                                              "ONNX Runtime accepts it, and say why where it refuses")
    p.set_defaults(func=_cmd_fuse)


# --------------------------------------------------------------------------------------------
# quantize  (issue 5)
# --------------------------------------------------------------------------------------------
def _run_of(path: Path):
    """The run ``path`` belongs to (its root, a stage folder or a result file), or None outside a run."""
    from ..runs import RunError, open_run

    try:
        return open_run(path)
    except RunError:
        return None


def _stage_dir(run_dir: Path, stage: str) -> Path:
    """Where ``stage`` writes in the run ``run_dir`` (given as its root or any of its stage folders)."""
    from ..runs import layout

    return (layout.root_by_name(run_dir) or run_dir) / layout.STAGE_DIRS[stage]


def _say(note: str, as_json: bool) -> None:
    """Say which input a command took (on stderr under --json, so stdout stays one JSON document)."""
    print(note, file=sys.stderr if as_json else sys.stdout, flush=True)


def _quant_source(source: Path, which: str):
    """(FP32 graph path, ExportResult or None, run root or folder, note) from any folder of a run, a
    result file in it, or an .onnx file; ``which``: auto (workbench.flow's rule: the fused graph when
    there is one), fused or exported."""
    from .. import flow
    from ..graph import load_export

    run = _run_of(source)
    if source.is_file() and source.suffix == ".onnx":  # an explicit graph is quantized as given
        export = load_export(source.parent) if (source.parent / "export.json").is_file() else None
        if export is None and run is not None:
            export = run.export()
        return source, export, (run.root if run is not None else source.parent), f"quantizing {source} (as given)"
    if run is None:
        raise FileNotFoundError(f"{source} is neither an .onnx file nor a folder of a run with an export "
                                "(export.json): run `workbench export` first")
    export, fusion = run.export(), run.fusion()
    export_hint = f"run `workbench export --model MODEL --run-dir {run.root}` first"
    if which == "fused":
        problem = flow.fused_problem(fusion)
        if problem is not None:
            raise FileNotFoundError(f"no fused graph to quantize in {run.root}: {problem}; run `workbench fuse {run.root}` "
                                    "first, or use --graph exported")
        pick = flow.Pick(Path(fusion.fused_path), "fused", f"quantizing the fused graph {fusion.fused_path} (--graph fused)")
    elif which == "exported":
        if export is None:
            raise FileNotFoundError(f"no exported graph in {run.root}: {export_hint}")
        pick = flow.Pick(Path(export.onnx_path), "exported", f"quantizing the exported graph {export.onnx_path} (--graph exported)")
    else:
        pick = run.require("exported or fused graph", run.graph_to_quantize(), export_hint)
    return pick.path, export, run.root, pick.note


def _quant_config(args):
    from dataclasses import replace

    from ..quant import QuantConfig

    cfg = QuantConfig.preset(args.preset)
    over = {k: v for k, v in (("samples", args.samples), ("calibration", args.calibration)) if v is not None}
    if args.per_channel:
        over["per_channel"] = True
    if args.reduce_range:
        over["reduce_range"] = True
    if args.op_types:
        over["op_types"] = tuple(o.strip() for o in args.op_types.split(",") if o.strip())
    if args.exclude:
        over["nodes_to_exclude"] = tuple(args.exclude)
    return replace(cfg, **over) if over else cfg


def _slice_row(d) -> dict:
    return {"slice": d.slice, "n": d.n, "delta": d.delta, "ci95": [d.ci_low, d.ci_high], "significant": d.significant,
            "too_small": d.too_small, "flips": d.flips}


def _cmd_quantize(args) -> int:
    from ..data import DataConfig, DataError, load_data
    from ..graph import ExportError
    from ..ortinfer import InferenceError
    from ..quant import QuantizeError, TimingConfig, constrained_search, requantize_excluding, run_quantization
    from ..runs import layout

    if (problem := _device_problem(args)) is not None:
        return _fail(problem)
    try:
        graph, export, folder, note = _quant_source(Path(args.source), args.graph)
        _say(note, args.json)
        cfg = _quant_config(args)
        timing = TimingConfig.quick() if args.quick else TimingConfig()
        if args.shapes:
            timing = TimingConfig(shapes=args.shapes, warmup=timing.warmup, repeats=args.repeats or timing.repeats)
        elif args.repeats:
            timing = TimingConfig(shapes=timing.shapes, warmup=timing.warmup, repeats=args.repeats)
        if args.device is not None:
            from dataclasses import replace as _replace

            timing = _replace(timing, device=args.device)
        data = load_data(DataConfig.quick(source=args.data) if args.quick else DataConfig(source=args.data))
        n_boot = args.n_boot or (200 if args.quick else 1000)
        tok = args.tokenizer
        if args.search:
            out = Path(args.run_dir) if args.run_dir else folder / layout.SEARCH_DIR
            found = constrained_search(graph, None, args.budget_overall, args.budget_slice, out, data, tok, export=export,
                                       timing=timing, n_boot=n_boot, include_small_slices=args.include_small,
                                       eval_batch_size=args.eval_batch_size,
                                       progress=None if args.json else (lambda i, n, what: print(f"  [{i}/{n}] {what}", file=sys.stderr)))
            if args.json:
                _print_json({"run_dir": str(out), "result": str(out / "search.json"), "chosen": found.chosen, "message": found.message,
                             "candidates": [{"name": c.name, "latency_ms": c.latency_ms, "size_mib": c.size_mib, "accuracy": c.accuracy,
                                             "accuracy_delta": c.accuracy_delta, "feasible": c.feasible,
                                             "worst_slice": c.check.worst_slice, "worst_slice_drop": c.check.worst_slice_drop,
                                             "violations": c.check.violations} for c in found.candidates]})
            else:
                print(f"{'candidate':<34} {'ms':>8} {'MiB':>7} {'acc %':>6} {'Δ pts':>6} {'worst slice':>28} {'ok':>3}")
                for c in found.candidates:
                    print(f"{c.name:<34} {c.latency_ms:>8.2f} {c.size_mib:>7.1f} {100 * c.accuracy:>6.1f} {100 * c.accuracy_delta:>+6.1f} "
                          f"{(c.check.worst_slice or '-') + f' {-100 * c.check.worst_slice_drop:+.1f}':>28} {'yes' if c.feasible else 'no':>3}")
                print(f"\n{found.message}\nsaved: {out / 'search.json'}")
            return 0 if found.chosen else 1
        out = Path(args.run_dir) if args.run_dir else folder / layout.quantize_dir(cfg.label)
        result = run_quantization(graph, cfg, out, data, tok, export=export, timing=timing, n_boot=n_boot,
                                  node_error_samples=args.node_samples, eval_batch_size=args.eval_batch_size)
        if args.exclude_worst:
            result = requantize_excluding(result, worst_k=args.exclude_worst, node_error_samples=args.node_samples)
    except (QuantizeError, ExportError, InferenceError, DataError, FileNotFoundError, ValueError) as exc:
        return _fail(str(exc))
    rep = result.report
    worst = rep.worst_slices(k=5)
    if args.json:
        _print_json({
            "run_dir": str(result.out_dir), "result": str(Path(result.out_dir) / layout.QUANTIZE_FILE), "name": result.name,
            "input": note,
            "graph": str(result.source_path), "graph_kind": result.graph_kind, "quantized_path": str(result.quantized_path),
            "size_mib": result.size_mib, "fp32_size_mib": result.fp32_size_mib, "latency_ms": result.latency_ms,
            "fp32_latency_ms": result.fp32_latency_ms, "speedup": result.speedup, "validation": result.validation,
            "accuracy": result.accuracy, "fp32_accuracy": rep.overall.reference.accuracy, "overall": _slice_row(rep.overall),
            "worst_slices": [_slice_row(d) for d in worst], "flips": len(rep.flips),
            "golden_flips": len(result.golden.flips) if result.golden else None, "excluded_nodes": result.excluded_nodes,
            "worst_nodes": [{"node": e.node, "op_type": e.op_type, "local_sqnr_db": e.local_sqnr_db,
                             "output_sqnr_db": e.output_sqnr_db} for e in result.node_errors[:5]],
            "notes": result.notes,
        })
    else:
        o = rep.overall
        print(f"{result.name} on the {result.graph_kind} graph {result.source_path}")
        print(f"size:       {result.size_mib:.1f} MiB (FP32 {result.fp32_size_mib:.1f})")
        print(f"latency:    {result.latency_ms:.2f} ms vs FP32 {result.fp32_latency_ms:.2f} ms ({result.speedup:.2f}x; "
              f"shape {result.latency[0].batch}x{result.latency[0].seq}, medians, same process)")
        print(f"accuracy:   {100 * result.accuracy:.1f}% vs FP32 {100 * o.reference.accuracy:.1f}% "
              f"({100 * o.delta:+.1f} pts, 95% CI [{100 * o.ci_low:+.1f}, {100 * o.ci_high:+.1f}]); "
              f"{len(rep.flips)} of {rep.n} predictions flipped")
        print(f"validation: {result.validation.message}")
        print("slices, worst first (pts, 95% CI):")
        for d in worst:
            flag = " significant" if d.significant else ""
            small = f" (too small: n < {rep.min_slice_size})" if d.too_small else ""
            print(f"  {d.slice:<28} n={d.n:<5} {100 * d.delta:+6.1f} [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}]{flag}{small}")
        if result.golden is not None:
            print(f"golden set: {len(result.golden.flips)} of {result.golden.n} flipped")
        if result.node_errors:
            print("worst nodes (own quantization SQNR, dB):")
            for e in result.node_errors[:5]:
                print(f"  {e.node:<55} {e.op_type:<8} {e.local_sqnr_db:6.1f}")
        for n in result.notes:
            print(f"note: {n}")
        print(f"saved:      {Path(result.out_dir) / 'quantize.json'}")
    return 0 if result.validation.passed else 1


def _add_quant(sub) -> None:
    from ..quant import QuantConfig

    p = sub.add_parser("quantize", help="INT8-quantize an exported or fused graph and report accuracy drift slice by slice")
    p.add_argument("source", help="any folder of a run (its root, export/, fusion/, quantize/..., a result file): its "
                                  "newest graph (--graph); or an .onnx file")
    p.add_argument("--graph", default="auto", choices=["auto", "exported", "fused"],
                   help="which FP32 graph of the run folder (auto: the fused one when `workbench fuse` ran)")
    p.add_argument("--preset", default="dynamic", choices=list(QuantConfig.presets()),
                   help="dynamic: no data needed; static-*: QDQ, calibrated on training texts")
    p.add_argument("--per-channel", action="store_true", help="one weight scale per output column")
    p.add_argument("--reduce-range", action="store_true", help="7-bit weights (CPUs without VNNI)")
    p.add_argument("--calibration", choices=["minmax", "entropy", "percentile"], help="static calibration method")
    p.add_argument("--samples", type=int, help="static calibration texts (default 128)")
    p.add_argument("--op-types", help="comma-separated operator types to quantize (default: the preset's)")
    p.add_argument("--exclude", nargs="*", help="node names to leave in FP32")
    p.add_argument("--exclude-worst", type=int, help="then re-quantize without the K nodes with the lowest SQNR")
    p.add_argument("--node-samples", type=int, default=16, help="texts fed to both graphs for per-node SQNR (0: skip)")
    p.add_argument("--search", action="store_true", help="accuracy-constrained search over the standard candidates instead")
    p.add_argument("--budget-overall", type=float, default=0.01, help="search: accuracy drop allowed overall (0.01 = 1 point)")
    p.add_argument("--budget-slice", type=float, default=0.02, help="search: accuracy drop allowed on every slice")
    p.add_argument("--include-small", action="store_true", help="search: hold slices under 50 examples to the budget too")
    p.add_argument("--data", default="reviews", help="'reviews' or a CSV/TSV/JSONL/Parquet file with text and label columns")
    p.add_argument("--tokenizer", help="tokenizer folder (needed for a bare .onnx file without export.json beside it)")
    p.add_argument("--quick", action="store_true", help="small data, short timing, 200 bootstrap replicates")
    p.add_argument("--shapes", type=shapes_arg, help="BATCHxSEQ,... to time (default 1x128; quick 1x64)")
    p.add_argument("--repeats", type=int, help="timed runs per shape")
    p.add_argument("--n-boot", type=int, help="bootstrap replicates (default 1000)")
    p.add_argument("--eval-batch-size", type=int, default=32,
                   help="examples per batch when scoring (dynamic INT8 depends on it; 1 = one request at a time)")
    p.add_argument("--run-dir", help="where to write (default: <run folder>/quantize/<name>, or <run folder>/search)")
    p.add_argument("--json", action="store_true")
    _add_device_flag(p)
    p.set_defaults(func=_cmd_quantize)


# --------------------------------------------------------------------------------------------
# demo: the whole walkthrough
# --------------------------------------------------------------------------------------------
def _cmd_demo(args) -> int:
    from ..pipeline import DemoConfig, run_demo
    from ..runs import new_run_dir

    try:
        overrides = {}
        if args.backends:
            overrides["backends"] = tuple(b.strip() for b in args.backends.split(",") if b.strip())
        if args.no_search:
            overrides["search"] = False
        cfg = (DemoConfig.quick if args.quick else DemoConfig.default)(**overrides)
        if args.steps is not None:
            from dataclasses import replace

            cfg = replace(cfg, train=cfg.train.replace(max_steps=args.steps))
    except ValueError as exc:
        return _fail(str(exc))
    try:
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir("demo-quick" if args.quick else "demo", args.runs)
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = args.run_dir or args.runs
        return _fail(f"cannot create a run folder in {where!r} ({exc.strerror or exc}); choose another --runs or --run-dir")
    bar = _TrainProgressBar()
    try:
        result = run_demo(cfg, run_dir, log=lambda line: print(line, flush=True), progress=bar, stop=_stop_on_sigint())
    finally:
        bar.close()
    return 0 if result.ok else 1


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="the whole walkthrough headless: fine-tune, compare, export, fuse, quantize, slices")
    p.add_argument("--quick", action="store_true", help="tiny model and small data (about a minute)")
    p.add_argument("--backends", help="comma-separated subset of eager,ortmodule,compile")
    p.add_argument("--steps", type=int, help="training steps per backend")
    p.add_argument("--no-search", action="store_true", help="skip the accuracy-constrained quantization search")
    p.add_argument("--runs", default="runs", help="folder that holds run folders")
    p.add_argument("--run-dir", help="write into this folder instead of a new one under --runs")
    p.set_defaults(func=_cmd_demo)


# --------------------------------------------------------------------------------------------
# audit: someone else's model on all of their data, one report  (issue 9)
# --------------------------------------------------------------------------------------------
AUDIT_EXIT_CODES = """exit codes:
  0  a quantized (INT8) variant meets both budgets (the verdict names the fastest)
  3  no quantized variant meets the budgets (the FP32 graph is the reference, never a candidate)
  2  bad input, found before any heavy work: no such folder, not a sequence-classification model,
     an architecture the exporter does not handle, label values the model does not know, missing
     columns, an empty or unreadable file, an output folder that cannot be written
  1  a step failed during the run (environment incomplete, export or validation failed); the
     report says which

Writes OUT/report.html (one self-contained file: open it offline or send it) and OUT/summary.json
(every figure of the report; fields documented in the README), each replaced atomically at the
end, so a re-run into the same --out keeps the previous report until the new one is complete."""


def _cmd_audit(args) -> int:
    from ..audit import AuditConfig, AuditInputError, check_inputs, run_audit

    presets = [p.strip() for item in (args.presets or []) for p in item.split(",") if p.strip()]
    try:
        kw = {k: v for k, v in (("presets", tuple(presets) or None), ("n_boot", args.n_boot), ("seed", args.seed),
                                ("calibration_size", args.calibration_size), ("max_length", args.max_length),
                                ("eval_batch_size", args.eval_batch_size)) if v is not None}
        if args.quick and "n_boot" not in kw:
            kw["n_boot"] = 200
        cfg = AuditConfig(model=args.model, data=args.data, text_column=args.text_column, label_column=args.label_column,
                          slice_columns=tuple(args.slice_column or ()), budget_overall=args.budget_overall,
                          budget_slice=args.budget_slice, include_small_slices=args.include_small, quick=args.quick, **kw)
        checked = check_inputs(cfg, args.out)
    except AuditInputError as exc:
        return _fail(str(exc), 2)
    result = run_audit(cfg, log=lambda line: print(line, flush=True), checked=checked)
    print(f"report: {result.report_path}\nexit code {result.exit_code} ({result.seconds:.0f} s)")
    return result.exit_code


def _add_audit(sub) -> None:
    from ..audit import DEFAULT_PRESETS
    from ..quant import QuantConfig

    p = sub.add_parser(
        "audit", help="audit a fine-tuned classifier on all of your data: export, fuse, INT8 presets, slice drift, "
                      "search, one report.html; exit 0 meets the budget, 3 none does, 2 bad input",
        description="Audit a local Hugging Face sequence classifier on every row of a labelled file: export and "
                    "validate, fuse, quantize with the presets, per-slice accuracy drift with 95%% intervals, the "
                    "accuracy-constrained search, and one report. Nothing is trained and the file is not split: every row "
                    "is scored, except a seeded calibration subset for static presets (named in the report).",
        epilog=AUDIT_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="Hugging Face model folder (config.json, weights, tokenizer)")
    p.add_argument("--data", required=True, help="CSV, TSV, JSONL or Parquet file with a text and a label column")
    p.add_argument("--text-column", default="text", help="column holding the texts (default: text)")
    p.add_argument("--label-column", default="label", help="column holding the labels: the model's class names or ids")
    p.add_argument("--slice-column", action="extend", nargs="+", metavar="C",
                   help="column(s) to slice by, one slice per value (repeatable)")
    p.add_argument("--presets", nargs="+", metavar="P",
                   help=f"quantization presets (default: {' '.join(DEFAULT_PRESETS)}); one of {', '.join(QuantConfig.presets())}")
    p.add_argument("--budget-overall", type=float, default=0.01, help="accuracy a variant may lose overall (0.01 = 1 point)")
    p.add_argument("--budget-slice", type=float, default=0.02, help="accuracy a variant may lose on any slice of 50+ rows")
    p.add_argument("--include-small", action="store_true", help="hold slices under 50 rows to the budget too")
    p.add_argument("--out", help="output folder (default: runs/<timestamp>-audit-<model>)")
    p.add_argument("--quick", action="store_true", help="short timings, 200 bootstrap replicates (a smoke run)")
    p.add_argument("--n-boot", type=int, help="bootstrap replicates (default 1000; quick 200)")
    p.add_argument("--calibration-size", type=int, help="most rows held out to calibrate static presets (default 128, "
                                                        "and at most a fifth of the file)")
    p.add_argument("--max-length", type=int, help="tokens per text (default 128; longer texts are truncated)")
    p.add_argument("--eval-batch-size", type=int, help="rows per batch when scoring (default 32)")
    p.add_argument("--seed", type=int, help="seed of the calibration draw and the bootstrap (default 0)")
    p.set_defaults(func=_cmd_audit)


# --------------------------------------------------------------------------------------------
# workshop: the fine-tuned checkpoint the notebooks start from, prepared before the workshop
# --------------------------------------------------------------------------------------------
def _cmd_workshop(args) -> int:
    from .. import workshop

    try:
        recipe = workshop.workshop_recipe(args.model)
        folder = workshop.cache_dir(recipe, home=args.home)
        if workshop.is_cached(folder):
            info = workshop.load_info(folder)
            print(f"already prepared: {folder} ({info.model}, validation accuracy {info.val_accuracy:.3f})")
            return 0
        bar = _TrainProgressBar()
        try:
            folder = workshop.ensure_finetuned(recipe=recipe, home=args.home, log=lambda line: None, progress=bar)
        finally:
            bar.close()
    except (ValueError, workshop.WorkshopError) as exc:
        return _fail(str(exc))
    info = workshop.load_info(folder)
    print(f"prepared: {folder}\n  {info.model} fine-tuned with the demo recipe in {info.train_seconds:.0f} s, "
          f"validation accuracy {info.val_accuracy:.3f} on {info.val_examples} reviews, peak memory {info.peak_memory_mib:.0f} MiB\n"
          "  the notebooks reuse it; nothing is downloaded")
    return 0


def _add_workshop(sub) -> None:
    p = sub.add_parser("workshop", help="fine-tune the notebooks' model once and cache it (run before a workshop; offline)")
    p.add_argument("--model", default="minilm", help="minilm (default), tiny, or a model folder")
    p.add_argument("--home", help="cache folder (default $ORT_WORKBENCH_HOME or ~/.cache/ort-workbench)")
    p.set_defaults(func=_cmd_workshop)


# --------------------------------------------------------------------------------------------
# ondevice: training artifacts, onnxruntime.training.api vs PyTorch eager, inference export  (issue 13)
# --------------------------------------------------------------------------------------------
def _cmd_ondevice(args) -> int:
    from ..data import DataError
    from ..models import ModelError
    from ..ondevice import OnDeviceConfig, OnDeviceError, check_model, run_ondevice, table
    from ..runs import new_run_dir

    try:
        over = {k: v for k, v in (("trainable", args.trainable), ("last_n_layers", args.last_n), ("loss", args.loss),
                                  ("optimizer", args.optimizer), ("lr", args.lr), ("weight_decay", args.weight_decay),
                                  ("steps", args.steps), ("batch_size", args.batch_size), ("max_length", args.max_length),
                                  ("seed", args.seed), ("data", args.data), ("max_train", args.max_train), ("opset", args.opset),
                                  ("tolerance", args.tolerance), ("threads", args.threads),
                                  ("validation_examples", args.validation_examples)) if v is not None}
        if args.no_memory:
            over["measure_memory"] = False
        cfg = OnDeviceConfig.quick(model=args.model, **over) if args.model == "tiny" else OnDeviceConfig.default(model=args.model, **over)
        check_model(cfg)  # a wrong folder fails here, before a run folder is made
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(f"ondevice-{Path(args.model).name}", args.runs)
        bar = None if args.json else TerminalProgress("on-device")
        try:
            result = run_ondevice(cfg, run_dir, progress=None if bar is None else (lambda i, n, what: bar.update(i, n, what)),
                                  stop=_stop_on_sigint())
        finally:
            if bar is not None:
                bar.close()
    except (OnDeviceError, ModelError, DataError, ValueError) as exc:
        return _fail(" ".join(str(exc).split()))
    except OSError as exc:
        return _fail(f"cannot write the run folder ({exc.strerror or exc}); choose another --runs or --run-dir")
    if args.json:
        _print_json({"run_dir": str(run_dir), "result": str(run_dir / "ondevice.json"), "ok": result.ok,
                     "artifacts": result.artifacts, "loss_parity": result.loss_parity, "max_loss_diff": result.max_loss_diff,
                     "tolerance": result.tolerance, "ondevice_losses": result.ondevice_losses,
                     "pytorch_losses": result.pytorch_losses, "ondevice": result.ondevice, "pytorch": result.pytorch,
                     "step_time_ratio": result.step_time_ratio, "memory_ratio": result.memory_ratio,
                     "inference_dir": str(result.inference_dir), "validation": result.validation, "notes": result.notes})
    else:
        print(table(result))
        print(f"saved: {run_dir / 'ondevice.json'}   next: workbench fuse {result.inference_dir}")
    return 0 if result.ok else 1


def _add_ondevice(sub) -> None:
    p = sub.add_parser("ondevice", help="export ONNX Runtime on-device training artifacts, train with onnxruntime.training.api "
                                        "beside PyTorch eager, export the result for inference",
                       description="From a fine-tuned checkpoint: write the training, eval and optimizer graphs and the "
                                   "checkpoint; train STEPS steps with onnxruntime.training.api and with PyTorch eager on the "
                                   "same batches (dropout off); compare the loss curves, step time and peak memory; export "
                                   "the trained model to an inference graph (an export folder that `workbench fuse` and "
                                   "`workbench quantize` read). Exit 0: curves agree and the graph validates; 1: they do "
                                   "not; 2: bad input.")
    p.add_argument("--model", default="tiny", help="'tiny' (default), 'minilm' or a fine-tuned Hugging Face model folder")
    p.add_argument("--trainable", help="head (default for tiny), last (the last N layers + head; default for others) or all")
    p.add_argument("--last-n", type=int, help="with --trainable last: how many encoder layers train (default 1)")
    p.add_argument("--loss", help="loss in the training graph (CrossEntropyLoss)")
    p.add_argument("--optimizer", help="optimizer graph (AdamW)")
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--steps", type=int, help="training steps on each side (default 10; 20 for MiniLM)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--max-length", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--data", help="'reviews' or a CSV/TSV/JSONL/Parquet file with text and label columns")
    p.add_argument("--max-train", type=int, help="use at most this many training examples")
    p.add_argument("--opset", type=int, help="opset of the training export (default 14: the gradient builder fails at 17)")
    p.add_argument("--tolerance", type=float, help="largest per-step loss difference allowed (default 2e-5, measured)")
    p.add_argument("--threads", type=int, help="intra-op threads of both sides (default: PyTorch's)")
    p.add_argument("--validation-examples", type=int, help="examples the inference graph is validated on")
    p.add_argument("--no-memory", action="store_true", help="skip measuring peak memory (one fresh process per side)")
    p.add_argument("--runs", default="runs", help="folder for new run folders")
    p.add_argument("--run-dir", help="write into this folder instead of a new one")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_ondevice)

    def one_line_error(message: str) -> None:  # argparse's usage block would make it two lines
        p.exit(2, f"workbench ondevice: error: {message} (see workbench ondevice --help)\n")

    p.error = one_line_error


REGISTRARS: list[Callable] = [_add_core, _add_train, _add_graph, _add_quant, _add_demo, _add_audit, _add_workshop,
                               _add_ondevice]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description="ORT Workbench: ONNX Runtime for Hugging Face transformers, measured.")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in REGISTRARS:
        register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
