"""Embedding benchmark: the workbench's variants of all-MiniLM-L6-v2 (the exported graph with
pooling and normalization inside, fused, INT8 presets) against ``SentenceTransformer.encode`` (eager
PyTorch FP32, the same threads) and against sentence-transformers' own INT8 ONNX export
(``export_dynamic_quantized_onnx_model``), on the built-in retrieval task (plot descriptions ask for
the reviews of their movie).

1. Export the shipped model (workbench.embed.export), fuse and quantize it (workbench.embed.variants).
2. The anchor: benchmarks/anchor_embed.py runs in the anchor environment (scripts/setup_anchor_env.sh:
   optimum-onnx and the plain onnxruntime wheel cannot sit beside onnxruntime-training) and exports
   its INT8 graph there. That graph is then loaded here, in the workbench's ONNX Runtime, with its
   mean pooling and normalization done in NumPy as sentence-transformers' Python side does: so the
   anchor is timed in the same process, interleaved round by round with every other variant, and
   the comparison is between the graphs, not between two ONNX Runtime releases. The anchor
   environment's own medians (its current onnxruntime, another process) are recorded beside.
3. Quality: NDCG@10, recall@10, MRR@10 per query slice, FP32 graph against each variant (paired
   bootstrap), the FP32 graph's NDCG@10 against the same task scored with SentenceTransformer.encode.
4. Speed: texts of the corpus's median token length, batch 1 and 32, interleaved rounds in one
   process, paired ratios over ``SentenceTransformer.encode`` with intervals, each graph's floor, a
   load check before and after.
5. OpenVINO: sentence-transformers' ``backend="openvino"`` (FP32) and its static INT8
   (``export_static_quantized_openvino_model``, calibrated on the corpus's first documents, as the
   workbench's variants are) in the OpenVINO environment (scripts/setup_openvino_env.sh): a worker
   process there (benchmarks/openvino_embed.py) exports both and encodes on request, so both rows are
   scored on the same task and timed in the same interleaved rounds (the same texts, batch sizes and
   threads; each call includes one pipe round trip, whose median is recorded). Without that
   environment the rows are left out with one line saying so.

Prints tables and writes JSON to --out. A benchmark, not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_embed.py --out runs/bench/bench_embed.json [--quick] [--no-openvino]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import openvino_embed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ANCHOR = "sentence-transformers INT8 ONNX"
OV_FP32 = "sentence-transformers OpenVINO FP32"
OV_INT8 = "sentence-transformers OpenVINO INT8 (static)"
NOT_WORKBENCH = ("fused", ANCHOR, OV_FP32, OV_INT8)  # rows beside the workbench's own variants
DEFAULT_PRESETS = ("dynamic-per-channel", "dynamic", "dynamic-fp32-embeddings")


def _args(argv=None):
    from workbench.perf.machine_profile import default_threads

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/bench/bench_embed.json", help="JSON file to write")
    p.add_argument("--work", default="runs/bench/embed-work", help="folder for the graphs")
    p.add_argument("--threads", type=int, default=default_threads(), help="threads for PyTorch and ONNX Runtime alike")
    p.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS), help="quantization presets to build")
    p.add_argument("--exclude-worst", type=int, default=0, help="also build each preset with the K worst nodes left in FP32")
    p.add_argument("--queries", choices=("plots", "reviews"), default="plots", help="the built-in task's queries")
    p.add_argument("--max-queries", type=int, help="first N queries only")
    p.add_argument("--max-docs", type=int, help="the relevant reviews plus others up to N documents")
    p.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds per batch size")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per variant per round")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates")
    p.add_argument("--anchor-python", default=str(ROOT / ".venv-anchor" / "bin" / "python"),
                   help="the anchor environment's Python (scripts/setup_anchor_env.sh)")
    p.add_argument("--no-anchor", action="store_true", help="leave sentence-transformers' INT8 export out")
    p.add_argument("--anchor-own-timing", action="store_true", help="also time the anchor in its own environment (another process)")
    p.add_argument("--openvino-python", default=str(ROOT / ".venv-openvino" / "bin" / "python"),
                   help="the OpenVINO environment's Python (scripts/setup_openvino_env.sh)")
    p.add_argument("--no-openvino", action="store_true", help="leave sentence-transformers' OpenVINO FP32 and INT8 out")
    p.add_argument("--openvino-samples", type=int, default=128, help="calibration texts for OpenVINO's static INT8")
    p.add_argument("--skip-quality", action="store_true", help="time only")
    p.add_argument("--skip-speed", action="store_true", help="score only")
    p.add_argument("--quick", action="store_true", help="a small task and few rounds (a smoke run)")
    a = p.parse_args(argv)
    if a.quick:
        a.max_queries, a.max_docs, a.rounds, a.n_boot = a.max_queries or 12, a.max_docs or 300, min(a.rounds, 5), min(a.n_boot, 200)
        a.openvino_samples = min(a.openvino_samples, 16)
    return a


def _anchor(a, folder: Path, work: Path, texts: list[str]) -> dict:
    py = Path(a.anchor_python)
    if not py.is_file():
        raise SystemExit(f"bench_embed: the anchor environment is missing ({py}): run `bash scripts/setup_anchor_env.sh`, "
                         "or pass --no-anchor")
    (work / "anchor").mkdir(parents=True, exist_ok=True)
    tfile = work / "anchor" / "texts.json"
    tfile.write_text(json.dumps(texts))
    cmd = [str(py), str(ROOT / "benchmarks" / "anchor_embed.py"), "--model", str(folder), "--out", str(work / "anchor"),
           "--texts", str(tfile), "--threads", str(a.threads)] + (["--time"] if a.anchor_own_timing else [])
    print("anchor: " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench_embed: the anchor's export failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads((work / "anchor" / "anchor.json").read_text())


def _openvino(a, folder: Path, work: Path, calibration: list[str]):
    """The OpenVINO worker (benchmarks/openvino_embed.py in the OpenVINO environment), or None with one line
    saying why its rows are left out: the environment is not set up, or the worker could not export."""
    if a.no_openvino:
        return None
    py = Path(a.openvino_python)
    if not py.is_file():
        print(f"bench_embed: OpenVINO rows left out: no OpenVINO environment at {py}; set it up with "
              "`bash scripts/setup_openvino_env.sh` (or pass --no-openvino to say so)", flush=True)
        return None
    print(f"openvino: exporting and quantizing in {py.parent.parent} (calibrated on {len(calibration)} texts)", flush=True)
    try:
        return openvino_embed.OpenVinoWorker.start(py, folder, work / "openvino", calibration, a.threads)
    except (openvino_embed.OpenVinoError, OSError) as exc:
        print(f"bench_embed: OpenVINO rows left out: {exc}", flush=True)
        return None


def token_graph_encoder(graph, tokenizer, max_length: int, threads: int):
    """The anchor's graph, which returns token embeddings (sentence-transformers' own ONNX export): an
    :class:`~workbench.embed.encode.OnnxEncoder` whose rows are mean-pooled and normalized here in NumPy,
    as sentence-transformers' Python side does."""
    import numpy as np

    from workbench.embed.encode import OnnxEncoder

    class TokenGraphEncoder(OnnxEncoder):
        def finish(self, feed: dict, out: np.ndarray) -> np.ndarray:
            mask = feed["attention_mask"][..., None].astype(out.dtype)
            pooled = (out * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    return TokenGraphEncoder(graph, tokenizer, max_length, threads)


def main(argv=None) -> int:
    a = _args(argv)
    from workbench.embed.encode import OnnxEncoder
    from workbench.embed.export import run_embed_export
    from workbench.embed.retrieval import builtin_task
    from workbench.embed.encode import median_length_texts
    from workbench.embed.variants import build_variants
    from workbench.perf.machine_profile import cpu_model_and_flags
    from workbench.models.load import minilm_path
    from workbench.runs import atomic_write_json

    t_start = time.perf_counter()
    folder = minilm_path()
    work = Path(a.work)
    task = builtin_task(a.queries, a.max_queries, a.max_docs)
    print(f"task: {task.description}", flush=True)
    export = run_embed_export(folder, work / "export")
    print(export.validation.text(), flush=True)
    variants = build_variants(export, a.presets, work / "variants", task.docs[:128], a.exclude_worst)
    tok = export.load_tokenizer()
    encoders = {v.name: OnnxEncoder(v.path, tok, export.max_length, a.threads) for v in variants.variants}
    batch32, med = median_length_texts(tok, task.docs, export.max_length, 32)
    anchor = None
    if not a.no_anchor:
        anchor = _anchor(a, folder, work, batch32)
        encoders[ANCHOR] = token_graph_encoder(anchor["int8_graph"], tok, export.max_length, a.threads)
    payload: dict = {"task": task.description, "validation": export.validation.text(), "threads": a.threads,
                     "variants": {v.name: {"path": str(v.path), "size_mib": v.size_mib, "excluded": list(v.excluded_nodes)}
                                  for v in variants.variants}, "anchor": anchor, "openvino": None, "notes": variants.notes}
    model, flags = cpu_model_and_flags()
    payload["machine"] = {"cpu_model": model, "flags": sorted(k for k, v in flags.items() if v)}
    ov = _openvino(a, folder, work, task.docs[:a.openvino_samples])
    try:
        if ov is not None:
            encoders[OV_FP32], encoders[OV_INT8] = ov.encoder(openvino_embed.FP32), ov.encoder(openvino_embed.INT8)
            payload["openvino"] = {k: v for k, v in ov.info.items() if k != "ok"}
        quality = None if a.skip_quality else _quality(a, encoders, task, folder, payload)
        if not a.skip_speed:
            graphs = {v.name: str(v.path) for v in variants.variants}
            _speed(a, encoders, folder, {1: batch32[:1], 32: batch32}, med, graphs, payload, quality)
        if ov is not None:
            payload["openvino"]["round_trip_ms"] = rt = ov.round_trip_ms()
            print(f"the OpenVINO rows' calls each include a pipe round trip to their worker: {rt:.3f} ms (median of 200)")
    finally:
        if ov is not None:
            ov.close()
    payload["seconds"] = time.perf_counter() - t_start
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, payload)
    print(f"\nwrote {out} ({payload['seconds']:.0f} s)")
    return 0


