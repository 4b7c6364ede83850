"""Audit someone else's classifier in one call: every row of their file scored, one report (docs/audit.md).

``run_audit(FOLDER, AuditConfig(data=FILE, ...), out_dir) -> AuditResult`` is the entry point
(``workbench audit`` is a thin front over it); ``check_inputs(FOLDER, cfg, out_dir)`` runs its fast checks
alone, before anything heavy, and raises :class:`AuditInputError` (exit code 2) for bad input. Its stages
are the registry's audit route (``workbench.workflows.stages.AUDIT_STAGES``): doctor, data, export, fuse,
quantize with the presets, evaluate (per-slice drift), search, ship (``chosen/``), report (``report.html``
and ``summary.json``, written atomically at the end). The FP32 graph is the reference, never a candidate.

Files:

- ``config.py``: :class:`AuditConfig`, :class:`AuditInputError`, the presets and file names
- ``inputs.py``: checking the inputs against the run asked for (model folder, labels, columns,
  calibration rows, slices, output folder): ``check_model``, ``prepare_data``, ``check_inputs``
- ``stage.py``: :func:`run_audit`, :class:`AuditResult`, the audit route's configs and hooks, and the
  batch-dependence measurement
"""

from .config import AuditConfig, AuditInputError  # noqa: F401
from .inputs import check_inputs, check_model, prepare_data  # noqa: F401
from .stage import AuditResult, run_audit  # noqa: F401
