"""The ``workbench`` parser: one sub-command per stage, registered by its module; bad input is
one line on stderr and exit code 2, whether argparse or a config finds it."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence

from .audit import _add_audit
from .basics import _add_basics
from .demo import _add_demo
from .graph import _add_graph
from .machine import _add_machine
from .ondevice import _add_ondevice
from .quant import _add_quant
from .train import _add_train

EXIT_CODES = """exit codes (every command):
  0  done, and every check it makes passed (validation, loss parity, the doctor's checks)
  1  done, but a check failed or a stage failed; the output says which
  2  bad input or a setting that cannot work: one line on stderr saying what was wrong and what to do
  3  audit only: no quantized variant meets the budgets

`workbench COMMAND --help` lists a command's flags with their defaults."""

REGISTRARS: list[Callable] = [_add_basics, _add_train, _add_graph, _add_quant, _add_demo, _add_audit, _add_ondevice, _add_machine]


class OneLineErrors(argparse.ArgumentParser):
    """argparse's errors as one line (its usage block would make them several), naming where the help is."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(prog="workbench", description="ORT Workbench: ONNX Runtime for Hugging Face transformers, measured.",
                           epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)
    for register in REGISTRARS:
        register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
