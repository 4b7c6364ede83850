"""The embedding task's own stages on the ``embed-audit`` route: config an ``EmbedAuditConfig``, ``job.data`` its
checked inputs."""

from __future__ import annotations

import time
from typing import Any

from ..runs import layout


def _pool(checked) -> list[str]:
    return list(checked.task.docs if checked.task else checked.texts)


def export(cfg, st, job):
    checked = job.data
    job.log(f"export to ONNX, {checked.folder.pooling} pooling inside the graph, validated against SentenceTransformer.encode")
    texts = (list(checked.task.queries[:16]) + list(checked.task.docs[:48])) if checked.task else checked.texts[:64]
    result = job.functions().export(checked.folder.folder, job.run_dir / layout.EXPORT_DIR, texts=texts)
    job.log(result.validation.text())
    return result


def quantize(cfg, st, job):
    """The variants, or None when the exported graph failed validation (nothing is built on it)."""
    export = st.inputs["export"]
    if not export.validation.passed:
        return None
    job.log(f"fusing and quantizing: {', '.join(cfg.presets)}")
    return job.functions().quantize(export, cfg.presets, job.run_dir / "variants", _pool(job.data)[: cfg.calibration_size],
                                    cfg.exclude_worst)


def evaluate(cfg, st, job):
    """``(EmbedEvaluation, SpeedRun or None)``."""
    from ..perf.machine_profile import default_threads
    from ..runtime.engine import scoring_engine
    from ..runtime.progress import scoring_progress
    from .encode import OnnxEncoder
    from .evaluate import evaluate_embeddings

    checked, export, variants = job.data, st.inputs["export"], st.inputs["quantize"]
    threads, tok, log = int(cfg.threads or default_threads()), export.load_tokenizer(), job.log
    with scoring_engine(cfg.engine_config(), log=log) as ray_pool, scoring_progress(job.progress):
        encoders = {v.name: OnnxEncoder(v.path, tok, export.max_length, threads, pool=ray_pool, label=v.name)
                    for v in variants.variants}
        evaluation = evaluate_embeddings(encoders, "fp32", checked.task, checked.texts, checked.text_slices or None,
                                         cfg.budget, cfg.n_boot, cfg.seed, cfg.batch_size,
                                         checked.folder.folder if cfg.reference_check else None, log)
    if not cfg.time_speed:
        return evaluation, None
    from .encode import ST_ENCODE, encode_fns, median_length_texts, st_encoder, time_encoders

    batch32, med = median_length_texts(tok, _pool(checked), export.max_length, 32)
    log(f"timing at the data's median length ({med} tokens), batch 1 and 32, {threads} threads")
    fns = encode_fns(encoders, st_encoder(checked.folder.folder, threads), {1: batch32[:1], 32: batch32})
    return evaluation, time_encoders(fns, ST_ENCODE, med, threads, {v.name: str(v.path) for v in variants.variants},
                                     rounds=cfg.timing_rounds, retimes=cfg.retimes)


def search(cfg, st, job):
    from ..perf.machine_profile import default_threads

    if not cfg.search:
        return None
    checked, log, out = job.data, job.log, job.run_dir / layout.SEARCH_DIR
    if checked.task is None:
        log("search skipped: it holds each candidate to an NDCG@10 budget, and texts without queries have no labels")
        return None
    from ..quant import EvalConfig, SearchConfig
    from .variants import FUSED, preset_config

    task = job.functions()
    log(f"search: {', '.join(cfg.presets)}, each with up to {cfg.max_excluded} nodes left in FP32 until it meets the budget")
    base = task.prepare_baseline(st.inputs["export"], checked.task, out, cfg.budget, list(checked.task.docs)[: cfg.calibration_size],
                                 int(cfg.threads or default_threads()), cfg.max_excluded, rounds=cfg.timing_rounds,
                                 fused=st.inputs["quantize"].path(FUSED), retimes=cfg.retimes)
    found = task.search(base, SearchConfig(candidates=tuple(preset_config(p) for p in cfg.presets),
                                           evaluation=EvalConfig(n_boot=cfg.n_boot, seed=cfg.seed)), out,
                        progress=lambda done, total, what: log(f"search {done}/{total}: {what}"))
    log(found.message)
    return found


def report(cfg, st, job) -> tuple[Any, Any, dict]:
    """``(report.html, summary.json, summary)``; ``job.report["started"]``: when the audit began."""
    from ..report.write import write_summary_page
    from .report import build_embed_summary, embed_figures

    done, checked = st.inputs, job.data
    evaluation, speed = done.get("evaluate") or (None, None)
    summary = build_embed_summary(checked.folder, done["export"], done.get("quantize"), evaluation, speed, cfg, checked.source,
                                  time.perf_counter() - job.report["started"], done.get("search"))
    page, written = write_summary_page(job.run_dir, summary, embed_figures(evaluation, summary["speed"]))
    job.log(summary["verdict"]["text"])
    return page, written, summary
