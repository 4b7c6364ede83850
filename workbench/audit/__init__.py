"""Audit someone else's classifier in one call: every row of their file scored, one report (docs/audit.md).

``run_audit(FOLDER, AuditConfig(data=FILE, ...), out_dir) -> AuditResult`` is the entry point; ``check_inputs``
runs its fast checks alone, before anything heavy (:class:`AuditInputError`, exit code 2). Its stages are the
registry's audit route (``workbench.workflows.stages.AUDIT_STAGES``); the FP32 graph is the reference, never a candidate.

- ``config.py``: :class:`AuditConfig`, :class:`AuditInputError`, the presets and file names
- ``inputs.py``: the inputs checked against the run asked for: ``check_model``, ``prepare_data``, ``check_inputs``
- ``stage.py``: :func:`run_audit`, :class:`AuditResult`, the audit route's configs and hooks, batch dependence"""

from .config import AuditConfig, AuditInputError  # noqa: F401
from .inputs import check_inputs, check_model, prepare_data  # noqa: F401
from .stage import AuditResult, run_audit  # noqa: F401
