"""Audit someone else's classifier in one call: every row of their file scored, one report.

``run_audit(FOLDER, AuditConfig(data=FILE, ...), out_dir) -> AuditResult`` is the entry point
(``workbench audit`` is a thin front over it; ``check_inputs(FOLDER, cfg, out_dir)`` runs its fast
checks alone, ``check_model`` and ``prepare_data`` parts of them):

    check the inputs (fast, nothing heavy) -> doctor (the environment) -> data (and its slices)
    -> export (validated) -> fuse -> quantize with the presets -> evaluate (per-slice drift)
    -> search -> ship (the chosen graph into chosen/) -> report

(the stage registry's audit route, ``workbench.workflows.stages.AUDIT_STAGES``)

- **Every row is scored.** No training and no train/validation/test split: all rows with a text
  and a label are scored, except, when a static preset is asked for, a seeded calibration
  subset (at most ``calibration_size`` rows and ``calibration_fraction`` of the file) that is
  held out of the scoring and named, row by row, in the report.
- **Labels** may be the model's class names or its ids; they are mapped through the model's
  ``id2label``/``label2id`` (``config.json``); any number of classes.
- **Slices**: one per value of each ``slice_columns`` column, plus the built-in text slices
  (negation, contrast, length, punctuation) and one per class. (The built-in "rare words"
  slice is left out: it is defined against a training set, which an audit does not have.)
- **Bad input** raises :class:`AuditInputError` before anything heavy runs (no export, no
  model weights loaded): no such folder, not a sequence-classification model, an architecture
  the exporter does not handle, label values the model does not know (both sets listed),
  missing columns (the columns found listed), an empty or unreadable file.
- **Verdict and exit code** (:attr:`AuditResult.exit_code`): 0 when a quantized variant meets
  both budgets, 3 when none does, 1 when a stage failed; bad input is 2 (the CLI). The FP32
  graph is the reference, never a candidate.

Everything lands in ``out_dir``: ``export/``, ``fusion/``, ``quantize/<preset>/``,
``search/search.json``, ``chosen/`` (the graph the verdict keeps, its tokenizer, labels, ``settings.json``
and a ``predict.py`` that needs only onnxruntime, tokenizers and numpy: :mod:`workbench.quant.ship`),
``audit.json`` (the config and data facts), and the report
(:mod:`workbench.report`): ``report.html`` and ``summary.json``, written atomically at the end,
so a re-run into the same folder leaves the previous report in place until the new one is done.

Files:

- ``config.py``: :class:`AuditConfig`, :class:`AuditInputError`, the presets and file names
- ``inputs.py``: checking the inputs against the run asked for (model folder, labels, columns,
  calibration rows, slices, output folder): ``check_model``, ``prepare_data``, ``check_inputs``
- ``stage.py``: :func:`run_audit`, :class:`AuditResult`, the audit route's configs and hooks, and the
  batch-dependence measurement
"""

from .config import (  # noqa: F401
    AUDIT_FILE,
    AUDIT_NEEDS,
    DEFAULT_PRESETS,
    WEIGHT_FILES,
    AuditConfig,
    AuditInputError,
)
from .inputs import (  # noqa: F401
    CheckedInputs,
    ModelFacts,
    PreparedData,
    audit_slices,
    check_inputs,
    check_model,
    map_labels,
    prepare_data,
)
from .stage import AuditResult, batch_dependence, run_audit  # noqa: F401
