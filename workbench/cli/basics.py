"""``doctor`` (the environment), ``data`` (splits and slices of a data set) and ``runs`` (the run folders)."""

from __future__ import annotations

from pathlib import Path

from ..core import serial
from .common import fail, print_json, output_flags
from .flags import Flag, add_config_flags, build, cli_only

DATA_FLAGS = ("source", "text_column", "label_column", Flag("slice_columns", nargs="*", split=False), "seed")


def _cmd_doctor(args) -> int:
    from ..doctor.checks import run_doctor

    report = run_doctor()
    if args.json:
        print_json({"ok": report.ok, "checks": [{**serial.to_dict(c), "status": c.status} for c in report.checks]})
    else:
        print(report.as_text())
    return 0 if report.ok else 1


def _cmd_data(args) -> int:
    from ..data.load import DataConfig, DataError, load_data, summarize_data
    from ..data.slices import slice_collection

    try:
        cfg = build(DataConfig, args)
        dd = load_data(cfg)
    except DataError as exc:
        return fail(str(exc))
    summary = summarize_data(dd, cfg.source)
    names = summary.classes
    slices = slice_collection(args.slices, names, dd["train"]["text"], cfg.slice_columns, dd["test"])
    sizes = {k: int(v.sum()) for k, v in slices.membership(dd["test"]).items()}
    if args.json:
        print_json({"summary": summary, "test_slice_sizes": sizes})
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

    if Path(args.runs).exists() and not Path(args.runs).is_dir():
        return fail(f"--runs {args.runs} is a file, not a folder of run folders; pass --runs the folder that holds them")
    runs = list_runs(args.runs)
    if args.json:  # with each stage's newest result, where the run layout (or an older one) put it
        print_json([{"path": str(r.path), "stages": list(r.stages),
                      "results": {k: v.relative_to(r.path).as_posix() for k, v in find_results(r.path).items()}}
                     for r in runs])
        return 0
    if not runs:
        print(f"no runs under {args.runs}")
    for r in runs:
        print(f"{r.path}  {', '.join(r.stages) or '(empty)'}")
    return 0


def add_basics(sub) -> None:
    from ..data.load import DataConfig

    p = sub.add_parser("doctor", help="check the environment; non-zero exit when a needed piece is missing")
    output_flags(p, None, new_runs=False, json="print the checks as JSON")
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("data", help="load data, show splits and slice sizes")
    add_config_flags(p, DataConfig, DATA_FLAGS)
    cli_only(p, "--slices", default="default", choices=["default", "golden"],
             help="slice set to count on the test split (default: default)")
    output_flags(p, None, new_runs=False, json="print the summary and slice sizes as JSON")
    p.set_defaults(func=_cmd_data)

    p = sub.add_parser("runs", help="list run folders")
    output_flags(p, None, json="print the list as JSON")
    p.set_defaults(func=_cmd_runs)
