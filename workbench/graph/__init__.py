"""The graph stage: export a classifier to ONNX, prove the graph computes what the model computes,
and show what ONNX Runtime's fusions do to it.

Entry points (what a user calls):

- ``run_export(model, ExportConfig(...), out_dir, *, data=None) -> ExportResult`` and
  ``load_export(path)``: the graph, its tokenizer, validation examples and PyTorch reference logits.
- ``run_fusion(export, FusionConfig(...), out_dir, *, data=None, model=None) -> FusionReport`` and
  ``load_fusion(path)``: every variant built, validated, diffed, traced back and timed, and the graph
  later stages take chosen by timing (``report.choice``, ``report.chosen_path``).
- ``summary(report)`` / ``table(report)``: a fusion report as JSON-ready data / plain text.
- ``validate_onnx(graph, reference, tokenizer, data, cfg)`` and ``compare_logits``: validation,
  reused by quantization; ``convert_fp16`` / ``validate_fp16``: the FP16 variant.
- ``provenance(orig, opt)``, ``graph_diff``, ``expected_fusions``, ``diagnose``: the analyses on
  their own, on parsed graphs or paths.

Files (one idea each):

==================  ===========================================================================
``export.py``       export configuration (:class:`ExportConfig`), result, ``run_export``
``trace.py``        torch -> ONNX: the TorchScript exporter, its quirks, failures explained
``validate.py``     logits of a graph against a reference on real examples (:class:`Validation`)
``facts.py``        facts read off a graph file: the one parse (``load_graph``), op counts, size
``variants.py``     the variants fusion builds (:class:`Variant`), :class:`FusionConfig`, file names
``sources.py``      what a fusion starts from: an export result or a bare ONNX file
``build.py``        building each variant's graph file, parsed once
``candidates.py``   the fused graph later stages take: full fusion or one family left out, by timing
``provenance.py``   what was fused into what; nodes removed and added
``diagnose.py``     expected fusions, and why one is missing (:class:`Diagnosis`)
``fusion.py``       the fusion stage: :class:`VariantResult`, :class:`FusionReport`, ``run_fusion``
``views.py``        a fusion report as text (``summary``, ``table``)
``fp16.py``         the FP16 variant of the fused graph and how it is validated
==================  ===========================================================================
"""

from .diagnose import ATTENTION_OPS, GELU_OPS, SKIP_LN_OPS, Diagnosis, diagnose, expected_fusions  # noqa: F401
from .config import Attention  # noqa: F401
from .export import (  # noqa: F401
    EXAMPLES_FILE,
    EXPORT_FILE,
    ONNX_FILE,
    REFERENCE_FILE,
    TOKENIZER_DIR,
    ExportConfig,
    ExportResult,
    ModelInfo,
    data_classes,
    load_export,
    model_info,
    run_export,
    save_tokenizer,
)
from .facts import file_size_mib, graph_inputs, load_graph, op_histogram  # noqa: F401
from .fp16 import (  # noqa: F401
    FLOAT,
    FLOAT16,
    FP16_TOLERANCE,
    Fp16Error,
    convert_fp16,
    fp16_structure,
    validate_fp16,
)
from .candidates import FAMILIES, FULL, FUSION_MARGIN, Candidate, FusionChoice, pick_fusion  # noqa: F401
from .fusion import FUSION_FILE, FusionReport, VariantResult, load_fusion, run_fusion  # noqa: F401
from .provenance import BOOKKEEPING_OPS, FusedNode, GraphIndex, OriginalNode, graph_diff, provenance  # noqa: F401
from .trace import OPSET_RANGE, ExportError, explain_export_failure, without_ir_dump, export_onnx, standard_symbolics  # noqa: F401
from .validate import Validation, compare_logits, read_examples, select_examples, validate_onnx, write_examples  # noqa: F401
from .variants import (  # noqa: F401
    ALL_VARIANTS,
    ARCH_OPTIMIZER_TYPE,
    FUSED_FILE,
    FUSED_FP16_FILE,
    FusionConfig,
    FusionError,
    Variant,
    optimizer_model_type,
    variant_file,
)
from .views import choice_summary, export_text, summary, table  # noqa: F401
