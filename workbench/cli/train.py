"""``train`` (one backend) and ``compare`` (several backends, same config): fine-tuning on the terminal."""

from __future__ import annotations

from pathlib import Path

from .. import runs
from ..core.options import int_at_least
from .common import fail, locked, print_json, stage_dir, output_flags
from .flags import Flag, add_config_flags, build, cli_only
from .progress import TrainProgressBar, drawn, stop_on_sigint

_TRAIN_PRESETS = ("quick", "demo", "full", "bench")

# TrainConfig fields as flags (the ORTModule ones in their own group of --help)
TRAIN_FLAGS = (
    "model", Flag("data.source", "data"), Flag("data.max_train", "max-train"), "epochs", "batch_size", "grad_accum",
    "max_length", "pad_to_max", "lr", "schedule", "warmup_steps", "optimizer", "seed", "dropout", "eval_every", "threads",
    "device", "precision",
    Flag("compile_mode", choices=("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")),
)
ORTMODULE_FLAGS = (
    "opset", Flag("memory_optimizer_level", choices=(0, 1, 2)), "ort_threads",
    Flag("ort_graph_optimization", choices=("disabled", "basic", "extended", "all")),
    Flag("ort_allow_spinning", "spinning"), "fallback", "save_graphs",
)


def train_config(args):
    from ..models.load import BUILTIN_MODELS, ModelError, check_model_type, resolve_model_path
    from ..train import TrainConfig, TrainConfigError

    if (args.model or BUILTIN_MODELS[0]) not in BUILTIN_MODELS:
        # a wrong folder or model type is one line (the types that work), before any data is read
        try:
            check_model_type(resolve_model_path(args.model))
        except ModelError as exc:
            raise TrainConfigError(str(exc)) from exc
    try:
        return build(TrainConfig, args, base=getattr(TrainConfig, args.preset)())
    except TrainConfigError:
        raise
    except ValueError as exc:  # DataConfig's checks (--max-train): the same one line
        raise TrainConfigError(str(exc)) from exc


def _check_data(cfg) -> None:
    """A user's data file read and split before any run folder or child process exists, so its problem is one line."""
    from ..data.load import BUILTIN, load_data

    if cfg.data.source != BUILTIN:
        load_data(cfg.data)  # a DataError: the one line of workbench.cli.app.main


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
    from ..train import TrainConfigError, run_text, run_training
    from ..train.distributed import check_nproc

    try:
        check_nproc(args.nproc, "--nproc")
        cfg = train_config(args)
        _check_data(cfg)
    except ValueError as exc:  # TrainConfigError, DataError
        return fail(" ".join(str(exc).split()))
    run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(f"train-{args.backend}", args.runs)
    out = stage_dir(run_dir, "train")  # the run layout: <run>/train/<backend>/
    try:
        with locked(out, args, "train"), drawn(None if args.json else TrainProgressBar()) as bar:
            if args.nproc > 1:
                from ..train.distributed import run_distributed

                result = run_distributed(cfg, args.backend, nproc=args.nproc, run_dir=out)
                run = result.run
            else:
                run = run_training(cfg, args.backend, out, progress=bar, stop=stop_on_sigint())
    except TrainConfigError as exc:
        return fail(str(exc))
    summary = _run_summary(run)
    if args.nproc > 1:
        summary.update(world_size=args.nproc, identical_weights_across_ranks=result.identical_weights)
    if args.json:
        print_json({**summary, "run_dir": str(run_dir)})
    else:
        print(run_text(run))
        print(f"saved: {out / run.backend.value}")
    return 0 if run.status.value in ("ok", "stopped") else 1


def _cmd_compare(args) -> int:
    from ..runs import new_run_dir
    from ..train import (CompareConfig, TrainConfigError, comparison_table, load_check, run_comparison, save_verdicts,
                         verdict_lines, verdicts_for)

    try:
        cfg = train_config(args)
        compare = build(CompareConfig, args, isolate=not args.in_process)
        _check_data(cfg)
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir("compare", args.runs)
        out = stage_dir(run_dir, "train")  # the run layout: <run>/train/compare.json, <run>/train/<backend>/
        with locked(out, args, "compare"), drawn(None if args.json else TrainProgressBar()) as bar:
            profile, before = load_check()
            c = run_comparison(cfg, compare, out, progress=bar, stop=stop_on_sigint())
            verdicts = verdicts_for(c, profile=profile, load=load_check(profile, before)[1])
            save_verdicts(verdicts, out)
    except TrainConfigError as exc:
        return fail(str(exc))
    if args.json:
        print_json({
            "run_dir": str(run_dir), "baseline": c.baseline.value, "loss_parity": c.loss_parity,
            "tolerance": c.tolerance, "parity_basis": c.parity_basis,
            "backends": {s.backend.value: {**_run_summary(c.run(s.backend)),
                                           "metrics": [m for m in s.metrics()]} for s in c.summaries},
            "ratios": {r.backend.value: r for r in c.ratios}, "notes": c.notes, "verdicts": verdicts.verdicts,
            "machine": verdicts.machine, "load": verdicts.load, "contended": verdicts.contended,
        })
    else:
        print(comparison_table(c))
        for v in verdicts.verdicts:
            print("\n".join(verdict_lines(v)))
        print(f"saved: {out / runs.layout.COMPARE_FILE}   next: workbench export --model {run_dir}")
    return 0 if all(s.status.value == "ok" for s in c.summaries) and c.loss_parity else 1


def _train_flags(p, steps_help: str) -> None:
    from ..train import TrainConfig

    cli_only(p, "--preset", default="quick", choices=_TRAIN_PRESETS,
             help="starting point, whose values the flags below change (defaults shown are quick's): quick (tiny model, "
                  "seconds), demo (MiniLM, minutes), full (MiniLM, all data), bench")
    steps = Flag("max_steps", "steps", help=steps_help)
    add_config_flags(p, TrainConfig, (*TRAIN_FLAGS[:3], steps, *TRAIN_FLAGS[3:]), base=TrainConfig.quick())
    add_config_flags(p, TrainConfig, ORTMODULE_FLAGS, base=TrainConfig.quick(), group=p.add_argument_group("ORTModule"))
    output_flags(p, "write into this run folder instead of a new one", json="print the result as JSON (no progress bar)")


def add_train(sub) -> None:
    from ..train import Backend, CompareConfig

    p = sub.add_parser("train", help="fine-tune with one backend (eager, ortmodule, compile); Ctrl-C stops cleanly")
    cli_only(p, "--backend", default="eager", choices=[b.value for b in Backend], help="what runs the training step")
    cli_only(p, "--nproc", type=int_at_least(1), default=1, help="processes under torchrun with DistributedDataParallel (eager, ortmodule)")
    _train_flags(p, "optimizer steps (overrides --epochs)")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("compare", help="train several backends with the same config and compare them")
    add_config_flags(p, CompareConfig, ("backends", "tolerance"))
    cli_only(p, "--in-process", action="store_true", help="run the backends in this process (default: one process each, "
                                                           "so peak memory is per backend)")
    _train_flags(p, "optimizer steps per backend")
    p.set_defaults(func=_cmd_compare)
