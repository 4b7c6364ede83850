"""The training loop: :class:`Trainer` and :func:`run_training`.

Every backend gets the same seed, data order, optimizer, schedule and gradient clipping. Evaluation always
runs the same eager PyTorch code on the trained weights, so accuracy compares the *training*, not the engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import math
import os
import platform
import shutil
import statistics
import threading
import time
import traceback
from pathlib import Path
from typing import Optional

from .. import runs
from ..runs.layout import TRAIN_FILE
from ..core.options import parse_choice
from ..data.load import DataConfig
from .backends import compile_stats_since, dynamo_counters, make_optimizer, prepare_model, explain_failure
from .checkpoint import save_checkpoint
from .config import Backend, Precision, TrainConfig, TrainConfigError, check_backend
from .graphs import finalise_graphs
from .inductor import check_embedding_gradient
from .memory import PeakMemory
from .ortmodule import FellBackError, ortmodule_session_nodes, raise_if_fell_back
from .results import EvalRecord, Progress, ProgressFn, RunStatus, StepRecord, TrainRun
from .schedule import iter_micro_batches, lr_factor, total_steps_for

ISOLATED_ENV = "WORKBENCH_ISOLATED"  # "1" in a run's own process (process.py): recorded in TrainRun.environment
# recorded in TrainRun.environment: runs with the same id took turns (lockstep.py), so their steps pair up
LOCKSTEP_ENV = "WORKBENCH_LOCKSTEP"


def _dist_info() -> tuple[int, int]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return 0, 1


class Trainer:
    """One backend's training state, one optimizer step at a time (the benchmark interleaves several). The
    optimizer holds the original module's parameters, which ORTModule and torch.compile train in place."""

    def __init__(self, cfg: TrainConfig, backend: Backend | str, loaded, train_dataset, total_steps: int,
                 graph_prefix: Optional[Path] = None, rank: int = 0, world_size: int = 1):
        import torch

        self.cfg, self.backend = cfg, parse_choice(Backend, backend, "backend", TrainConfigError)
        self.world_size, self.total_steps, self.step_no = world_size, total_steps, 0
        self.device = torch.device(cfg.device)
        self.net = loaded.model.to(self.device)
        self.net.train()
        torch.manual_seed(cfg.seed)
        wrapped = prepare_model(self.net, self.backend, cfg, graph_prefix)
        self.ort_module = wrapped if self.backend is Backend.ORTMODULE else None
        if world_size > 1:
            wrapped = torch.nn.parallel.DistributedDataParallel(wrapped)
        self.wrapped = wrapped
        if self.backend is Backend.ORTMODULE:
            import onnxruntime

            onnxruntime.set_seed(cfg.seed)
        self.optimizer = make_optimizer(self.net.parameters(), cfg)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_factor(s, total_steps, cfg))
        # fp16 only; a disabled scaler passes the loss through and steps the optimizer plainly
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.precision is Precision.FP16)
        self.batches = iter_micro_batches(train_dataset, loaded.tokenizer, cfg, rank, world_size)

    def step(self) -> StepRecord:
        """One optimizer step (``grad_accum`` micro-batches), tokenised before the clock starts; raises
        :class:`FellBackError` when ORTModule ran it in PyTorch, FloatingPointError on a non-finite loss."""
        import torch

        from ..data.batches import model_inputs

        cfg, device = self.cfg, self.device
        self.step_no += 1
        micro = [next(self.batches) for _ in range(cfg.grad_accum)]
        # Only what the model's forward() takes (no token_type_ids for DistilBERT, MPNet, ...).
        micro = [({k: v.to(device) for k, v in model_inputs(self.net, enc).items()}, y.to(device)) for enc, y in micro]
        _sync(device)
        t0, started = time.perf_counter(), time.time()
        loss_sum = 0.0
        for enc, labels in micro:
            with _autocast(cfg, device):
                out = self.wrapped(**enc, labels=labels)
            if self.ort_module is not None:
                raise_if_fell_back(self.ort_module, when=f"at step {self.step_no}")
            loss = out.loss / cfg.grad_accum
            self.scaler.scale(loss).backward()
            loss_sum += float(loss.detach())
        self.scaler.unscale_(self.optimizer)
        if cfg.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), cfg.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        lr_now = self.scheduler.get_last_lr()[0]
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        _sync(device)
        dt = time.perf_counter() - t0
        if not math.isfinite(loss_sum):
            raise FloatingPointError(
                f"the training loss became {loss_sum} at step {self.step_no}: lower lr (now {cfg.lr}) or use precision='fp32'"
            )
        examples = cfg.examples_per_step * self.world_size
        return StepRecord(self.step_no, loss_sum, dt, examples / dt, lr_now, examples, at=started)


