"""Write the classifier's committed result file from a `workbench demo` run folder's summary.json.

    .venv/bin/python benchmarks/classifier_result.py runs/<time>-demo      # or: make classifier-result RUN=runs/<time>-demo

It reads what the demo measured (PyTorch eager and the fused FP32 graph timed side by side by the fusion stage;
the INT8 variant the search chose, timed beside the FP32 graph, with its 95% interval, size and accuracy change;
the machine profile and the date) and writes ``benchmarks/results/classifier_minilm_<machine>_<date>.json``, which
the README's results table quotes (docs/hooks/figures.py). Run the demo on a quiet machine: a run whose timing was
contended is refused (exit code 2), since its speeds are not measurements.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))  # this checkout's workbench, as the other benchmarks do


class ResultError(ValueError):
    """A run folder this script cannot turn into a result file (exit code 2)."""


def machine_slug(machine: dict) -> str:
    """``epyc-avx2``, ``xeon-avx512vnni``, ...: the CPU's maker and the instruction set that decides INT8 speed."""
    model = (machine.get("cpu_model") or "cpu").lower()
    maker = next((m for m in ("epyc", "xeon", "ryzen", "core") if m in model), "cpu")
    flags = machine.get("flags") or {}
    isa = "amx" if flags.get("amx") else "avx512vnni" if flags.get("avx512_vnni") else \
        "avx512" if flags.get("avx512f") else "avx2" if flags.get("avx2") else "other"
    return f"{maker}-{isa}"


def isa_words(flags: dict) -> str:
    """The instruction sets that decide speed, in the machine profile's words."""
    names = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_vnni": "AVX-512 VNNI", "avx_vnni": "AVX-VNNI", "amx": "AMX", "bf16": "bf16"}
    has = [n for k, n in names.items() if flags.get(k)]
    lacks = [n for k, n in names.items() if not flags.get(k)]
    return ", ".join(has) + ("; no " + ", no ".join(lacks) if lacks else "")


def _at_shape(latency: dict, shape: str) -> float:
    return latency.get(shape) if shape in latency else next(iter(latency.values()))


def classifier_result(summary: dict, run: str) -> dict:
    """The result file's content: three rows (PyTorch eager, the fused FP32 graph, the chosen INT8 variant)."""
    if summary.get("kind") != "demo" or summary.get("task") != "classification":
        raise ResultError(f"{run}: summary.json is a {summary.get('kind')} of a {summary.get('task')} model, not a demo "
                          "run; give the folder `workbench demo` wrote")
    if summary.get("contended"):
        raise ResultError(f"{run}: its timing was contended ({summary.get('contended_because')}); run the demo again on a "
                          "quiet machine")
    fusion, search = summary.get("fusion") or {}, summary.get("search") or {}
    chosen = (summary.get("verdict") or {}).get("chosen")
    transformer = [v for v in fusion.get("variants", []) if v["name"] == "transformer"]
    if not fusion.get("pytorch_latency_ms") or not transformer or not search:
        raise ResultError(f"{run}: summary.json has no fusion timing or no search; run the whole demo, not a part of it")
    # every row at the shape the search timed the INT8 variants at (the fusion stage timed eager and FP32 there too)
    timed = ((summary.get("method") or {}).get("timing") or {}).get("shapes") or []
    shape = timed[0] if timed and timed[0] in fusion["pytorch_latency_ms"] else next(iter(fusion["pytorch_latency_ms"]))
    eager_ms = fusion["pytorch_latency_ms"][shape]
    fused_ms = _at_shape(transformer[0]["latency_ms"], shape)
    rows = [{"variant": "PyTorch eager", "ms": eager_ms, "speed": 1.0, "against": "eager", "shape": shape,
             "size_mib": None, "accuracy_delta": None},
            {"variant": "fused FP32 graph", "ms": fused_ms, "speed": eager_ms / fused_ms, "against": "eager", "shape": shape,
             "size_mib": transformer[0]["size_mib"], "accuracy_delta": 0.0}]
    picked = [c for c in search["candidates"] if c["name"] == chosen]
    if picked:
        c = picked[0]
        lo, hi = c["speedup_ci"] or (None, None)
        rows.append({"variant": f"INT8 chosen: `{chosen}`", "ms": c["latency_ms"], "speed": c["speedup"],
                     "against": "FP32 graph", "lo": lo, "hi": hi,
                     "shape": timed[0] if timed else shape,
                     "size_mib": c["size_mib"], "accuracy_delta": c["accuracy_delta"]})
    machine = summary.get("machine") or {}
    export = summary.get("export") or {}
    model = f"the demo's fine-tuned {export.get('model_type', 'model')} ({export.get('num_parameters', 0) / 1e6:.1f}M parameters)"
    return {"benchmark": "make demo (summary.json)", "model": model,
            "date": summary["created_utc"][:10], "source_run": run, "threads": machine.get("threads"),
            "machine": {"cpu_model": machine.get("cpu_model"), "isa": machine.get("isa") or isa_words(machine.get("flags") or {}),
                        "flags": machine.get("flags"), "cores": machine.get("cores")},
            "verdict": (summary.get("verdict") or {}).get("text"), "rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a `workbench demo` run folder (it holds summary.json)")
    p.add_argument("--out-dir", default=str(RESULTS), help="where the result file goes")
    a = p.parse_args(argv)
    summary_path = Path(a.run) / "summary.json"
    try:
        if not summary_path.is_file():
            raise ResultError(f"{a.run}: no summary.json there; give the folder `workbench demo` wrote (runs/<time>-demo)")
        result = classifier_result(json.loads(summary_path.read_text()), a.run)
    except ResultError as e:
        print(f"classifier_result: {e}", file=sys.stderr)
        return 2
    from workbench.runs.atomic import atomic_write_text

    out = Path(a.out_dir) / f"classifier_minilm_{machine_slug(result['machine'])}_{result['date']}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
