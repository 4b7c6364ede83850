"""The quantization stage: ``base = prepare_baseline(graph, data, run / "quantize" / "baseline")`` once, then per
variant ``run_quantization(base, QuantConfig.preset("dynamic"), out_dir)``. FP32 is timed only beside a variant
(:func:`~workbench.quant.baseline.time_beside_fp32`)."""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import runs
from ..runs import layout
from ..graph import Validation, file_size_mib
from ..core.latency import Ratio
from ..perf.machine_profile import LoadCheck
from ..runtime.ortinfer import ShapeLatency
from ..perf.scoring import ScoringSpeed
from ..perf.speed import Speed
from .baseline import BASELINE_FILE, FP32, Baseline, EvalSet, load_baseline, score_examples, time_beside_fp32
from .config import QuantConfig, QuantizeError, QuantMode, TimingConfig, machine_note
from .evaluate import EvalConfig, SliceReport, evaluate_slices, softmax
from .quantize import encoded_feeds, quantized_nodes
from .quantizer import Quantizer, excluding, feed_rows
from .sqnr import NodeError, node_errors, worst_nodes

from ..runs.layout import QUANTIZE_FILE as RESULT_FILE  # noqa: E402, F401  (the run layout names every file)

QUANTIZED_FILE = "model.int8.onnx"


@dataclass(frozen=True)
class QuantResult:
    """One quantized graph: what it cost (accuracy, slice by slice) and what it bought (speed, size)."""

    name: str
    config: QuantConfig
    source_path: Path  # the FP32 graph that was quantized
    float_path: Path  # the FP32 graph the node names refer to (pre-processed copy for static)
    quantized_path: Path
    graph_kind: str
    size_mib: float
    fp32_size_mib: float
    validation: Validation
    latency: list[ShapeLatency]
    fp32_latency: list[ShapeLatency]
    report: SliceReport
    golden: Optional[SliceReport]
    node_errors: list[NodeError]
    quantized_nodes: list[str]
    excluded_nodes: list[str]
    op_histogram: dict[str, int]
    quantize_seconds: float
    calibration_samples: int
    baseline_path: Path
    out_dir: Path
    notes: list[str] = field(default_factory=list)
    # the timing settings of ``latency``/``fp32_latency`` (None in results saved before it was kept)
    timing: Optional[TimingConfig] = None
    # the speed-up per shape from interleaved rounds (workbench.perf.speed), and whether the machine was busy
    speed: list[Speed] = field(default_factory=list)
    load: Optional[LoadCheck] = None
    # scoring the evaluation split: rows/s against the floor of the same batches (the baseline's order)
    scoring: Optional[ScoringSpeed] = None

    @property
    def reports(self) -> list[SliceReport]:
        """The evaluation split's report, then the golden set's when there is one."""
        return [self.report] + ([self.golden] if self.golden is not None else [])

    @property
    def latency_ms(self) -> float:
        return self.latency[0].median_ms if self.latency else float("nan")

    @property
    def fp32_latency_ms(self) -> float:
        return self.fp32_latency[0].median_ms if self.fp32_latency else float("nan")

    @property
    def speedup_ratio(self) -> Optional[Ratio]:
        """The speed-up over FP32 at the first timing shape, with its interval (None in older results)."""
        return self.speed[0].ratio if self.speed else None

    @property
    def speedup(self) -> float:
        """Times faster than FP32 at the first shape: the median of the paired rounds' ratios (older results: of medians)."""
        if self.speed:
            return self.speed[0].ratio.value
        return self.fp32_latency_ms / self.latency_ms if self.latency_ms > 0 else float("nan")

    @property
    def contended(self) -> bool:
        """Whether the speed figures were taken while something else used the CPU."""
        return bool(self.load and self.load.contended)

    @property
    def of_floor(self) -> Optional[float]:
        return self.latency[0].of_floor if self.latency else None

    @property
    def accuracy(self) -> float:
        return self.report.overall.candidate.accuracy

    @property
    def accuracy_delta(self) -> float:
        return self.report.overall.delta


