"""The ``workbench`` parser: one sub-command per stage; bad input is one line and exit code 2, from argparse or a config."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence

from .audit import add_audit
from .common import fail, os_error_line
from .basics import add_basics
from .demo import add_demo
from .graph import add_graph
from .machine import add_machine
from .ondevice import add_ondevice
from .quant import add_quant
from .train import add_train

EXIT_CODES = """exit codes (every command):
  0  done, and every check it makes passed (validation, loss parity, the doctor's checks)
  1  done, but a check failed or a stage failed; the output says which
  2  bad input or a setting that cannot work: one line on stderr saying what was wrong and what to do
  3  audit only: no quantized variant meets the budgets

`workbench COMMAND --help` lists a command's flags with their defaults."""

REGISTRARS: list[Callable] = [add_basics, add_train, add_graph, add_quant, add_demo, add_audit, add_ondevice, add_machine]


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
    from ..runs import drop_created_if_empty

    from . import common

    args = build_parser().parse_args(argv)
    common._ARGS[:] = [args]
    from ..doctor.checks import TRAINING_COMMANDS, stack, training_refusal

    if args.command in TRAINING_COMMANDS and stack() == "current":  # no ORTModule, transformers 5: one line, make setup
        return fail(training_refusal(args.command))
    from .config_file import ConfigFileError, config_file_values

    try:
        config_file_values(args)  # a --config file read and checked before the command does anything
    except ConfigFileError as exc:
        return fail(str(exc))
    if isinstance(getattr(args, "model", None), str):  # a Hugging Face Hub id becomes its cached folder, before any stage
        from ..models.hub import model_source
        from ..models.load import ModelError

        try:
            args.model = model_source(args.model)
        except ModelError as exc:
            return fail(str(exc))
    from ..data.load import DataError
    from ..runs import RunError

    code = 2
    try:
        code = int(args.func(args) or 0)
        return code
    except (RunError, DataError) as exc:  # the user's input or machine: a locked run folder, unreadable data
        return fail(" ".join(str(exc).split()))
    except OSError as exc:  # a full or unwritable folder: one line; any other OS error is a bug and propagates
        line = os_error_line(exc, args)
        if line is None:
            raise
        return fail(line)
    except KeyboardInterrupt:  # Ctrl-C: files are written whole (atomic) and the run folder's lock is let go on the way out
        print(f"workbench {args.command}: stopped (Ctrl-C); what it finished is kept, nothing is half-written", file=sys.stderr)
        return 130
    finally:
        if code == 2:  # refused (or failed before finishing): no empty run folder left behind
            drop_created_if_empty()
        else:
            from ..runs.lock import CREATED

            CREATED.clear()


if __name__ == "__main__":
    sys.exit(main())
