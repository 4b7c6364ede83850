"""The quantization stage: INT8 (and 4-bit weight-only) with ONNX Runtime, scored slice by slice against the FP32 graph.

Files, one idea each:

- ``config.py``: :class:`QuantConfig` and its presets (with :class:`CalibrationConfig`, :class:`ValidationConfig`),
  :class:`TimingConfig`, :class:`QuantizeError`; ``formats.py``: the modes, formats and operator types per mode.
- ``baseline.py``: ``prepare_baseline``, the FP32 baseline (examples, slices, FP32 logits, calibration texts, FP32 latency).
- ``quantize.py``: quantizing and calibrating one graph file (dynamic, static QDQ/QOperator, weight-only).
- ``weightonly.py``: weight-only 4-bit MatMul weights (``MatMulNBits``, onnxruntime's MatMul4BitsQuantizer).
- ``nbits.py``: which weight-only bit widths this ONNX Runtime builds and runs (a probe on one small MatMul).
- ``sqnr.py``: per-node error (SQNR) between the FP32 and the quantized graph.
- ``quantizer.py``: :class:`Quantizer`, the one re-quantization with the worst nodes left in FP32, for every task.
- ``run.py``: the stage: ``run_quantization``, ``requantize_excluding``, :class:`QuantResult`.
- ``rows.py``: one row per quantized variant (:func:`variant_row`), read by the CLI, the report and the panel.
- ``budget.py``: the accuracy budgets (shared defaults), objectives, ``check_budget``.
- ``search.py``: :class:`SearchConfig`, ``run_search`` (quantize, score and time every candidate), ``search_results``
  (judge variants already quantized); ``choice.py``: the candidates, the choice among them and its message, for every task.
- ``evaluate.py``: :class:`EvalConfig`, ``evaluate_slices``, :class:`SliceReport` (slices and drift).
- ``bootstrap.py``: metrics of one model and the paired bootstrap of their change.
- ``flips.py``: predictions that changed, and accept/reject at confidence thresholds.
- ``views.py``: a quantization and a search as text (what the CLI prints).
- ``ship.py``: the chosen graph ready to ship (``chosen/``: the graph, its tokenizer, settings and a ``predict.py``).
"""

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
    fp32_latency,
    load_baseline,
    prepare_baseline,
)
from .quantize import (  # noqa: F401
    encoded_feeds,
    feeds_reader,
    activation_matmuls,
    preprocess_for_static,
    quantize_graph,
    quantized_nodes,
)
from .sqnr import NodeError, node_errors, worst_nodes  # noqa: F401
from .run import QuantResult, load_quant_result, requantize_excluding, run_quantization  # noqa: F401
from .rows import variant_row  # noqa: F401
from .budget import (  # noqa: F401
    DEFAULT_BUDGET_OVERALL,
    DEFAULT_BUDGET_PER_SLICE,
    DEFAULT_MIN_SPEEDUP,
    check_min_speedup,
    speed_guard,
    BudgetCheck,
    Objective,
    check_budget,
)
from .search import (  # noqa: F401
    SearchCandidate,
    SearchConfig,
    SearchResult,
    default_candidates,
    load_search,
    reusable_result,
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