def report_for(eset: EvalSet, logits: np.ndarray, base: Baseline, name: str, ev: EvalConfig) -> SliceReport:
    examples = eset.load_examples()
    ref = softmax(eset.fp32_logits())
    cand = softmax(logits)
    rep = evaluate_slices(
        examples, [int(e["label"]) for e in examples], ref, cand, None, ev,
        class_names=base.class_names, reference_name="fp32", candidate_name=name, set_name=eset.name,
        membership=eset.membership(),
    )
    meta = {s.name: (s.description, s.group) for s in eset.slices}
    slices = [dataclasses.replace(d, description=meta[d.slice][0], group=meta[d.slice][1]) for d in rep.slices]
    return dataclasses.replace(rep, slices=slices, slice_set=eset.slice_set)


def _fp32_feeds(src: Path, baseline: Baseline, tok: Any) -> Callable[[Sequence[str], int, bool], list[dict]]:
    """Encoded feeds for the FP32 graph, its session opened only when first needed."""
    from ..runtime import ortinfer

    session = functools.cache(lambda: ortinfer.make_session(src))
    return lambda texts, batch_size, pad_to_max: encoded_feeds(session(), tok, texts, baseline.max_length, batch_size, pad_to_max)


def _checked_inputs(source: Any, cfg: Optional[QuantConfig], evaluation: Optional[EvalConfig]) -> tuple[QuantConfig, EvalConfig]:
    cfg = cfg or QuantConfig.preset("dynamic")
    if not isinstance(cfg, QuantConfig):
        raise QuantizeError(f"cfg must be a QuantConfig (e.g. QuantConfig.preset('dynamic')), got {type(cfg).__name__}")
    if not isinstance(source, Baseline):
        raise QuantizeError(
            f"the quantization stage's input is a Baseline (the FP32 graph scored on the data), got {type(source).__name__}: "
            "prepare_baseline(graph, data, out_dir / 'baseline') first, or load_baseline(folder) for a saved one")
    evaluation = evaluation if evaluation is not None else EvalConfig()
    if not isinstance(evaluation, EvalConfig):
        raise QuantizeError(f"evaluation must be an EvalConfig (e.g. EvalConfig(n_boot=1000)), got {type(evaluation).__name__}")
    return cfg, evaluation


