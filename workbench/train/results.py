"""What a training run leaves: step and evaluation records, the :class:`TrainRun` (``train.json``) and the
:class:`Progress` a callback receives while it runs.
"""

from __future__ import annotations

import enum
import os
import statistics
from dataclasses import dataclass, field
from typing import Callable, Optional

from .. import runs
from ..runs.layout import TRAIN_FILE
from .config import Backend, TrainConfig
from .graphs import TrainGraphs


class RunStatus(str, enum.Enum):
    OK = "ok"
    STOPPED = "stopped"
    FAILED = "failed"
    FELL_BACK = "fell_back"


STEP_WARMUP = 2  # steps left out of the medians: step 1 is start-up, step 2 re-compiles under torch.compile


@dataclass(frozen=True)
class StepRecord:
    step: int  # 1-based optimizer step
    loss: float  # mean training loss over the step's micro-batches
    step_s: float  # forward + backward + optimizer step (tokenisation excluded)
    samples_per_s: float
    lr: float
    examples: int
    at: float = float("nan")  # wall-clock start of the step (seconds since the epoch): when it ran, for runs that take turns


@dataclass(frozen=True)
class EvalRecord:
    step: int
    val_loss: float
    val_accuracy: float
    examples: int
    eval_s: float


@dataclass(frozen=True)
class CompileStats:
    """Dynamo's own counters over one run: the evidence that torch.compile compiled the model."""

    frames_total: int  # Python frames Dynamo was asked to compile
    frames_compiled: int  # of those, compiled ("ok")
    graphs: int  # FX graphs captured (1 per frame when nothing breaks)
    graph_breaks: int  # places where Dynamo split the graph and ran Python eagerly
    break_reasons: dict[str, int] = field(default_factory=dict)
    # what the workbench checked or changed in Inductor for this run (workbench.train.inductor), one sentence each
    repairs: list[str] = field(default_factory=list)

    @property
    def compiled(self) -> bool:
        return self.frames_compiled > 0 and self.graphs > 0


@dataclass(frozen=True)
class TrainRun:
    """One training run with one backend: what happened, per step and per evaluation."""

    backend: Backend
    status: RunStatus
    reason: str  # cause and fix when status is not ok
    executed_in_onnxruntime: bool
    steps: list[StepRecord]
    evals: list[EvalRecord]
    peak_memory_mib: float  # process RSS peak during the run (CPU) / allocator peak (CUDA)
    startup_s: float  # first optimizer step, including export + graph build (ortmodule) or compilation (compile)
    total_s: float
    checkpoint_dir: Optional[str]
    graphs: Optional[TrainGraphs]
    config: TrainConfig
    total_steps: int = 0
    setup_s: float = 0.0  # loading data and model, wrapping it
    memory_baseline_mib: float = 0.0  # RSS just before the model was loaded
    memory_source: str = ""
    error: str = ""  # exception type, message and traceback when failed
    world_size: int = 1
    model_parameters: int = 0
    started_at: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    # compile backend: what Dynamo did during this run (graph breaks are reported, not hidden)
    compile_stats: Optional["CompileStats"] = None

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK

    @property
    def losses(self) -> list[float]:
        return [s.loss for s in self.steps]

    def timed_steps(self) -> list[StepRecord]:
        """Steps after the start-up ones (the first STEP_WARMUP), or all but the first if the run is short."""
        skip = STEP_WARMUP if len(self.steps) > STEP_WARMUP + 2 else 1
        return self.steps[skip:] if len(self.steps) > skip else []

    @property
    def median_step_s(self) -> float:
        t = [s.step_s for s in self.timed_steps()]
        return statistics.median(t) if t else float("nan")

    @property
    def samples_per_s(self) -> float:
        m = self.median_step_s
        return self.config.examples_per_step * self.world_size / m if m and m == m else float("nan")

    @property
    def samples_per_s_with_startup(self) -> float:
        """Samples/s over every step, the first (export + graph build, or compilation) included."""
        total = sum(s.step_s for s in self.steps)
        return sum(s.examples for s in self.steps) / total if total > 0 else float("nan")

    @property
    def final_accuracy(self) -> float:
        return self.evals[-1].val_accuracy if self.evals else float("nan")

    @property
    def final_val_loss(self) -> float:
        return self.evals[-1].val_loss if self.evals else float("nan")


@dataclass(frozen=True)
class Progress:
    """What a progress callback receives after every step (and after every evaluation)."""

    backend: Backend
    step: int
    total_steps: int
    loss: float
    elapsed_s: float
    eta_s: float
    samples_per_s: float
    val_loss: Optional[float] = None
    val_accuracy: Optional[float] = None
    phase: str = "train"  # "startup" before the first step, "train", "eval", "done"

    @property
    def fraction(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0


ProgressFn = Callable[[Progress], None]


def run_text(run: TrainRun) -> str:
    """One training run as text, with why it stopped when it did not finish."""
    line = (f"{run.backend.value}: {run.status.value}; {len(run.steps)} steps, median step {run.median_step_s * 1000:.0f} ms, "
            f"{run.samples_per_s:.1f} samples/s, peak {run.peak_memory_mib:.0f} MiB, start-up {run.startup_s:.1f} s, "
            f"val acc {run.final_accuracy:.3f}")
    return line + (f"\nreason: {run.reason}" if run.reason else "")


def load_train_run(path: str | os.PathLike) -> TrainRun:
    """Read a TrainRun back from ``train.json`` or from the backend folder holding it."""
    return runs.load_result(TrainRun, path, TRAIN_FILE)
