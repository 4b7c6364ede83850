"""One report to hand over: ``report.html`` (a single self-contained file) and ``summary.json``.

The same builder serves every front: ``workbench audit`` (:mod:`workbench.audit`), ``workbench
demo`` (:mod:`workbench.workflows.demo`) and the notebook ``Workbench``'s "Write report" button, which
reads a run folder with :func:`inputs_from_run`.

How it is built, so that the page and the JSON can never disagree:

1. :func:`build_summary` turns the stage results (:class:`ReportInputs`) into one plain dict,
   ``summary.json``, checked against :data:`SUMMARY_SCHEMA` (``schema_version``
   :data:`SCHEMA_VERSION`; the README documents its fields);
2. :func:`render_html` writes the page from that dict, plus the figures drawn from the results
   by ``workbench.plots``; plotly.js is inlined once in ``<head>``, so the file opens offline
   (from an e-mail attachment) and loads nothing else;
3. :func:`write_report` replaces ``summary.json`` and ``report.html`` as one unit: until the new
   pair is complete, the previous pair stays in place, and a reader never sees one of each.

The verdict considers quantized (INT8) variants only: the FP32 graph is the reference every
variant is measured against, never a candidate that "meets the budget".

Files:

- ``schema.py``: ``summary.json``'s schema, its version and the exit codes
- ``inputs.py``: :class:`ReportInputs` and :func:`inputs_from_run` (a run folder's results)
- ``environment.py``: facts about the machine and the packages
- ``rows.py``: plain rows of result objects (a slice's change, a quantization config in words)
- ``verdict.py``: the verdict (default budgets: ``workbench.quant.DEFAULT_BUDGET_OVERALL`` / ``_PER_SLICE``)
- ``summary.py``: :func:`build_summary`, every number as one dict
- ``page.py``: :func:`render_html`, the page and its figures
- ``cells.py``: the page's style and cells (escaped text, numbers, tables, figures)
- ``lengths.py``: the page's part on the speed at the data's own lengths
- ``embedding.py``: an embedding model's sections of the page
- ``write.py``: :func:`write_report`, :func:`write_run_report` (atomic writes)
"""

from .inputs import ReportInputs, inputs_from_run  # noqa: F401
from .page import render_html  # noqa: F401
from .schema import EXIT_INCOMPLETE, SCHEMA_VERSION, SUMMARY_SCHEMA, validate_summary  # noqa: F401
from .summary import build_summary  # noqa: F401
from .write import write_report, write_run_report  # noqa: F401
