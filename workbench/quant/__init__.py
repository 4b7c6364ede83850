"""The quantization stage: INT8 (and 4-bit weight-only) with ONNX Runtime, scored slice by slice against the FP32 graph.

Files, one idea each:
- ``config.py``: :class:`QuantConfig` and its presets, :class:`TimingConfig`, :class:`QuantizeError`; ``formats.py``: the
  modes, formats and operator types per mode; ``baseline.py``: ``prepare_baseline``, the FP32 graph scored once.
- ``quantize.py``: one graph file quantized (dynamic, static QDQ/QOperator, weight-only); ``weightonly.py``: 4-bit
  ``MatMulNBits`` weights; ``nbits.py``: the weight-only bit widths this ONNX Runtime runs (a probe).
- ``sqnr.py``: per-node error (SQNR); ``quantizer.py``: :class:`Quantizer`, re-quantization leaving the worst nodes in FP32.
- ``run.py``: the stage: ``run_quantization``, ``requantize_excluding``, :class:`QuantResult`; ``rows.py``: one row per
  variant (:func:`variant_row`) for the CLI, the report and the panel.
- ``budget.py``: the accuracy budgets, objectives, ``check_budget``; ``search.py``: :class:`SearchConfig`, ``run_search``,
  ``search_results``; ``choice.py``: the candidates, the choice among them and its message, for every task.
- ``evaluate.py``: :class:`EvalConfig`, ``evaluate_slices``, :class:`SliceReport`; ``bootstrap.py``: metrics and their
  paired bootstrap; ``flips.py``: changed predictions and confidence thresholds.
- ``views.py``: results as the CLI prints them; ``ship.py``: the chosen graph ready to ship (``chosen/``)."""

from .config import (  # noqa: F401
    PRESET_TABLE,
    PRESETS,
    machine_defaults,
    machine_preset,
    CalibrationConfig,
    ValidationConfig,
    applies_to,
    QuantConfig,
    QuantizeError,
    TimingConfig,
)
from .formats import DYNAMIC_OP_TYPES, STATIC_OP_TYPES, QuantMode  # noqa: F401
from .baseline import (  # noqa: F401
    BASELINE_DIR,
    DEFAULT_EVAL_BATCH_SIZE,
    Baseline,
    BaselineConfig,
    load_baseline,
    prepare_baseline,
)
from .quantize import quantize_graph, quantized_nodes  # noqa: F401
from .sqnr import NodeError, node_errors, worst_nodes  # noqa: F401
from .run import QuantResult, load_quant_result, requantize_excluding, run_quantization  # noqa: F401
from .rows import variant_row  # noqa: F401
from .budget import (  # noqa: F401
    DEFAULT_BUDGET_OVERALL,
    DEFAULT_BUDGET_PER_SLICE,
    DEFAULT_MIN_SPEEDUP,
    check_min_speedup,
    BudgetCheck,
    Objective,
    check_budget,
)
from .search import (  # noqa: F401
    SearchCandidate,
    SearchConfig,
    SearchResult,
    load_search,
    run_search,
    select_candidate,
)
from .views import result_text, search_text  # noqa: F401
from .bootstrap import METRICS, EvaluationError, Preds, weighted_metrics, slice_metrics  # noqa: F401
from .flips import Flip, FlipKind, sort_flips  # noqa: F401
from .evaluate import (  # noqa: F401
    DEFAULT_N_BOOT,
    MIN_SLICE_SIZE,
    EvalConfig,
    SliceDrift,
    SliceReport,
    evaluate_slices,
    softmax,
)