def _quality(a, encoders: dict, task, folder: Path, payload: dict):
    """Every encoder scored on the task against the FP32 graph; the table printed, the evaluation in ``payload``."""
    from workbench.core import serial
    from workbench.embed.evaluate import evaluate_embeddings

    quality = evaluate_embeddings(encoders, "fp32", task, n_boot=a.n_boot, reference_folder=folder,
                                  log=lambda line: print(line, flush=True))
    q = serial.to_dict(quality)
    for v in q["variants"]:
        v["agreement"].pop("cosines", None)
    payload["quality"] = q
    print("\nFP32 graph: " + ", ".join(f"{k} {v:.4f}" for k, v in quality.fp32_metrics.items())
          + "; SentenceTransformer.encode: " + ", ".join(f"{k} {v:.4f}" for k, v in (quality.reference_metrics or {}).items()))
    print(f"{'variant':<46}{'NDCG@10':>9}{'of FP32':>9}{'worst slice drop':>34}{'top10 kept':>11}{'cosine':>9}  budget")
    for v in quality.variants:
        r = v.retrieval
        worst = max((s for s in r.slices if s.name != "all"), key=lambda s: s.fp32["ndcg@10"] - s.variant["ndcg@10"], default=None)
        wtxt = f"{worst.fp32['ndcg@10'] - worst.variant['ndcg@10']:+.4f} {worst.name[:20]}" if worst else "-"
        print(f"{v.name:<46}{r.overall().variant['ndcg@10']:>9.4f}{r.ndcg_ratio:>9.2%}{wtxt:>34}"
              f"{r.overall().overlap_at_10:>11.3f}{v.agreement.overall().cosine.value:>9.5f}  "
              f"{'meets' if v.meets_budget else 'misses: ' + '; '.join(v.budget_reasons)}")
    return quality


