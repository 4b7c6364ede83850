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

from . import serial


def _print_json(obj) -> None:
    print(json.dumps(serial.to_dict(obj), indent=2, allow_nan=False))


def _fail(message: str, code: int = 2) -> int:
    print(f"workbench: error: {message}", file=sys.stderr)
    return code


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
    from .env import run_doctor

    report = run_doctor()
    if args.json:
        _print_json({"ok": report.ok, "checks": [{**serial.to_dict(c), "status": c.status} for c in report.checks]})
    else:
        print(report.as_text())
    return 0 if report.ok else 1


def _cmd_data(args) -> int:
    from .data import DataConfig, DataError, load_data, summarize
    from .slices import slice_collection

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
    for split, n in summary.split_sizes.items():
        print(f"  {split:<10} {n:>6}  {summary.class_counts[split]}")
    print(f"slices ({args.slices}) on the test split:")
    for name, n in sizes.items():
        print(f"  {name:<28} {n:>6}")
    return 0


def _cmd_runs(args) -> int:
    from .runs import list_runs

    runs = list_runs(args.runs)
    if args.json:
        _print_json([{"path": str(r.path), "stages": list(r.stages)} for r in runs])
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
def _add_train(sub) -> None:
    pass


# --------------------------------------------------------------------------------------------
# export, fuse  (issue 4)
# --------------------------------------------------------------------------------------------
def _add_graph(sub) -> None:
    pass


# --------------------------------------------------------------------------------------------
# quantize  (issue 5)
# --------------------------------------------------------------------------------------------
def _add_quant(sub) -> None:
    pass


# --------------------------------------------------------------------------------------------
# demo: the whole walkthrough
# --------------------------------------------------------------------------------------------
def _add_demo(sub) -> None:
    pass


REGISTRARS: list[Callable] = [_add_core, _add_train, _add_graph, _add_quant, _add_demo]


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
