"""One report to hand over: ``report.html`` (one self-contained file) and ``summary.json``, the same for
``workbench audit``, ``workbench demo`` and the notebook's "Write report" button (:func:`inputs_from_run`).

The page is rendered from the checked summary dict, never from the results, so the two cannot disagree;
plotly.js is inlined once so the page opens offline. The verdict judges INT8 variants only: the FP32
graph is the reference, never a candidate.

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
- ``write.py``: :func:`write_report`, :func:`write_run_report` (the pair replaced as one unit)
"""

from .inputs import ReportInputs, inputs_from_run  # noqa: F401
from .page import render_html  # noqa: F401
from .schema import EXIT_INCOMPLETE, SCHEMA_VERSION, SUMMARY_SCHEMA, validate_summary  # noqa: F401
from .summary import build_summary  # noqa: F401
from .write import write_report, write_run_report  # noqa: F401
