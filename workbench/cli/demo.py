"""``demo`` (the whole walkthrough headless, into one run folder) and ``workshop`` (the notebooks' model, prepared once)."""

from __future__ import annotations

from pathlib import Path

from .common import fail, locked, output_flags
from .flags import Flag, add_config_flags, build, cli_only
from .progress import TrainProgressBar, drawn, stop_on_sigint

DEMO_FLAGS = ("backends", Flag("train.max_steps", "steps", help="training steps per backend"), "search")


def _cmd_demo(args) -> int:
    from ..workflows.demo import DemoConfig

    try:
        cfg = build(DemoConfig, args, base=DemoConfig.quick() if args.quick else DemoConfig.default())
    except ValueError as exc:
        return fail(str(exc))
    return _run_demo(cfg, args, "demo-quick" if args.quick else "demo")


def _cmd_run(args) -> int:
    from ..workflows.plan import PlanError, load_plan

    try:
        cfg, _ = load_plan(args.plan)
    except PlanError as exc:
        return fail(str(exc))
    return _run_demo(cfg, args, Path(args.plan).stem)


def _run_demo(cfg, args, name: str) -> int:
    from ..runs import new_run_dir
    from ..workflows.demo import run_demo

    try:
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(name, args.runs)
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = args.run_dir or args.runs
        return fail(f"cannot create a run folder in {where!r} ({exc.strerror or exc}); choose another --runs or --run-dir")
    with locked(run_dir, args, "demo"), drawn(TrainProgressBar()) as bar:
        result = run_demo(cfg, run_dir, log=lambda line: print(line, flush=True), progress=bar, stop=stop_on_sigint())
    return 0 if result.ok else 1


def _cmd_workshop(args) -> int:
    from ..teaching import workshop

    try:
        recipe = workshop.workshop_recipe(args.model)
        folder = workshop.cache_dir(recipe, home=args.home)
        if workshop.is_cached(folder):
            info = workshop.load_info(folder)
            print(f"already prepared: {folder} ({info.model}, validation accuracy {info.val_accuracy:.3f})")
            return 0
        with drawn(TrainProgressBar()) as bar:
            folder = workshop.ensure_finetuned(recipe=recipe, home=args.home, log=lambda line: None, progress=bar)
    except (ValueError, workshop.WorkshopError) as exc:
        return fail(str(exc))
    info = workshop.load_info(folder)
    print(f"prepared: {folder}\n  {info.model} fine-tuned with the demo recipe in {info.train_seconds:.0f} s, "
          f"validation accuracy {info.val_accuracy:.3f} on {info.val_examples} reviews, peak memory {info.peak_memory_mib:.0f} MiB\n"
          "  the notebooks reuse it; nothing is downloaded")
    return 0


def add_demo(sub) -> None:
    from ..workflows.demo import DemoConfig

    p = sub.add_parser("demo", help="the whole walkthrough headless: fine-tune, compare, export, fuse, quantize, slices")
    cli_only(p, "--quick", action="store_true", help="tiny model and small data (about a minute); the defaults shown "
                                                      "below are the full demo's")
    add_config_flags(p, DemoConfig, DEMO_FLAGS, base=DemoConfig.default())
    output_flags(p, "write into this folder instead of a new one under --runs", json=None)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("run", help="run the demo's stages as a plan file describes them (YAML or JSON: stages and their configs)")
    p.add_argument("plan", help="plan file: quick, stages, config (see workbench.workflows.plan)")
    output_flags(p, "write into this folder instead of a new one under --runs", json=None)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("workshop", help="fine-tune the notebooks' model once and cache it (run before a workshop; offline)")
    cli_only(p, "--model", default="minilm", help="minilm (default), tiny, or a model folder")
    cli_only(p, "--home", help="cache folder (default $WORKBENCH_HOME or ~/.cache/ort-workbench)")
    p.set_defaults(func=_cmd_workshop)
