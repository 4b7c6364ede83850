"""The graph stage: export a classifier to ONNX, prove the graph computes what the model computes,
and show what ONNX Runtime's fusions do to it.

Entry points: ``run_export`` and ``run_fusion`` (``load_export``/``load_fusion`` read them back).

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

from .diagnose import Diagnosis, diagnose, expected_fusions  # noqa: F401
from .config import Attention  # noqa: F401
from .export import (  # noqa: F401
    EXAMPLES_FILE,
    EXPORT_FILE,
    ONNX_FILE,
    REFERENCE_FILE,
    TOKENIZER_DIR,
    ExportConfig,
    ExportResult,
    data_classes,
    load_export,
    model_info,
    run_export,
    save_tokenizer,
)
from .facts import file_size_mib, op_histogram  # noqa: F401
from .candidates import FAMILIES, FULL, FUSION_MARGIN, FusionChoice, pick_fusion  # noqa: F401
from .fusion import FusionReport, VariantResult, load_fusion, run_fusion  # noqa: F401
from .provenance import BOOKKEEPING_OPS, FusedNode, provenance  # noqa: F401
from .trace import ExportError, explain_export_failure, without_ir_dump, standard_symbolics  # noqa: F401
from .validate import Validation, compare_logits, select_examples, validate_onnx, write_examples  # noqa: F401
from .variants import ALL_VARIANTS, FUSED_FP16_FILE, FusionConfig, FusionError, Variant, optimizer_model_type  # noqa: F401
from .views import choice_summary, export_text, summary, table  # noqa: F401
