"""Command-line front: ``workbench <command>`` (:func:`main`; also ``python -m workbench.cli``). Thin: every command
calls what the widgets call. ``app.py`` registers one module per group of commands; ``flags.py``, ``config_fields.py``
and ``config_file.py`` (``--config FILE``) derive flags from the config dataclasses; ``common.py``: the one-line error
(exit code 2), JSON output and the run-folder lock; ``progress.py``: the progress bars and Ctrl-C."""

from .app import build_parser, main  # noqa: F401
from .train import train_config  # noqa: F401