class StepGate:
    """Who may use the CPU now when runs take turns (:mod:`workbench.train.lockstep`): ``next(phase)`` before
    each phase (``"setup"``, ``"step N"``, ``"finish"``), ``release()`` at the end. This one never waits."""

    def next(self, phase: str) -> None:  # noqa: B027 - a no-op by design
        pass

    def release(self) -> None:  # noqa: B027
        pass


def run_training(
    cfg: TrainConfig,
    backend: Backend | str,
    run_dir: str | os.PathLike | None = None,
    progress: Optional[ProgressFn] = None,
    stop: Optional[threading.Event] = None,
    *,
    model=None,
    gate: Optional[StepGate] = None,
) -> TrainRun:
    """Fine-tune ``cfg.model`` on ``cfg.data`` with one backend; save and return the :class:`TrainRun`.

    A stopped run keeps its steps and checkpoint; a failure during training is returned as a ``failed`` run.
    Under ``torchrun`` the loop runs with DistributedDataParallel; only rank 0 reports and writes."""
    gate = gate if gate is not None else StepGate()
    try:
        return _train(cfg, backend, run_dir, progress, stop, model=model, gate=gate)
    finally:
        gate.release()


@dataclasses.dataclass
class _Outcome:
    steps: list[StepRecord] = dataclasses.field(default_factory=list)
    evals: list[EvalRecord] = dataclasses.field(default_factory=list)
    status: RunStatus = RunStatus.OK
    reason: str = ""
    error: str = ""
    startup_s: float = float("nan")
    setup_s: float = 0.0
    executed_in_ort: bool = False

    def failed(self, exc: BaseException, reason: str) -> None:
        self.error = "".join(traceback.format_exception(exc))
        self.reason = reason
        self.status = RunStatus.FELL_BACK if isinstance(exc, FellBackError) else RunStatus.FAILED
        self.executed_in_ort = False

    def check_compiled(self, stats) -> None:
        """A "compile" run that compiled nothing was eager PyTorch: marked as fallen back."""
        if self.status is RunStatus.OK and not stats.compiled:
            self.status = RunStatus.FELL_BACK
            self.reason = (f"torch.compile compiled nothing: Dynamo's counters show {stats.frames_compiled} of "
                           f"{stats.frames_total} frame(s) compiled and {stats.graphs} graph(s); the run was "
                           "eager PyTorch. Fix: check TORCHDYNAMO_DISABLE and torch._dynamo.config, or train with eager")


def _train(
    cfg: TrainConfig,
    backend: Backend | str,
    run_dir: str | os.PathLike | None,
    progress: Optional[ProgressFn],
    stop: Optional[threading.Event],
    *,
    model,
    gate: StepGate,
) -> TrainRun:
    backend = check_backend(cfg, backend)
    rank, world_size = _dist_info()
    if world_size > 1 and backend is Backend.COMPILE:
        raise TrainConfigError("the compile backend is not supported under DistributedDataParallel here; use eager or ortmodule")
    out = _run_folder(run_dir, backend, rank)
    gate.next("setup")  # setup_s counts from the run's turn, not from the wait for it
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = _load_average()
    t_start = time.perf_counter()

    import torch

    from ..data.load import class_names

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dd = load_train_data(cfg.data)
    classes = class_names(dd)
    total = total_steps_for(len(dd["train"]), cfg, world_size)

    grad_note = check_embedding_gradient().note if backend is Backend.COMPILE else ""  # before Dynamo's counters are read
    memory = PeakMemory(cfg.device)
    done = _Outcome()
    with memory:
        loaded = model if model is not None else load_model_for(cfg, classes)
        net = loaded.model
        n_params = sum(p.numel() for p in net.parameters())
        graph_tmp = _graph_scratch(out, backend, cfg, rank)
        dynamo_before = dynamo_counters() if backend is Backend.COMPILE else None
        try:
            trainer = Trainer(cfg, backend, loaded, dd["train"], total, graph_tmp / "train" if graph_tmp is not None else None,
                              rank=rank, world_size=world_size)
            done.setup_s = time.perf_counter() - t_start
            if progress is not None and rank == 0:
                progress(Progress(backend, 0, total, float("nan"), done.setup_s, float("nan"), 0.0, phase="startup"))
            _run_steps(trainer, done, dd, loaded.tokenizer, total, rank, t_start, progress, stop, gate, memory)
        except Exception as exc:  # recorded with its cause and fix, saved, and returned as a failed run
            done.failed(exc, explain_failure(exc, backend, cfg))
            if world_size > 1:
                raise  # a failing rank must bring the whole job down, not hang the other ranks

    compile_stats = compile_stats_since(dynamo_before, [grad_note] if grad_note else []) if dynamo_before is not None else None
    if compile_stats is not None:
        done.check_compiled(compile_stats)
    graphs, checkpoint = _keep_outputs(out, graph_tmp, done, net, loaded.tokenizer, cfg) if rank == 0 else (None, None)
    run = TrainRun(
        backend=backend, status=done.status, reason=done.reason, executed_in_onnxruntime=done.executed_in_ort,
        steps=done.steps, evals=done.evals, peak_memory_mib=round(memory.peak_mib, 1),
        startup_s=done.startup_s, total_s=time.perf_counter() - t_start, checkpoint_dir=checkpoint, graphs=graphs,
        config=cfg, total_steps=total, setup_s=done.setup_s, memory_baseline_mib=round(memory.baseline_mib, 1),
        memory_source=memory.source, error=done.error, world_size=world_size, model_parameters=n_params,
        started_at=started_at, compile_stats=compile_stats,
        environment={**_environment(cfg), "load_avg_start": load_start, "load_avg_end": _load_average()},
    )
    if rank == 0 and out is not None:
        runs.save_result(run, out / TRAIN_FILE)
    return run


