"""Command-line front: ``workbench <command>`` (entry point :func:`main`; also ``python -m workbench.cli``).

Thin: every command calls the library functions the widgets call, prints the library's summary or
``--json``, and writes into a run folder; one module per group of commands (``app.py`` registers them).
Flags that set a stage's config are derived from the config dataclass (``flags.py``, ``config_fields.py``,
``config_file.py`` for ``--config FILE``); ``common.py`` holds the one-line error (exit code 2), JSON output
and the run-folder lock; ``progress.py`` the progress bars and Ctrl-C.
"""

from .app import build_parser, main  # noqa: F401
from .train import train_config  # noqa: F401
