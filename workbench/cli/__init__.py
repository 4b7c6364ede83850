"""Command-line front: ``workbench <command>`` (entry point :func:`main`; also ``python -m workbench.cli``).

Thin: every command calls the same library functions the widgets call, prints the library's
summary or ``--json``, and writes into a run folder. The flags that set a stage's config are
derived from the config dataclass (:mod:`.flags`); bad input is one line and exit code 2.

Commands, by file:

| file | commands | what they call |
| --- | --- | --- |
| ``basics.py`` | ``doctor``, ``data``, ``runs`` | ``env.run_doctor``, ``data.load_data``, ``runs.list_runs`` |
| ``train.py`` | ``train``, ``compare`` | ``train.run_training`` / ``run_distributed``, ``train.run_comparison`` |
| ``graph.py`` | ``export``, ``fuse`` | ``graph.run_export``, ``graph.run_fusion`` |
| ``quant.py`` | ``quantize`` (``--search``) | ``quant.run_quantization``, ``quant.run_search`` |
| ``demo.py`` | ``demo``, ``workshop`` | ``pipeline.run_demo``, ``workshop.ensure_finetuned`` |
| ``audit.py`` | ``audit`` | ``audit.run_audit`` |
| ``ondevice.py`` | ``ondevice`` (``import``, ``serve``) | ``ondevice.run_ondevice``, ``browser.import_parameters``, ``web.PageServer`` |
| ``machine.py`` | ``machine`` | ``machine.machine_profile``, ``machine.check_load`` |

Shared pieces: ``app.py`` (the parser, exit codes, one-line errors), ``flags.py`` (flags from a
config dataclass and the config back from them), ``fields.py`` (each field's ``--help`` text),
``common.py`` (JSON output, the error line, the device check), ``progress.py`` (progress bars,
Ctrl-C).
"""

from .app import build_parser, main  # noqa: F401
from .train import train_config  # noqa: F401
