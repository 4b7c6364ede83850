"""The quantization search on an embedding model, its budget in NDCG@10 terms. A configuration that misses the
budget is quantized again with its worst-SQNR nodes left in FP32 (1, 2, 4, ... up to ``max_excluded``); one that
leaves every quantized node in FP32 is the FP32 graph, so it is scored but neither timed nor chosen.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Optional, Sequence

import numpy as np

from ..quant.quantizer import excluding
from ..quant.choice import Scored, SearchTerms, fp32_candidate, int8_candidate
from ..quant.run import QUANTIZED_FILE
from .evaluate import EmbedBudget
from .export import EmbedExportResult
from .folder import EmbedError
from .retrieval import RetrievalTask, compare_retrieval, score_task, task_texts
from .variants import FP32

DEFAULT_MAX_EXCLUDED = 8
METRIC = "ndcg@10"
# what a candidate that kept every quantized node in FP32 is, in the table and the message
ALL_FP32 = "with every quantized {ops} left in FP32 the graph is the FP32 graph"


def exclusion_steps(max_excluded: int) -> list[int]:
    """1, 2, 4, ... and ``max_excluded`` last."""
    doubling = [1 << i for i in range(max(0, max_excluded - 1).bit_length())]  # the powers of two below max_excluded
    return doubling + ([max_excluded] if max_excluded > 0 else [])


class EmbedSearchBaseline:
    """The FP32 graph scored once on a retrieval task (a :class:`~workbench.quant.search.ScoredBaseline`);
    ``calibration_texts`` (default: the task's documents) calibrate and rank nodes."""

    metric = METRIC
    batch_size = 32  # texts per batch when a graph encodes the task

    def __init__(self, export: EmbedExportResult, task: RetrievalTask, out_dir: str | os.PathLike,
                 budget: Optional[EmbedBudget] = None, calibration_texts: Sequence[str] = (), threads: Optional[int] = None,
                 max_excluded: int = DEFAULT_MAX_EXCLUDED, rounds: int = 8, fused: Optional[str | os.PathLike] = None,
                 load_check: bool = True, retimes: Optional[int] = None) -> None:
        from ..perf.machine_profile import default_threads
        from ..runs import layout
        from .encode import OnnxEncoder, median_length_texts
        from .variants import embed_quantizer, fuse

        if int(max_excluded) < 0:
            raise EmbedError(f"max_excluded must be 0 or more (0: no node is left in FP32), got {max_excluded}")
        self.export, self.task, self.budget = export, task, budget or EmbedBudget()
        self.threads, self.max_excluded, self.rounds = int(threads or default_threads()), int(max_excluded), int(rounds)
        self.load_check, self.retimes = load_check, retimes
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        fused = Path(fused) if fused is not None else fuse(export, Path(out_dir) / layout.FUSED_GRAPH)
        calibration = list(calibration_texts) or list(task.docs)[:128]
        self.quantizer, self.tokenizer = embed_quantizer(export, fused, calibration), export.load_tokenizer()
        self.fp32 = OnnxEncoder(export.onnx_path, self.tokenizer, export.max_length, self.threads)
        self.fp32_ranked, self.fp32_metrics = self._rank(self.fp32)
        (self.timing_texts, self.tokens) = median_length_texts(self.tokenizer, list(task.docs), export.max_length, 1)
        self.notes: list[str] = []
        self.all_fp32: dict[str, str] = {}  # candidate name -> the op types it left in FP32, every quantized one

    def budgets(self) -> tuple[float, float]:
        """(share of FP32's NDCG@10 that may be lost overall, NDCG@10 that may be lost on a slice)."""
        return 1.0 - self.budget.min_ndcg_ratio, self.budget.max_slice_drop

    def _rank(self, encoder) -> tuple[np.ndarray, dict[str, float]]:
        texts, q_of, d_of = task_texts(self.task)
        emb = encoder.encode(texts, self.batch_size)
        return score_task(self.task, emb[q_of], emb[d_of])

    def fp32_search_candidate(self, name: str, config):
        from ..graph.facts import file_size_mib

        cmp = compare_retrieval(self.task, FP32, self.fp32_ranked, self.fp32_ranked, config.evaluation.n_boot, config.evaluation.seed)
        path = Path(self.export.onnx_path)
        return fp32_candidate(name, name.split("/")[0], path, file_size_mib(path), self.fp32_metrics[METRIC],
                              self.budget.budget_check(cmp, config.strict), self._time({})[FP32])

    def search_candidates(self, name: str, cfg, out_dir: Path, config) -> list:
        """``cfg``, then (while it misses the budget) again with the worst nodes in FP32."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        qpath, float_path, cfg, _ = self.quantizer.quantize(cfg, out_dir / QUANTIZED_FILE)
        tried = [self._candidate(name, cfg, qpath, config)]
        if tried[-1].check.feasible or not self.max_excluded:
            return tried
        ranking = self.quantizer.worst(cfg, float_path, qpath, self.max_excluded)
        if not ranking:
            self.notes.append(f"{name}: its quantized nodes have no per-node error to rank (weight-only graphs rename "
                              "their MatMuls), so no node was left in FP32")
        for k in exclusion_steps(min(self.max_excluded, len(ranking))):
            ecfg = excluding(cfg, ranking[:k], name=f"{cfg.label}+fp32-{k}")
            epath, efloat, _, _ = self.quantizer.quantize(ecfg, out_dir / f"model.fp32-{k}.onnx")
            ops = _fp32_ops(ecfg, efloat, epath)
            if ops:
                self.all_fp32[f"{name}+fp32-{k}"] = ops
            tried.append(self._candidate(f"{name}+fp32-{k}", ecfg, epath, config, ops))
            if tried[-1].check.feasible:
                break
        return tried

    def _candidate(self, name: str, cfg, qpath: Path, config, all_fp32: str = ""):
        """A quantized graph scored, judged and timed; with ``all_fp32`` (no node quantized any more) never timed or chosen."""
        from ..graph.facts import file_size_mib
        from ..quant.choice import all_fp32_candidate
        from .encode import OnnxEncoder

        enc = OnnxEncoder(qpath, self.tokenizer, self.export.max_length, self.threads)
        ranked, metrics = self._rank(enc)
        cmp = compare_retrieval(self.task, name, self.fp32_ranked, ranked, config.evaluation.n_boot, config.evaluation.seed)
        chk = self.budget.budget_check(cmp, config.strict)
        scored = Scored(cfg, qpath, file_size_mib(qpath), metrics[METRIC], metrics[METRIC] - self.fp32_metrics[METRIC])
        if all_fp32:
            why = f"not an INT8 variant: {ALL_FP32.format(ops=all_fp32)} (not timed)"
            return all_fp32_candidate(name, name.split("/")[0], scored, chk, why)
        timed = self._time({name: enc})[name]
        scored = dataclasses.replace(scored, latency_ms=timed.median_ms, speedup_ratio=timed.ratio, contended=timed.contended)
        return int8_candidate(name, name.split("/")[0], scored, chk, config.min_speedup)

    def _time(self, encoders: dict) -> dict:
        """The FP32 graph and ``encoders`` in interleaved rounds at batch 1."""
        from .encode import encode_fns, speed_of, time_encoders

        run = time_encoders(encode_fns({FP32: self.fp32, **encoders}, None, {1: self.timing_texts}), FP32, self.tokens,
                            self.threads, floors=False, load_check=self.load_check, retimes=self.retimes, rounds=self.rounds)
        return {n: SimpleNamespace(median_ms=s["ms_per_batch"], ratio=s["ratio"], contended=run.contended)
                for n in run.latency for s in [speed_of(run, n, 1)]}

    def terms(self) -> SearchTerms:
        return embed_terms(self.budget, self.max_excluded, next(iter(self.all_fp32.values()), ""))


def embed_terms(budget: EmbedBudget, max_excluded: int = 0, all_fp32_ops: str = "") -> SearchTerms:
    """How a choice among the variants speaks: NDCG@10, this budget, the nodes left in FP32."""
    return SearchTerms("NDCG@10", value=".4f", drop="+.4f", of_fp32=True,
                       budget=(f"within the NDCG@10 budget ({budget.min_ndcg_ratio:.1%} of FP32's kept, no slice of "
                               f"{budget.min_slice_size}+ queries losing more than {budget.max_slice_drop:g})"
                               + (f", even with up to {max_excluded} nodes in FP32" if max_excluded else "")),
                       advice=(f"loosen the budget or raise max_excluded (now {max_excluded})" if max_excluded else
                               "loosen the budget, or search with nodes left in FP32 (--search)"),
                       all_fp32=ALL_FP32.format(ops=all_fp32_ops) if all_fp32_ops else "")


def judge_audit_variants(evaluation, variants, speed, budget: EmbedBudget, min_speedup: float):
    """The audit's variants and the FP32 graph judged as search candidates, for the verdict (untimed: no speed guard)."""
    from ..graph.facts import file_size_mib
    from ..quant.search import SearchConfig, choose
    from .encode import speed_of
    from .variants import FUSED, preset_config

    timed = speed is not None
    by = {n: speed_of(speed, n, 1, over=FP32) for n in speed.latency} if timed else {}
    fp32_value = evaluation.fp32_metrics.get(METRIC, float("nan"))
    path = variants.path(FP32)
    found = [fp32_candidate(FP32, FP32, path, file_size_mib(path), fp32_value, None,
                            SimpleNamespace(median_ms=by[FP32]["ms_per_batch"]) if FP32 in by else None)]
    for v in evaluation.variants:
        if v.name == FUSED or v.retrieval is None:
            continue
        chk = budget.budget_check(v.retrieval)
        s = by.get(v.name)
        built = next(b for b in variants.variants if b.name == v.name)
        cfg = dataclasses.replace(preset_config(built.preset), nodes_to_exclude=tuple(built.excluded_nodes)) if built.preset else None
        scored = Scored(cfg, variants.path(v.name), file_size_mib(variants.path(v.name)), v.retrieval.overall().variant[METRIC],
                        v.retrieval.overall().variant[METRIC] - fp32_value, s["ms_per_batch"] if s else float("nan"),
                        s["ratio"] if s else None, bool(speed.contended) if timed else False)
        found.append(int8_candidate(v.name, FP32, scored, chk, min_speedup if timed else 0.0))
    config = SearchConfig(candidates=(), min_speedup=min_speedup if timed else 0.0)
    return choose(found, config, terms=embed_terms(budget), budgets=(1.0 - budget.min_ndcg_ratio, budget.max_slice_drop),
                  metric=METRIC, notes=() if timed else ["not timed, so the speed guard was not applied"])


def _fp32_ops(cfg, float_path: Path, quant_path: Path) -> str:
    """The op types left in FP32 ("Gather and MatMul") when no node of the graph is quantized, else ""."""
    import onnx

    from ..quant.quantize import quantized_nodes

    if quantized_nodes(float_path, quant_path, cfg.resolved_op_types()):
        return ""
    kept = set(cfg.nodes_to_exclude)
    ops = sorted({n.op_type for n in onnx.load(str(float_path), load_external_data=False).graph.node if n.name in kept})
    return " and ".join(ops) or "node"
