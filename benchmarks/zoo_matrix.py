"""The coverage matrix: every supported encoder type through export, fusion, dynamic INT8 and
per-slice evaluation, on tiny random models with their own tokenizers (workbench.workflows.coverage). Prints the
table the README shows and writes JSON.

    .venv/bin/python benchmarks/zoo_matrix.py --out runs/bench/zoo_matrix.json [--types bert roberta] [--train-steps 0]

Each type is also fine-tuned for --train-steps steps (default 2) under ORTModule first, with the
fallback to PyTorch disabled: the ORTModule column says whether it trains in ONNX Runtime.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def cpu() -> dict:
    """The CPU's model name and the instruction sets that change these figures, from /proc/cpuinfo."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    model = {k.strip(): v.strip() for k, v in fields.items()}.get("model name", platform.processor() or platform.machine())
    flags = set(next((v for k, v in fields.items() if k.strip() == "flags"), "").split())
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "avx512_bf16")
    return {"model": model, "flags": [f for f in wanted if f in flags], "logical_cores": os.cpu_count()}


def fmt_ops(ops: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(ops.items())) or "none"


def main(argv=None) -> int:
    from workbench.core import serial
    from workbench.workflows import coverage as zoo
    from workbench.data.load import DataConfig, load_data
    from workbench.runs import atomic_write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/zoo_matrix.json")
    parser.add_argument("--types", nargs="*", choices=zoo.ZOO_TYPES, default=list(zoo.ZOO_TYPES))
    parser.add_argument("--train-steps", type=int, default=2,
                        help="ORTModule fine-tuning steps per type before export (0: skip the ORTModule column)")
    parser.add_argument("--work", help="folder for the models and stage results (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="zoo-matrix-"))
    data = load_data(DataConfig.quick())
    rows, t0, load0 = [], time.perf_counter(), os.getloadavg()
    for model_type in args.types:
        row = zoo.run_coverage(model_type, work / model_type, data, train_steps=args.train_steps)
        rows.append(row)
        print(f"{model_type}: {'ok' if row.ok else 'FAILED'} in {row.seconds:.1f} s", file=sys.stderr, flush=True)
    total = time.perf_counter() - t0

    print("| type | tokenizer class | graph inputs | fused (transformer optimizer, model_type 'bert') | not fused | "
          "export max abs diff | INT8 ok (max abs diff) | ORTModule |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r.model_type} | {r.tokenizer_class} | {', '.join(r.graph_inputs)} | {fmt_ops(r.fused_ops)} | "
              f"{', '.join(r.not_fused) or '-'} | {r.export_max_abs_diff:.1e} | "
              f"{'yes' if r.int8_passed else 'NO'} ({r.int8_max_abs_diff:.1e}) | {r.ortmodule.split(':')[0]} |")
    for r in rows:
        for fusion, cause in r.not_fused.items():
            print(f"\n{r.model_type}, {fusion} not fused: {cause}")
        if r.ortmodule.startswith("failed"):
            print(f"\n{r.model_type}, ORTModule {r.ortmodule}")
    machine = {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu(),
               "load_avg_at_start": load0, "load_avg_at_end": os.getloadavg()}
    print(f"\n{len(rows)} types in {total:.1f} s on {machine['cpu']['model']} ({', '.join(machine['cpu']['flags'])}), "
          f"load average {load0[0]:.2f} at the start, {machine['load_avg_at_end'][0]:.2f} at the end")
    out = Path(args.out)
    atomic_write_json(out, {"machine": machine, "train_steps": args.train_steps, "seconds": total,
                            "rows": [serial.to_dict(r) for r in rows]})
    print(f"wrote {out}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