def _run_folder(run_dir: str | os.PathLike | None, backend: Backend, rank: int) -> Optional[Path]:
    """``run_dir/<backend>`` (a new run folder when ``run_dir`` is None), made on rank 0; None on other ranks without one."""
    if rank != 0:
        return Path(run_dir) / backend.value if run_dir is not None else None
    out = Path(run_dir if run_dir is not None else runs.new_run_dir(f"train-{backend.value}")) / backend.value
    out.mkdir(parents=True, exist_ok=True)
    return out


def load_model_for(cfg: TrainConfig, classes):
    """``cfg.model`` with a new head for ``classes``."""
    from ..core.quiet import new_classifier_head_expected
    from ..models.load import load_for_data

    with new_classifier_head_expected():  # the head is new on purpose: it is trained next
        return load_for_data(cfg.model, classes, attn_implementation=cfg.attn_implementation, dropout=cfg.dropout, seed=cfg.seed)


def _graph_scratch(out: Optional[Path], backend: Backend, cfg: TrainConfig, rank: int) -> Optional[Path]:
    """An empty scratch folder for ORTModule's graphs when they are kept (``save_graphs``, rank 0), else None."""
    keep_graphs = out is not None and backend is Backend.ORTMODULE and cfg.save_graphs and rank == 0
    graph_tmp = out / f".graphs.{os.getpid()}.tmp" if keep_graphs else None
    if graph_tmp is not None:
        shutil.rmtree(graph_tmp, ignore_errors=True)
    return graph_tmp


def _run_steps(trainer: Trainer, done: _Outcome, dd, tokenizer, total: int, rank: int, t_start: float,
               progress: Optional[ProgressFn], stop: Optional[threading.Event], gate: StepGate, memory: PeakMemory) -> None:
    """Step up to ``total`` steps, each in its turn of ``gate``, evaluating every ``eval_every`` and after the last."""
    cfg, backend, net, device = trainer.cfg, trainer.backend, trainer.net, trainer.device
    for step in range(1, total + 1):
        gate.next(f"step {step}")
        if _should_stop(stop, trainer.world_size):
            done.status = RunStatus.STOPPED
            done.reason = f"stopped on request after {step - 1} of {total} steps; the checkpoint holds the weights at that point"
            break
        rec = trainer.step()
        if step == 1:
            done.startup_s = rec.step_s
            # from ORTModule's own session: its execution graph exists and it did not fall back
            done.executed_in_ort = trainer.ort_module is not None and ortmodule_session_nodes(trainer.ort_module) > 0
        done.steps.append(rec)
        memory.sample()

        val = None
        if cfg.eval_every and step % cfg.eval_every == 0 and step < total and rank == 0:
            val = _run_eval(net, dd, tokenizer, cfg, device, step, done.evals)
        if progress is not None and rank == 0:
            progress(_progress(backend, done.steps, total, t_start, val))

    gate.next("finish")
    if done.status is RunStatus.OK and rank == 0 and dd["validation"].num_rows:
        val = _run_eval(net, dd, tokenizer, cfg, device, len(done.steps), done.evals)
        if progress is not None:
            progress(dataclasses.replace(_progress(backend, done.steps, total, t_start, val), phase="done"))