def _speed(a, encoders: dict, folder: Path, texts_by_batch: dict, med: int, graphs: dict, payload: dict, quality) -> None:
    """Every encoder and ``SentenceTransformer.encode`` in the same interleaved rounds; the table printed, the run in
    ``payload``. The OpenVINO FP32 row's floor is the FP32 graph's (the same multiply-adds); its INT8 row has none
    (floors are counted from ONNX graphs)."""
    from workbench.embed.encode import ST_ENCODE, encode_fns, speed_summary, st_encoder, time_encoders

    st = st_encoder(folder, a.threads)
    fns = encode_fns(dict(encoders), st, texts_by_batch)
    if OV_FP32 in encoders and "fp32" in graphs:
        graphs = {**graphs, OV_FP32: graphs["fp32"]}
    print(f"\ntiming at the corpus's median length ({med} tokens), batch 1 and 32, {a.threads} threads, {a.rounds} rounds",
          flush=True)
    speed = speed_summary(time_encoders(fns, ST_ENCODE, med, a.threads, graphs, rounds=a.rounds, repeats=a.repeats,
                                        max_seconds=None))
    payload["speed"] = speed
    print(f"{speed['load']}; {speed['cpu']}")
    print(f"{'variant':<46}{'batch':>6}{'ms/text':>10}{'speed-up [95%]':>24}{'of floor':>10}")
    for s in speed["speeds"]:
        of = f"{s['floor_ms'] / s['ms_per_batch']:.0%}" if s["floor_ms"] else "-"
        ci = f"{s['speedup']:.2f}x [{s['lo']:.2f}, {s['hi']:.2f}]"
        print(f"{s['name']:<46}{s['batch']:>6}{s['ms_per_text']:>10.3f}{ci:>24}{of:>10}")
    if quality is not None:
        payload["targets"] = _targets(quality, speed)
        print("\n" + "\n".join(payload["targets"]["lines"]))