def _calibration_feeds(cfg: QuantConfig, calib_texts: list[str], fp32: Callable[..., list[dict]], notes: list[str]) -> Optional[list[dict]]:
    """Static quantization's calibration batches (None otherwise), padded to max_length: the histogram calibrators stack them."""
    if cfg.mode is not QuantMode.STATIC:
        return None
    cal = cfg.calibration
    if len(calib_texts) < cal.samples:
        if len(calib_texts) < cal.batch_size:
            raise QuantizeError(
                f"static quantization asked for {cal.samples} calibration texts but the baseline holds "
                f"{len(calib_texts)}: give data with a larger training split, or lower samples"
            )
        notes.append(f"calibrated on {len(calib_texts)} texts (asked for {cal.samples}): the training split is smaller")
    texts = calib_texts[: cal.samples]
    usable = (len(texts) // cal.batch_size) * cal.batch_size
    return fp32(texts[:usable], cal.batch_size, pad_to_max=True)


def _mode_notes(cfg: QuantConfig, baseline: Baseline) -> list[str]:
    if cfg.mode is QuantMode.DYNAMIC:
        return [
            f"dynamic INT8 computes activation scales per batch tensor, so a prediction can depend on which "
            f"examples share its batch (on MiniLM, 3 of 128 test predictions differed between batch 1 and 32); "
            f"scored here in batches of {baseline.batch_size} padded to the longest (prepare_baseline(batch_size=...))"
            + ("; the batches are sorted by token length (the FP32 graph was scored on the same batches), so they differ "
               "from file-order batches and so can a few predictions" if baseline.scoring_order == "length" else "")
        ]
    if cfg.mode is QuantMode.WEIGHT_ONLY:
        from .formats import BINDING_NOTE
        from .weightonly import binding_supplied

        return [f"weight-only: MatMul weights in {cfg.bits} bits (MatMulNBits, blocks of {cfg.block_size}, accuracy_level "
                f"{cfg.accuracy_level}: {'INT8' if cfg.accuracy_level == 4 else 'FP32'} compute), activations in float"
                + (f"; {BINDING_NOTE}" if binding_supplied() else "")]
    return []


def _score(qpath: Path, baseline: Baseline, tok: Any, name: str, evaluation: EvalConfig) -> tuple[dict, Optional[ScoringSpeed]]:
    """The quantized graph on every evaluation set: ({set: (logits, SliceReport)}, the evaluation split's scoring speed)."""
    from ..runtime.engine import active_pool
    from ..runtime.ortinfer import make_session

    qsession = make_session(qpath) if active_pool() is None else qpath
    reports, scoring = {}, None
    for eset in baseline.eval_sets:
        timed = scoring is None and baseline.fp32_scoring is not None
        logits, speed = score_examples(qsession, qpath, tok, eset.load_examples(), baseline.max_length, baseline.batch_size,
                                       baseline.scoring_order, f"{name}, {eset.name}" if len(baseline.eval_sets) > 1 and not timed
                                       else name, baseline.timing if timed else None)
        scoring = scoring or speed
        reports[eset.name] = (logits, report_for(eset, logits, baseline, name, evaluation))
    return reports, scoring


def _errors(float_path: Path, qpath: Path, cfg: QuantConfig, calib_texts: list[str], fp32: Callable[..., list[dict]], samples: int,
            notes: list[str]) -> list[NodeError]:
    if samples > 0 and calib_texts:
        return node_errors(float_path, qpath, fp32(calib_texts[:samples], 8, pad_to_max=False), cfg.resolved_op_types())
    if samples > 0:
        notes.append("per-node errors skipped: the baseline has no calibration texts (no training split)")
    return []


def run_quantization(
    source: Baseline,
    cfg: Optional[QuantConfig] = None,
    out_dir: str | os.PathLike | None = None,
    *,
    evaluation: Optional[EvalConfig] = None,
    timing: Optional[TimingConfig] = None,
) -> QuantResult:
    """Quantize the baseline's FP32 graph with ``cfg`` into ``out_dir`` and score it against the baseline; FP32 is timed
    beside it with the baseline's timing settings, or ``timing``'s for both. Timings are reported, never asserted."""
    from ..graph import compare_logits, op_histogram
    from ..runtime.device import require_device

    cfg, evaluation = _checked_inputs(source, cfg, evaluation)
    baseline = source
    t = timing if timing is not None else baseline.timing  # an explicit timing (its device too) wins over the baseline's
    require_device(t.device)  # CUDA asked for and absent: one clear error before any work
    out = Path(out_dir) if out_dir is not None else runs.DEFAULT_ROOT / layout.quantize_dir(cfg.label)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(baseline.fp32_path)
    tok = baseline.load_tokenizer()
    notes: list[str] = []
    calib_texts = baseline.calibration_texts()
    fp32 = _fp32_feeds(src, baseline, tok)

    feeds = _calibration_feeds(cfg, calib_texts, fp32, notes)
    t0 = time.perf_counter()
    rank_texts = calib_texts[:max(16, evaluation.node_error_samples)]
    qpath, float_path, used, note = Quantizer(
        lambda _: src, lambda _: feeds, lambda: fp32(rank_texts, 8, pad_to_max=False) if rank_texts else [],
        "exclude_worst ranks nodes on calibration texts, and the baseline has none (no training split): give data with "
        "a training split, or list nodes_to_exclude yourself").quantize(cfg, out / QUANTIZED_FILE)
    notes += [f"exclude_worst={cfg.exclude_worst}: {note}"] if note else []
    quantize_seconds = time.perf_counter() - t0
    notes += _mode_notes(cfg, baseline)
    notes += [n for n in (machine_note(cfg),) if n]  # the weight bits beside what this CPU's presets take, and why
    qnodes = quantized_nodes(float_path, qpath, cfg.resolved_op_types())
    if not qnodes:
        notes.append("no node was quantized: check op_types and nodes_to_exclude against the graph's operators")

    reports, scoring = _score(qpath, baseline, tok, cfg.label, evaluation)
    main_set = baseline.eval_sets[0]
    validation = compare_logits(reports[main_set.name][0], main_set.fp32_logits(), cfg.validation.tolerance,
                                cfg.validation.min_label_agreement,
                                what=f"the {cfg.label} graph")
    side = time_beside_fp32(baseline, {cfg.label: qpath}, t, notes)
    errors = _errors(float_path, qpath, cfg, calib_texts, fp32, evaluation.node_error_samples, notes)

    result = QuantResult(
        name=cfg.label, config=cfg, source_path=src, float_path=Path(float_path).resolve(), quantized_path=qpath.resolve(),
        graph_kind=baseline.graph_kind, size_mib=file_size_mib(qpath), fp32_size_mib=baseline.fp32_size_mib,
        validation=validation, latency=side.latency[cfg.label], fp32_latency=side.latency[FP32],
        report=reports[main_set.name][1], golden=reports["golden"][1] if "golden" in reports else None,
        node_errors=errors, quantized_nodes=qnodes, excluded_nodes=list(used.nodes_to_exclude),
        op_histogram=op_histogram(qpath), quantize_seconds=quantize_seconds,
        calibration_samples=feed_rows(feeds or []),
        baseline_path=(Path(baseline.out_dir) / BASELINE_FILE).resolve(), out_dir=out.resolve(), notes=notes, timing=t,
        speed=list(side.speeds), load=side.load, scoring=scoring,
    )
    runs.save_result(result, out / RESULT_FILE)
    return result


def load_quant_result(path: str | os.PathLike) -> QuantResult:
    return runs.load_result(QuantResult, path, RESULT_FILE)


def requantize_excluding(
    result: QuantResult,
    worst_k: Optional[int] = None,
    nodes: Optional[Sequence[str]] = None,
    out_dir: Optional[str | os.PathLike] = None,
    rank_by: str = "local",
    n_boot: Optional[int] = None,
    node_error_samples: int = 16,
) -> QuantResult:
    """``result``'s configuration again with its ``worst_k`` worst nodes (or ``nodes``) in FP32, on the same baseline."""
    if (worst_k is None) == (nodes is None):
        raise QuantizeError("give exactly one of worst_k (exclude the k worst nodes) or nodes (names to exclude)")
    if nodes is None:
        if not result.node_errors:
            raise QuantizeError(
                f"{result.name} has no per-node errors to rank: run it with node_error_samples > 0, or pass nodes=[...]"
            )
        chosen = worst_nodes(result.node_errors, int(worst_k), rank_by)
    else:
        if isinstance(nodes, str):
            raise QuantizeError(f"nodes must be a list of node names, got the string {nodes!r}")
        chosen = list(nodes)
    cfg = excluding(result.config, [*result.excluded_nodes, *chosen])
    excluded = cfg.nodes_to_exclude
    cfg = dataclasses.replace(cfg, name=f"{cfg.name}-excl{len(excluded)}" if cfg.name else "")
    baseline = load_baseline(result.baseline_path)
    target = Path(out_dir) if out_dir is not None else Path(result.out_dir) / f"exclude-{len(excluded)}"
    return run_quantization(baseline, cfg, target, timing=result.timing,
                            evaluation=EvalConfig(n_boot=n_boot or result.report.n_boot, seed=result.report.seed,
                                                  node_error_samples=node_error_samples))

