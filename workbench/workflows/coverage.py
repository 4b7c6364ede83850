"""The coverage matrix: a tiny model of each supported architecture through the registry's coverage route, one
:class:`CoverageRow` each (``tests/unit/workflows/test_zoo.py`` and ``benchmarks/zoo_matrix.py`` build the matrix).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..flow.sequence import run_stages
from .stages import stages_for
from .steps import FineTuneStep, Job, QuantizeStep
# the tests and benchmarks/zoo_matrix.py reach the tiny builders and the architectures' names here
from ..models.architectures import BPE_ROBERTA, UNIGRAM_XLMR, WORDPIECE_BERT  # noqa: F401
from ..models.architectures import SUPPORTED_MODEL_TYPES as ZOO_TYPES  # noqa: F401
from .tiny import build_tiny, build_tokenizer, train_backend, training_texts  # noqa: F401


# ---- the coverage matrix -----------------------------------------------------------------------
@dataclass(frozen=True)
class CoverageRow:
    """One architecture through every stage: what its graph takes, what fused, what INT8 did."""

    model_type: str
    tokenizer_class: str
    graph_inputs: list[str]
    export_max_abs_diff: float
    export_passed: bool
    optimizer_model_type: str
    fused_ops: dict[str, int]
    expected_fusions: dict[str, int]
    not_fused: dict[str, str]  # fusion -> the diagnosis' cause
    fused_max_abs_diff: float
    fused_passed: bool
    int8_passed: bool
    int8_max_abs_diff: float
    int8_agreement: float
    int8_quantized_nodes: int
    slices: list[str]
    seconds: float
    # Fine-tuning under ORTModule (``run_coverage(train_steps=N)``): "ok" when N steps ran in
    # ONNX Runtime, "failed: <the run's reason>" otherwise, "not run" when not asked for.
    ortmodule: str = "not run"

    @property
    def ok(self) -> bool:
        return self.export_passed and self.fused_passed and self.int8_passed


def run_coverage(model_type: str, out_dir: str | os.PathLike, data=None, seed: int = 0,
                 train_steps: int = 0) -> CoverageRow:
    """Take the tiny ``model_type`` model through the stages a user's folder goes through, into ``out_dir``.

    ``train_steps`` > 0 first fine-tunes it under ORTModule with its PyTorch fallback off: "ok" means ONNX Runtime ran."""
    import time

    from ..data.load import DataConfig, load_data
    from ..graph import ExportConfig, FusionConfig, optimizer_model_type
    from ..quant import BaselineConfig, EvalConfig, QuantConfig, TimingConfig
    from ..train import CompareConfig, TrainConfig

    t0 = time.perf_counter()
    out = Path(out_dir)
    lines: list[str] = []
    # the quick reviews (TrainConfig.quick's data) on the model the build stage writes; fallback to PyTorch is disabled by default
    steps = max(train_steps, 1)
    train = TrainConfig.quick(model=str(out / "model"), max_steps=steps, eval_every=steps, save_graphs=False)
    configs = {
        "build": {"model_type": model_type, "seed": seed},
        "fine-tune": FineTuneStep(train, CompareConfig(backends=("ortmodule",), isolate=False), all_must_finish=False),
        "export": ExportConfig.quick(),
        "fuse": FusionConfig.inspect_only(variants=("unoptimized", "transformer")),
        "quantize": QuantizeStep(BaselineConfig(golden=False, timing=TimingConfig.quick(repeats=1, warmup=0), calibration_samples=8),
                                 {"dynamic": QuantConfig.preset("dynamic")}, EvalConfig(n_boot=100, node_error_samples=4)),
    }
    job = Job(out, configs, log=lines.append, data=data if data is not None else load_data(DataConfig.quick()))
    # the coverage route, through the one sequencer; a stage that fails raises as it is (the row needs every stage)
    done = run_stages(stages_for("coverage", job, leave_out=() if train_steps > 0 else ("fine-tune",)), log=lines.append,
                      fatal=(Exception,))
    export, fusion, quant = done.results["export"], done.results["fuse"], done.results["quantize"][1][0]
    ortmodule = "not run"
    if "fine-tune" in done.results:  # ok when the steps ran in ONNX Runtime
        run = done.results["fine-tune"].runs[0]
        ortmodule = "ok" if run.status.value == "ok" and run.executed_in_onnxruntime else f"failed: {run.reason}"
    return CoverageRow(
        model_type=model_type,
        tokenizer_class=type(export.load_tokenizer()).__name__,
        graph_inputs=list(export.input_names),
        export_max_abs_diff=export.validation.max_abs_diff,
        export_passed=export.validation.passed,
        optimizer_model_type=optimizer_model_type(model_type),
        fused_ops=fusion.fused_op_counts,
        expected_fusions=dict(fusion.expected_fusions),
        not_fused={d.fusion: d.cause for d in fusion.diagnoses},
        fused_max_abs_diff=fusion.fused.validation.max_abs_diff,
        fused_passed=fusion.fused.validation.passed,
        int8_passed=quant.validation.passed,
        int8_max_abs_diff=quant.validation.max_abs_diff,
        int8_agreement=quant.report.overall.candidate.agreement,
        int8_quantized_nodes=len(quant.quantized_nodes),
        slices=[d.slice for d in quant.report.slices],
        seconds=time.perf_counter() - t0,
        ortmodule=ortmodule,
    )
