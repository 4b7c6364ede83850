"""The same training loop on several processes: DistributedDataParallel under ``torchrun``.

Every process initialises ``torch.distributed`` (gloo on the CPU, NCCL on CUDA) and calls
:func:`workbench.train.run_training`, which wraps the model in ``DistributedDataParallel`` (around
``ORTModule`` for that backend). A global batch of ``batch_size * N`` is split between the ranks.
Every rank writes a SHA-256 digest of its final parameters: after an all-reduced backward and the same
optimizer step they must be bit-identical, and :class:`DistributedRun` says whether they are.
Supported: ``eager`` and ``ortmodule`` (without DeepSpeed ZeRO, which the published ORTModule GPU
results used and which is not installed here).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import runs
from ..core import serial
from ..core.options import parse_choice
from .config import Backend, TrainConfig, TrainConfigError, check_backend
from .results import TrainRun, load_train_run

DISTRIBUTED_BACKENDS = (Backend.EAGER, Backend.ORTMODULE)


@dataclass(frozen=True)
class RankReport:
    rank: int
    world_size: int
    weights_sha256: str
    initial_weights_sha256: str
    steps: int
    final_loss: float


@dataclass(frozen=True)
class DistributedRun:
    run: TrainRun  # rank 0's run (its steps count every rank's examples)
    ranks: list[RankReport]
    process_group_backend: str  # gloo | nccl

    @property
    def identical_weights(self) -> bool:
        return len({r.weights_sha256 for r in self.ranks}) == 1 and len(self.ranks) == self.run.world_size


def weights_digest(model) -> str:
    """SHA-256 over every parameter's bytes, in ``named_parameters`` order."""
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def check_nproc(nproc, flag: str = "nproc") -> int:
    """``nproc`` when 1 to the number of CPU cores (more processes than cores only queue behind each other)."""
    cores = os.cpu_count() or 1
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise TrainConfigError(f"{flag} must be a whole number of processes from 1 to {cores} (the CPU cores here), "
                               f"got {nproc!r}")
    if nproc > cores:
        raise TrainConfigError(f"{flag} {nproc} is more processes than this machine's {cores} CPU cores; they would only "
                               f"wait for each other: use {flag} {cores} or fewer")
    return nproc


def run_distributed(
    cfg: TrainConfig,
    backend: Backend | str,
    nproc: int = 2,
    run_dir: str | os.PathLike | None = None,
    timeout_s: float = 600,
) -> DistributedRun:
    """Train with ``nproc`` processes under torchrun and return rank 0's run plus every rank's digest."""
    backend = check_backend(cfg, backend)
    if backend not in DISTRIBUTED_BACKENDS:
        raise TrainConfigError(f"distributed training supports {[b.value for b in DISTRIBUTED_BACKENDS]}, got {backend.value!r}")
    check_nproc(nproc)
    if cfg.device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < nproc:
            raise TrainConfigError(f"nproc={nproc} CUDA processes need {nproc} GPUs; torch sees {torch.cuda.device_count()}")
    run_dir = Path(run_dir) if run_dir is not None else runs.new_run_dir(f"ddp{nproc}-{backend.value}")
    out = run_dir / backend.value
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("rank*.json"):
        stale.unlink()
    cfg_path = runs.atomic_write_json(run_dir / f".{backend.value}.ddp-config.json", cfg)
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
        "-m", "workbench.train.distributed", "--config", str(cfg_path), "--backend", backend.value, "--run-dir", str(run_dir),
    ]
    from .process import child_env, die_with_parent

    env = child_env({"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))})

    try:
        # torchrun gets SIGTERM when this process dies (it then stops its workers), and each worker
        # SIGKILL when torchrun dies: none of them outlives a killed `workbench train`
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env,
                              preexec_fn=lambda: die_with_parent(signal.SIGTERM))
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"torchrun did not finish within {timeout_s} s; raise timeout_s or train fewer steps. "
                           f"Last output: {str(exc.stderr or '')[-2000:]}") from exc
    finally:
        cfg_path.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun exited with code {proc.returncode}; its output ends with:\n{(proc.stdout + proc.stderr)[-3000:]}")
    reports = [serial.from_dict(RankReport, json.loads(p.read_text())) for p in sorted(out.glob("rank*.json"))]
    return DistributedRun(load_train_run(out), reports, "nccl" if cfg.device.startswith("cuda") else "gloo")


def _worker(argv: Optional[list[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="torchrun ... -m workbench.train.distributed")
    parser.add_argument("--config", required=True)
    parser.add_argument("--backend", required=True, choices=[b.value for b in DISTRIBUTED_BACKENDS])
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args(argv)
    from .process import die_with_parent

    die_with_parent()  # torchrun's agent is the parent: this worker never outlives it

    import torch
    import torch.distributed as dist

    from ..data.load import class_names
    from .loop import load_model_for, load_train_data, run_training

    cfg = serial.from_dict(TrainConfig, json.loads(Path(args.config).read_text()))
    backend = parse_choice(Backend, args.backend, "backend", TrainConfigError)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cfg.device.startswith("cuda"):
        cfg = cfg.replace(device=f"cuda:{local_rank}")
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cfg.device.startswith("cuda") else "gloo")
    try:
        loaded = load_model_for(cfg, class_names(load_train_data(cfg.data)))
        initial = weights_digest(loaded.model)
        run = run_training(cfg, backend, args.run_dir, model=loaded)
        rank, world = dist.get_rank(), dist.get_world_size()
        report = RankReport(rank, world, weights_digest(loaded.model), initial, len(run.steps),
                            run.steps[-1].loss if run.steps else float("nan"))
        runs.atomic_write_json(Path(args.run_dir) / backend.value / f"rank{rank}.json", report)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(_worker())
