"""``export`` (a model to ONNX, validated against PyTorch) and ``fuse`` (the graph optimized several ways, timed, diffed)."""

from __future__ import annotations

from pathlib import Path

from ..core import serial
from .common import fail, locked, print_json, run_of, say, stage_dir, output_flags
from .flags import Flag, add_config_flags, build, cli_only

EXPORT_FLAGS = ("opset", "max_length", Flag("attn_implementation", "attn"), "tolerance", "validation_examples",
                Flag("validation_split", "split"), "device", Flag("exporter", choices=("auto", "torchscript", "dynamo")))
FUSE_FLAGS = (
    "variants", "shapes", "threads", "warmup", "repeats",
    Flag("measure_latency", "latency", also=("time_pytorch",)),
    Flag("transformer_session", choices=("disabled", "basic", "extended", "all")),
    Flag("opt_level", choices=(0, 1, 2, 99)), Flag("fusion", choices=("timed", "full")), "num_heads", "hidden_size",
    "tolerance", "device", "fp16", "cuda_graph",
)
_FUSE_PRESETS = {"default": "default", "quick": "quick", "inspect": "inspect_only", "gpu": "gpu"}


def _cmd_export(args) -> int:
    from ..data.load import DataConfig, load_data
    from ..graph import ExportConfig, ExportError, export_text, run_export
    from ..models.hub import model_name
    from ..models.load import BUILTIN_MODELS, check_classifier, check_model_type, resolve_model_path
    from ..runs import RunError, layout, new_run_dir  # RunError: a run folder without the stage asked for
    from ..runtime.device import require_device

    try:
        require_device(args.device or "cpu")  # a device that cannot be used here: a DeviceError, before any work
        cfg = build(ExportConfig, args, base=getattr(ExportConfig, args.preset)())
        model, run, note = args.model, None, None
        given = Path(model)
        if (model not in BUILTIN_MODELS and given.exists() and not (given / "config.json").is_file()
                and (run := run_of(given)) is not None):
            # a run folder, one of its folders or a result file: export the checkpoint workbench.flow.handoffs picks
            pick = run.require("finished training run with a checkpoint", run.checkpoint_to_export(),
                               f"run `workbench compare --run-dir {run.root}` first, or pass --model a checkpoint folder")
            model, note = str(pick.path), pick.note
        elif given.is_dir():
            run = run_of(given)  # a checkpoint inside a run: the export goes into that run
        if model not in BUILTIN_MODELS:  # a wrong folder, model type or head fails before the data is read
            check_model_type(resolve_model_path(model))
            check_classifier(resolve_model_path(model))
        if note:
            say(note, args.json)
        data = load_data(DataConfig.quick(source=args.data) if args.preset == "quick" else DataConfig(source=args.data))
        run_dir = Path(args.run_dir) if args.run_dir else (run.root if run is not None else
                                                           new_run_dir(f"export-{model_name(model)}", args.runs))
        out = stage_dir(run_dir, "export")
        with locked(out, args, "export"):
            result = run_export(model, cfg, out, data=data)
    except (ExportError, ValueError, RunError) as exc:  # ModelError, DataError: ValueErrors
        return fail(str(exc))
    v = result.validation
    if args.json:
        print_json({"run_dir": str(run_dir), "result": str(out / layout.EXPORT_FILE), "input": note, **serial.to_dict(result)})
    else:
        print(export_text(result))
        print(f"saved:      {out / layout.EXPORT_FILE}   next: workbench fuse {run_dir}")
    return 0 if v.passed else 1


def _cmd_fuse(args) -> int:
    from ..graph import ExportError, FusionConfig, FusionError, run_fusion, summary, table
    from ..runs import layout
    from ..runtime.device import require_device

    source = Path(args.source)
    try:
        require_device(args.device or "cpu")  # a device that cannot be used here: a DeviceError, before any work
        run = run_of(source)
        src, out_dir = source, (source if source.is_dir() else source.parent)  # a bare graph or export folder
        if run is not None:
            if not (source.suffix == ".onnx" and source.is_file()):  # an explicit graph is fused as given
                pick = run.require("export", run.export_to_fuse(),
                                   f"run `workbench export --model MODEL --run-dir {run.root}` first")
                src = pick.path
                say(pick.note, args.json)
            out_dir = run.stage_dir("fusion")
        # a flag not given keeps the preset's value (--device: cpu, cuda for --preset gpu)
        cfg = build(FusionConfig, args, base=getattr(FusionConfig, _FUSE_PRESETS[args.preset])())
        if source.suffix == ".onnx" and source.is_file():
            from ..graph.facts import load_graph

            load_graph(source)  # a truncated or foreign file is one line naming it, before any folder is made
        out_dir = Path(args.run_dir) if args.run_dir else out_dir
        with locked(out_dir, args, "fuse"):
            report = run_fusion(src, cfg, out_dir)
    except (FusionError, ExportError, FileNotFoundError, ValueError) as exc:  # RunError: a FileNotFoundError
        return fail(str(exc))
    if args.json:
        print_json({"run_dir": str(out_dir), "result": str(out_dir / layout.FUSION_FILE), **summary(report)})
    else:
        print(table(report))
        taken = f"   taken by later stages: {report.chosen_path}" if report.chosen_path != report.fused_path else ""
        print(f"\nsaved: {out_dir / layout.FUSION_FILE}   fused graph: {report.fused_path}{taken}")
    return 0 if report.all_passed else 1


def add_graph(sub) -> None:
    from ..graph import ExportConfig, FusionConfig

    p = sub.add_parser("export", help="export a model to ONNX and validate it against PyTorch on real examples")
    cli_only(p, "--model", default="minilm", help="'minilm', 'tiny', a checkpoint / Hugging Face model folder, "
                                                        "or a Hub id (ORG/NAME, read from the Hugging Face cache)")
    cli_only(p, "--preset", default="default", choices=["default", "quick", "strict"],
             help="starting point, whose values the flags below change (defaults shown are default's): default: opset 17, "
                  "128 tokens, tolerance 1e-3; quick: fewer, shorter examples; strict: tolerance 1e-5")
    add_config_flags(p, ExportConfig, EXPORT_FLAGS, base=ExportConfig.default())
    cli_only(p, "--data", default="reviews", help="'reviews' or a CSV/TSV/JSONL/Parquet file with text and label columns")
    output_flags(p, "write into this run folder (its root or any folder of it) instead of a new one")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("fuse", help="optimize an exported graph (session levels, transformer optimizer): "
                                    "validate, time, diff, trace fused nodes, diagnose missing fusions")
    p.add_argument("source", help="any folder of a run (its root, export/, fusion/, ...) or a result file in it: the "
                                  "run's newest export is fused into <run>/fusion; or an export folder or an .onnx file")
    cli_only(p, "--preset", default="default", choices=list(_FUSE_PRESETS),
             help="starting point, whose values the flags below change (defaults shown are default's): default: 3 shapes "
                  "x 20 runs; quick: 2 small shapes x 3 runs, 1 thread; inspect: no timing; gpu: CUDA, FP16, CUDA graphs "
                  "and PyTorch's GPU peers at 1x128 and 32x128")
    add_config_flags(p, FusionConfig, FUSE_FLAGS, base=FusionConfig.default())
    output_flags(p, "where to write (default: <run>/fusion; the source's folder outside a run)", new_runs=False,
                 json="print a summary as JSON (the full report is fusion.json)")
    p.set_defaults(func=_cmd_fuse)
