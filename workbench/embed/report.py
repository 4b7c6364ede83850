"""The embedding model's part of ``summary.json`` and the figures of its report page."""

from __future__ import annotations

from ..core import serial

MAX_CHANGED_SHOWN = 5


def _verdict(evaluation, judged, export, budget) -> dict:
    from ..report.inputs import ReportInputs
    from ..report.verdict import build_verdict

    failed = [] if evaluation is not None else [{"name": "export", "status": "failed",
                                                 "message": f"the exported graph failed validation ({export.validation.text()})"}]
    unjudged = "" if evaluation is None or evaluation.task else (
        "No retrieval labels: agreement with FP32 is reported per slice, but no variant is held to a budget. "
        "Give queries with relevant documents to get a verdict.")
    inp = ReportInputs(kind="audit", budget_overall=1.0 - budget.min_ndcg_ratio, budget_per_slice=budget.max_slice_drop,
                       stages=failed)
    return build_verdict(inp, judged, {}, budget_words=(
        f"NDCG@10 at least {budget.min_ndcg_ratio:.1%} of FP32's overall, at most {budget.max_slice_drop:g} lost on every "
        f"slice of {budget.min_slice_size}+ queries"), unjudged=unjudged)


def build_embed_summary(info, export, variants, evaluation, speed, cfg, source: str, seconds: float, search=None) -> dict:
    from ..models.hub import model_name
    from ..report.summary import task_summary
    from .encode import speed_summary

    b = cfg.budget
    summary = {
        "model": {"folder": str(info.folder), "modules": list(info.modules), "pooling": info.pooling,
                  "normalize": info.normalize, "dimension": info.output_dimension, "max_seq_length": info.max_seq_length},
        # the queries scored (without queries, the texts)
        "data": {"source": source, "rows_scored": 0 if evaluation is None else int(
            evaluation.slice_sizes.get("all", 0) if evaluation.task else evaluation.texts)},
        "export": serial.to_dict(export),
        "variants": serial.to_dict(variants) if variants is not None else None,
        # the budget as every audit states it (share of NDCG@10 lost overall, NDCG@10 lost per slice), then as set
        "budget": {"metric": "ndcg@10", "overall": 1.0 - b.min_ndcg_ratio, "per_slice": b.max_slice_drop,
                   "include_small_slices": False, "min_slice_size": b.min_slice_size, **serial.to_dict(b)},
        "settings": serial.to_dict(cfg),
        "seconds": seconds,
    }
    summary["evaluation"] = ev = serial.to_dict(evaluation) if evaluation is not None else None
    if ev is not None:
        for v in ev["variants"]:
            if v.get("agreement"):
                v["agreement"].pop("cosines", None)  # every text's cosine is in the figure, not the summary
            if v.get("retrieval"):
                v["retrieval"]["changed"] = v["retrieval"]["changed"][:MAX_CHANGED_SHOWN]
        if evaluation.reference_metrics:
            summary["fp32_vs_sentence_transformers"] = {
                m: evaluation.fp32_metrics[m] - evaluation.reference_metrics[m] for m in evaluation.fp32_metrics}
    summary["speed"] = speed_summary(speed) if speed is not None else None
    summary["search"] = serial.to_dict(search) if search is not None else None
    judged = None
    if evaluation is not None and evaluation.task:
        from .search import judge_audit_variants

        judged = judge_audit_variants(evaluation, variants, speed, b, cfg.min_speedup)
    summary["verdict"] = _verdict(evaluation, judged, export, b)
    return task_summary("embedding", "audit", f"Embedding model audit: {model_name(info.folder)}", summary)


def embed_figures(evaluation, speed: dict | None) -> dict[str, str]:
    from ..plots import embed as eplots
    from ..report.cells import figure_html

    figs = {}
    if evaluation is not None:
        if evaluation.task:
            figs["retrieval_drift"] = figure_html(eplots.retrieval_drift(evaluation), "fig-retrieval-drift")
        figs["cosine"] = figure_html(eplots.cosine_distribution(evaluation), "fig-cosine")
        figs["overlap"] = figure_html(eplots.neighbour_overlap(evaluation), "fig-overlap")
    if speed:
        figs["speed"] = figure_html(eplots.embed_speed(speed), "fig-speed")
    return figs