def _keep_outputs(out: Optional[Path], graph_tmp: Optional[Path], done: _Outcome, net, tokenizer, cfg: TrainConfig):
    """(graphs folder, checkpoint folder) of a run with steps taken; the graph scratch folder goes either way."""
    if out is None:
        return None, None
    kept = done.status in (RunStatus.OK, RunStatus.STOPPED)
    graphs = finalise_graphs(graph_tmp, out / "graphs") if graph_tmp is not None and graph_tmp.exists() and kept else None
    if graph_tmp is not None:
        shutil.rmtree(graph_tmp, ignore_errors=True)
    return graphs, (str(save_checkpoint(net, tokenizer, out / "checkpoint", cfg)) if kept and done.steps else None)


@functools.lru_cache(maxsize=4)
def _load_builtin(cfg: DataConfig):
    from ..data.load import load_data

    return load_data(cfg)


def load_train_data(cfg: DataConfig):
    """The run's data; the built-in reviews never change, so they are cached per DataConfig (user files are not)."""
    from ..data.load import BUILTIN, load_data

    return _load_builtin(cfg) if cfg.source == BUILTIN else load_data(cfg)


def _should_stop(stop: Optional[threading.Event], world_size: int) -> bool:
    flag = bool(stop is not None and stop.is_set())
    if world_size > 1:  # every rank must agree, or the others would wait forever in all-reduce
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        flag = bool(t.item())
    return flag


def _run_eval(net, dd, tokenizer, cfg, device, step, evals) -> EvalRecord:
    t0 = time.perf_counter()
    loss, acc = evaluate(net, dd["validation"], tokenizer, cfg, device)
    rec = EvalRecord(step, loss, acc, dd["validation"].num_rows, time.perf_counter() - t0)
    evals.append(rec)
    return rec


def _progress(backend, steps: list[StepRecord], total: int, t_start: float, val: Optional[EvalRecord]) -> Progress:
    last = steps[-1]
    recent = [s.step_s for s in steps[1:][-20:]] or [last.step_s]
    per_step = statistics.median(recent)
    return Progress(
        backend=backend, step=last.step, total_steps=total, loss=last.loss,
        elapsed_s=time.perf_counter() - t_start, eta_s=per_step * (total - last.step),
        samples_per_s=last.examples / per_step,
        val_loss=val.val_loss if val else None, val_accuracy=val.val_accuracy if val else None,
        phase="eval" if val else "train",
    )


# ---- evaluation, precision, and the machine a run ran on ------------------------------------
def evaluate(model, dataset, tokenizer, cfg: TrainConfig, device) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` (plain PyTorch, eval mode, no dropout) on ``dataset``."""
    import torch

    from ..data.batches import iter_encoded, model_inputs

    was_training = model.training
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    try:
        with torch.no_grad(), _autocast(cfg, device):
            for enc, labels, _ in iter_encoded(dataset, tokenizer, cfg.eval_batch_size, cfg.max_length):
                enc = {k: v.to(device) for k, v in model_inputs(model, enc).items()}
                labels = labels.to(device)
                logits = model(**enc).logits.float()
                total_loss += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
                correct += int((logits.argmax(-1) == labels).sum())
                n += len(labels)
    finally:
        model.train(was_training)
    return total_loss / max(n, 1), correct / max(n, 1)


def _autocast(cfg: TrainConfig, device):
    import torch

    if cfg.precision is Precision.FP32:
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if cfg.precision is Precision.BF16 else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def _sync(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def _load_average() -> str:
    """The 1-minute load average (runnable processes), as text: a shared machine's load is part of every timing."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:  # not available on this platform
        return ""


def _environment(cfg: TrainConfig) -> dict[str, str]:
    import torch

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "cpu_count": str(os.cpu_count()),
        "processor": platform.processor() or platform.machine(),
        "pid": str(os.getpid()),
        "isolated": "1" if os.environ.get(ISOLATED_ENV) == "1" else "0",
        "lockstep": os.environ.get(LOCKSTEP_ENV, ""),
    }
    for name in ("onnxruntime", "transformers"):
        with contextlib.suppress(ImportError):
            env[name] = importlib.import_module(name).__version__
    return env
