"""On-device training benchmark: how far onnxruntime.training.api's loss curve drifts from PyTorch
eager's on the same batches, how far deliberate defects move it, and step time / peak memory.

Measures, with the same batches and trainable set:
- drift: on-device vs PyTorch eager per-step losses for each trainable set (head, last layer, all);
- defects: the on-device curve at lr vs PyTorch's curve at 2x lr, and vs torch.optim.AdamW
  (a different AdamW formula) at lr: what a tolerance must catch;
- cost: median step time (interleaved in one process) and peak RSS (a fresh process per side).
Prints a table and writes JSON to --out. Timings belong here, never in tests.

    .venv/bin/python benchmarks/bench_ondevice.py --out runs/bench/bench_ondevice.json [--model tiny] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench_ondevice.json")
    parser.add_argument("--model", default="tiny", help="'tiny', 'minilm' or a model folder")
    parser.add_argument("--trainable", default="head,last,all", help="comma-separated trainable sets to measure")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of both sides")
    parser.add_argument("--no-memory", action="store_true", help="skip the per-side processes that measure peak RSS")
    args = parser.parse_args(argv)

    from workbench.data.load import DataConfig, load_data
    from workbench.ondevice import OnDeviceConfig, pytorch_curve, run_ondevice

    data = load_data(DataConfig(max_train=max(256, args.steps * args.batch_size), max_eval=64))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for trainable in [t.strip() for t in args.trainable.split(",") if t.strip()]:
            cfg = OnDeviceConfig(trainable=trainable, steps=args.steps, batch_size=args.batch_size,
                                 max_length=args.max_length, lr=args.lr, threads=args.threads,
                                 measure_memory=not args.no_memory, memory_steps=min(args.steps, 10))
            t0 = time.perf_counter()
            r = run_ondevice(args.model, cfg, Path(work) / trainable, data=data)
            doubled = pytorch_curve(args.model, cfg, data, lr=2 * args.lr)
            torch_adamw = pytorch_curve(args.model, cfg, data, torch_adamw=True)
            d2 = [abs(a - b) for a, b in zip(r.ondevice_losses, doubled)]
            dt = [abs(a - b) for a, b in zip(r.ondevice_losses, torch_adamw)]
            rows.append({
                "trainable": trainable, "trainable_parameters": r.artifacts.trainable_parameters,
                "artifact_sizes_mib": {f.name: round(f.size_mib, 3) for f in r.artifacts.files},
                "drift": r.max_loss_diff, "defect_2x_lr": max(d2), "defect_2x_lr_first_visible_step": next((i + 1 for i,
                                                                                                            x in enumerate(d2) if x > 0),
                                                                                                            None),
                "defect_torch_adamw": max(dt), "ondevice_losses": r.ondevice_losses, "pytorch_losses": r.pytorch_losses,
                "ondevice_step_ms": r.ondevice.median_step_ms, "pytorch_step_ms": r.pytorch.median_step_ms,
                "ondevice_isolated_step_ms": r.ondevice.isolated_median_step_ms,
                "pytorch_isolated_step_ms": r.pytorch.isolated_median_step_ms,
                "ondevice_peak_rss_mib": r.ondevice.peak_rss_mib, "pytorch_peak_rss_mib": r.pytorch.peak_rss_mib,
                "ondevice_rss_growth_mib": r.ondevice.rss_growth_mib, "pytorch_rss_growth_mib": r.pytorch.rss_growth_mib,
                "inference_validation_max_abs_diff": r.validation.max_abs_diff, "seconds": time.perf_counter() - t0,
            })
    print(f"{args.model}, {args.steps} steps of {args.batch_size} x <= {args.max_length} tokens, lr {args.lr:g}, {args.threads} thread(s)")
    print(f"{'trainable':<9} {'params':>10} {'MiB':>7} {'drift':>9} {'2x lr':>9} {'torch AdamW':>11} "
          f"{'ORT ms':>8} {'PT ms':>8} {'ORT MiB':>8} {'PT MiB':>8} {'ORT +MiB':>8} {'PT +MiB':>8}")
    for r in rows:
        f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        print(f"{r['trainable']:<9} {r['trainable_parameters']:>10,} {sum(r['artifact_sizes_mib'].values()):>7.2f} "
              f"{r['drift']:>9.2e} {r['defect_2x_lr']:>9.2e} {r['defect_torch_adamw']:>11.2e} "
              f"{r['ondevice_step_ms']:>8.2f} {r['pytorch_step_ms']:>8.2f} {f(r['ondevice_peak_rss_mib'], '.0f'):>8} "
              f"{f(r['pytorch_peak_rss_mib'], '.0f'):>8} {f(r['ondevice_rss_growth_mib'], '.0f'):>8} "
              f"{f(r['pytorch_rss_growth_mib'], '.0f'):>8}")
    flags = ""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        pass
    payload = {"args": vars(args), "rows": rows, "machine": {
        "cpu": platform.processor() or platform.machine(), "load_average": os.getloadavg(),
        "flags": [x for x in ("avx2", "avx512f", "avx512_vnni", "amx_tile", "avx512_bf16") if x in flags.split()]}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2))
    print(f"load average {os.getloadavg()}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