def _targets(quality, speed) -> dict:
    """The workbench's best variant (meets the NDCG@10 budget, fastest at batch 1) against the targets,
    beside the anchor and OpenVINO's INT8."""
    ok = [v for v in quality.variants if v.meets_budget and v.name not in NOT_WORKBENCH]
    lines = []
    by = {(s["name"], s["batch"]): s for s in speed["speeds"]}
    best = max(ok, key=lambda v: by[(v.name, 1)]["speedup"]) if ok else None
    rows = ([best.name] if best else []) + [n for n in (ANCHOR, OV_INT8) if any(v.name == n for v in quality.variants)]
    for name in rows:
        v = quality.variant(name)
        b1, b32 = by[(name, 1)], by[(name, 32)]
        lines.append(f"{name}: {b1['speedup']:.2f}x encode at batch 1 (target 3.2x), {b32['speedup']:.2f}x at batch 32 (target 2x), "
                     f"NDCG@10 {v.retrieval.ndcg_ratio:.2%} of FP32 (target 99.7%), slices within budget: {bool(v.meets_budget)}")
    if best is None:
        lines.append("no workbench INT8 variant meets the NDCG@10 budget")
    ref = quality.reference_metrics or {}
    if ref:
        lines.append(f"FP32 graph NDCG@10 minus SentenceTransformer.encode's: {quality.fp32_metrics['ndcg@10'] - ref['ndcg@10']:+.2e} "
                     "(target within 1e-3)")
    return {"best": best.name if best else None, "lines": lines, "contended": speed["contended"]}


if __name__ == "__main__":
    sys.exit(main())
