"""The anchor of the embedding benchmark, run with the anchor environment's Python
(scripts/setup_anchor_env.sh): sentence-transformers' own ONNX export and its dynamic INT8
(``export_dynamic_quantized_onnx_model``), written into ``--out``.

    .venv-anchor/bin/python benchmarks/anchor_embed.py --model FOLDER --out DIR [--config avx512_vnni]
        [--texts texts.json --time]

Writes ``DIR/anchor.json``: the versions, the quantization config, the INT8 graph's path and, with
``--time``, this environment's own medians of ``encode`` (ONNX FP32 backend and INT8) at batch 1 and
32 on the given texts: a second opinion taken in onnxruntime's current release, in another process
(so not interleaved with the workbench's figures). Nothing from the workbench is imported here.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

CONFIGS = ("avx512_vnni", "avx512", "avx2", "arm64")


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def pick_config() -> str:
    f = cpu_flags()
    if "avx512_vnni" in f:
        return "avx512_vnni"
    if "avx512f" in f:
        return "avx512"
    return "avx2"


def median_ms(fn, rounds: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a sentence-transformers folder")
    p.add_argument("--out", required=True, help="folder for the copy, its ONNX graphs and anchor.json")
    p.add_argument("--config", choices=("auto", *CONFIGS), default="auto", help="the quantization preset (auto: from the CPU flags)")
    p.add_argument("--texts", help="a JSON list of texts to time encode on (with --time)")
    p.add_argument("--time", action="store_true", help="also time encode (ONNX FP32 and INT8) in this environment")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads for the timing")
    a = p.parse_args(argv)
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    out = Path(a.out)
    work = out / "model"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(a.model, work)  # the export writes onnx/ into the model folder: never into the user's
    config = pick_config() if a.config == "auto" else a.config
    t0 = time.perf_counter()
    model = SentenceTransformer(str(work), backend="onnx", device="cpu", local_files_only=True,
                                model_kwargs={"provider": "CPUExecutionProvider"})
    model.save(str(work))  # keeps onnx/model.onnx beside the weights
    export_dynamic_quantized_onnx_model(model, config, str(work))
    seconds = time.perf_counter() - t0
    graphs = sorted(str(x) for x in (work / "onnx").glob("*.onnx"))
    # model_qint8_<config>.onnx, or model_quint8_avx2.onnx (the avx2 preset quantizes to unsigned 8 bits)
    int8 = next((g for g in graphs if "int8" in Path(g).name and Path(g).stem.endswith(config)), None)
    if int8 is None:
        print(f"anchor: no INT8 graph for {config} was written (found {graphs})", file=sys.stderr)
        return 1
    result = {"versions": {k: md.version(k) for k in ("sentence-transformers", "onnxruntime", "torch", "transformers")},
              "config": config, "int8_graph": int8, "fp32_graph": str(work / "onnx" / "model.onnx"), "export_seconds": seconds,
              "own_timing": None}
    try:
        result["versions"]["optimum-onnx"] = md.version("optimum-onnx")
    except md.PackageNotFoundError:
        result["versions"]["optimum"] = md.version("optimum")
    if a.time:
        import torch

        torch.set_num_threads(a.threads)
        texts = json.loads(Path(a.texts).read_text())
        opts = {"provider": "CPUExecutionProvider"}
        fp32 = SentenceTransformer(str(work), backend="onnx", device="cpu", local_files_only=True, model_kwargs=opts)
        q = SentenceTransformer(str(work), backend="onnx", device="cpu", local_files_only=True,
                                model_kwargs={**opts, "file_name": f"onnx/{Path(int8).name}"})
        pt = SentenceTransformer(str(work), device="cpu", local_files_only=True)
        own = {}
        for name, m in (("pytorch", pt), ("onnx fp32", fp32), (f"onnx {Path(int8).stem}", q)):
            own[name] = {str(b): median_ms(lambda m=m, b=b: m.encode(texts[:b], batch_size=b, show_progress_bar=False)) / b
                         for b in (1, 32)}
        result["own_timing"] = {"ms_per_text": own, "threads": a.threads, "note": "medians, one process, not interleaved"}
    (out / "anchor.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
