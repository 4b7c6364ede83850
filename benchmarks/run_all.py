"""Run every benchmark (training, graph/fusion, quantization), each in its own process so that
peak-memory figures and thread pools do not leak between them. Each prints its table and writes
its JSON under --out; this script writes an index of what ran.

    .venv/bin/python benchmarks/run_all.py --out runs/bench [--quick]
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench_gpu: the GPU section; on a machine without CUDA it says why and measures nothing (exit 0)
BENCHES = ("bench.py", "bench_train.py", "bench_graph.py", "bench_quant.py", "bench_gpu.py")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench")
    parser.add_argument("--quick", action="store_true", help="short smoke run of every benchmark")
    parser.add_argument("--only", nargs="*", choices=[b.removesuffix(".py") for b in BENCHES])
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    index = {"machine": {"platform": platform.platform(), "processor": platform.processor(), "python": platform.python_version()},
             "benchmarks": []}
    failed = 0
    for script in BENCHES:
        name = script.removesuffix(".py")
        if args.only and name not in args.only:
            continue
        cmd = [sys.executable, str(HERE / script), "--out", str(out / f"{name}.json")] + (["--quick"] if args.quick else [])
        print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        index["benchmarks"].append({"name": name, "command": cmd, "returncode": rc, "seconds": round(time.perf_counter() - t0, 1),
                                    "json": str(out / f"{name}.json")})
        failed += rc != 0
    from workbench.runs import atomic_write_json

    atomic_write_json(out / "index.json", index)
    print(f"\nwrote {out / 'index.json'}; {failed} benchmark(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
