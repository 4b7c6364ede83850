"""On-device training: peak memory of each side, measured in a fresh process of its own
(``python -m workbench.ondevice --side ort|eager --work DIR``)."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from .. import runs
from ..core import serial
from ..train.memory import PeakMemory
from ..train.process import child_env
from .config import BATCHES_FILE, OnDeviceConfig, OnDeviceError
from .data import load_batches, save_batches, load_ondevice_model
from .loops import OrtTrainer, TorchTrainer
from .result import Artifacts


def child_main(argv: Optional[list[str]] = None) -> int:
    """Run one side's steps and print JSON (peak RSS, growth, setup time, step times)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m workbench.ondevice")
    parser.add_argument("--side", required=True, choices=["ort", "eager"])
    parser.add_argument("--work", required=True)
    args = parser.parse_args(argv)
    work = Path(args.work)
    spec = json.loads((work / "measure.json").read_text())
    cfg = serial.from_dict(OnDeviceConfig, spec["config"])
    batches = load_batches(work / BATCHES_FILE)
    with PeakMemory("cpu", interval_s=0.01) as memory:
        t0 = time.perf_counter()
        if args.side == "ort":
            trainer = OrtTrainer(Path(spec["artifacts"]), cfg.lr, spec["input_names"], spec["threads"])
        else:
            import torch

            torch.set_num_threads(spec["threads"])
            loaded = load_ondevice_model(spec["model"], cfg, spec["class_names"])
            trainer = TorchTrainer(loaded, spec["trainable"], cfg)
        setup_s = time.perf_counter() - t0
        before = memory.rss_mib()
        times = []
        for batch in batches:
            s = time.perf_counter()
            trainer.step(batch)
            times.append((time.perf_counter() - s) * 1000)
            memory.sample()
    print(json.dumps({"peak_rss_mib": memory.peak_mib, "rss_growth_mib": memory.peak_mib - before, "setup_s": setup_s,
                      "median_step_ms": statistics.median(times[1:] or times)}))
    return 0


def measure_isolated(model: str, artifacts: Artifacts, cfg: OnDeviceConfig, batches, input_names, class_names, work: Path,
                     threads: int) -> dict[str, dict]:
    """Peak RSS of each side in a fresh process (in one process the first side's memory carries over)."""
    work.mkdir(parents=True, exist_ok=True)
    save_batches(work / BATCHES_FILE, batches[: cfg.memory_steps])
    runs.atomic_write_json(work / "measure.json", {"model": model, "config": cfg, "artifacts": str(artifacts.folder),
                                                   "input_names": list(input_names), "class_names": class_names,
                                                   "trainable": artifacts.trainable_tensors, "threads": threads})
    env = child_env()
    out = {}
    for side in ("ort", "eager"):
        proc = subprocess.run([sys.executable, "-m", "workbench.ondevice", "--side", side, "--work", str(work)],
                              capture_output=True, text=True, env=env, timeout=1800)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
            raise OnDeviceError(f"measuring the {side} side in its own process failed (exit {proc.returncode}): {tail}")
        out[side] = json.loads(proc.stdout.strip().splitlines()[-1])
    shutil.rmtree(work, ignore_errors=True)
    return out
