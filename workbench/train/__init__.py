"""The train stage: fine-tuning with one training loop and three backends, so that runs differ only by backend.

* ``eager``     - plain PyTorch.
* ``ortmodule`` - the model wrapped in ``onnxruntime.training.ortmodule.ORTModule``: the forward
  and backward pass are exported to ONNX once, optimized by ONNX Runtime, and executed by it. The
  optimizer step stays in PyTorch (ORTModule trains the module's own parameters).
* ``compile``   - ``torch.compile`` (Inductor): compiles the forward and backward graph on the
  first steps, then runs generated kernels.

Entry points::

    from workbench.train import CompareConfig, TrainConfig, run_training, run_comparison
    run = run_training(TrainConfig.quick(), "ortmodule", run_dir="runs/mine")   # -> TrainRun
    run.status, run.executed_in_onnxruntime, run.median_step_s, run.final_accuracy
    c = run_comparison(TrainConfig.quick(), CompareConfig(backends=("eager", "ortmodule")), "runs/cmp")  # -> Comparison

* :class:`TrainConfig` (presets ``quick``, ``demo``, ``full``, ``bench``) - everything that
  defines a run except the backend; :class:`TrainConfigError` for a setting that cannot work.
* :func:`run_training` ``(cfg, backend, run_dir) -> TrainRun`` - one backend, in this process.
* :func:`run_training_isolated` - the same in a fresh process (``python -m workbench.train``).
* :func:`run_comparison` ``(cfg, CompareConfig, run_dir) -> Comparison`` - several backends, compared;
  :func:`compare` compares finished runs, :func:`comparison_table` prints them.
* :func:`run_distributed` ``(cfg, backend, nproc)`` - the same loop under ``torchrun`` (DDP).
* :func:`load_train_run`, :func:`list_train_runs`, :func:`load_comparison` - read results back.
* :class:`Trainer` - one backend's state, stepped by hand (the benchmark interleaves several).

Stage contract. Every stage reads ``run_x(input, XConfig, out) -> XResult``. Training has no
upstream result: its input (the model and the data) is named inside :class:`TrainConfig`
(``model``, ``data``), so the calls read ``run_training(cfg, backend, run_dir)`` and
``run_comparison(cfg, CompareConfig(backends, tolerance, isolate), run_dir)``, the backends being what is compared. Runtime-only
objects stay keyword arguments: ``progress`` (called with a :class:`Progress` after every step and
evaluation), ``stop`` (a ``threading.Event``), ``model=`` (a preloaded model, tests). Settings
that cannot work raise :class:`TrainConfigError` before anything runs; a failure *during*
training is a result too (status ``failed`` or ``fell_back``, with the cause and fix in
``reason``), saved like any other.

Layout: ``run_training`` writes ``<run_dir>/<backend>/``: ``train.json`` (the :class:`TrainRun`),
a Hugging Face checkpoint folder ``checkpoint/`` (``save_pretrained``: config, safetensors
weights, tokenizer) that ``workbench.models.load.load_model(folder)`` loads back, and for ORTModule the
training graphs it built in ``graphs/``; ``run_comparison`` adds ``<run_dir>/compare.json``.
Everything is written to a temporary name and renamed into place.

Files (one idea each):

=================  ===============================================================================
``config.py``      :class:`TrainConfig`, the enums, the tuned and ORTModule-own defaults,
                   :func:`check_backend` (config x backend combinations that cannot run)
``results.py``     :class:`TrainRun`, :class:`StepRecord`, :class:`EvalRecord`,
                   :class:`CompileStats`, :class:`Progress`; loading saved runs
``schedule.py``    steps per epoch, the seeded batch order, the learning-rate schedule
``memory.py``      :class:`PeakMemory`: peak RSS (CPU) or allocator peak (CUDA) during one run
``ortmodule.py``   wrapping in ORTModule with the config's knobs; detecting a silent fallback
``backends.py``    the module each backend trains, the optimizer, Dynamo's counters,
                   :func:`explain_failure` (an exception -> cause and fix)
``inductor.py``    Inductor's embedding gradient checked against eager's once per process, and
                   left to PyTorch's kernel where torch's Inductor gets it wrong
``loop.py``        :class:`Trainer` (one optimizer step) and :func:`run_training` (the run),
                   :func:`evaluate`
``checkpoint.py``  the trained weights as a Hugging Face folder, written atomically
``graphs.py``      ORTModule's training graphs, summarised stage by stage
``process.py``     :func:`run_training_isolated`: one backend in its own process
``lockstep.py``    :func:`run_lockstep`: runs in their own processes taking turns step by step
``verdict.py``     :func:`training_verdict`: does a backend pay here, like for like, with an interval
``__main__.py``    ``python -m workbench.train``: that child process
``compare.py``     runs side by side: :class:`Comparison`, loss parity and its tolerances
``distributed.py`` :func:`run_distributed` and the ``torchrun`` worker
                   (``python -m workbench.train.distributed``)
=================  ===============================================================================
"""

from .backends import explain_failure
from .checkpoint import save_checkpoint
from .compare import (
    BF16_TOLERANCE,
    DROPOUT_TOLERANCE,
    FP32_TOLERANCE,
    BackendSummary,
    CompareConfig,
    Comparison,
    Ratio,
    compare,
    comparison_table,
    default_tolerance,
    load_comparison,
    loss_difference,
    run_comparison,
)
from .config import (
    BACKEND_ONLY_FIELDS,
    DEFAULT_BACKENDS,
    ORTMODULE_OWN_DEFAULTS,
    TUNED_DEFAULTS,
    Backend,
    FallbackPolicy,
    Optimizer,
    Precision,
    Schedule,
    TrainConfig,
    NotLikeForLike,
    TrainConfigError,
    check_backend,
    require_like_for_like,
    settings_text,
    shared_differences,
)
from .lockstep import LockstepJob, interleaved_runs, run_lockstep
from .verdict import TrainVerdict, TrainVerdicts, load_check, load_verdicts, save_verdicts, training_verdict, verdict_lines, verdicts_for
from .graphs import GraphStage, TrainGraphs, summarize_graph
from .loop import StepGate, Trainer, load_train_data, evaluate, run_training  # noqa: F401 (load_train_data: the benchmark shares its cache)
from .memory import PeakMemory
from .ortmodule import FellBackError, allow_streams_without_fd, ortmodule_fell_back, wrap_ortmodule
from .process import run_training_isolated
from .results import (
    STEP_WARMUP,
    CompileStats,
    EvalRecord,
    Progress,
    ProgressFn,
    RunStatus,
    StepRecord,
    TrainRun,
    list_train_runs,
    load_train_run,
    run_text,
)
from .schedule import iter_micro_batches, lr_factor, steps_per_epoch, total_steps_for

# distributed.py is imported on first use, not here: torchrun starts its workers with
# `python -m workbench.train.distributed`, and runpy warns ("found in sys.modules ... unpredictable
# behaviour") and runs the module twice when the package has already imported it.
_DISTRIBUTED = ("DISTRIBUTED_BACKENDS", "DistributedRun", "RankReport", "run_distributed")


def __getattr__(name: str):
    if name in _DISTRIBUTED:
        from . import distributed

        return getattr(distributed, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKEND_ONLY_FIELDS", "BF16_TOLERANCE", "DEFAULT_BACKENDS", "DROPOUT_TOLERANCE", "FP32_TOLERANCE",
    "ORTMODULE_OWN_DEFAULTS", "STEP_WARMUP", "TUNED_DEFAULTS", "Backend", "BackendSummary", "CompareConfig", "CompileStats",
    "Comparison", "EvalRecord", "FallbackPolicy", "FellBackError", "GraphStage", "Optimizer", "PeakMemory",
    "Precision", "Progress", "ProgressFn", "Ratio", "RunStatus", "Schedule", "StepRecord", "TrainConfig",
    "TrainConfigError", "TrainGraphs", "TrainRun", "Trainer", "allow_streams_without_fd", "check_backend",
    "compare", "comparison_table", "default_tolerance", "evaluate", "explain_failure", "iter_micro_batches",
    "list_train_runs", "load_comparison", "load_train_run", "loss_difference", "lr_factor", "ortmodule_fell_back",
    "run_comparison", "run_training", "run_training_isolated", "save_checkpoint", "steps_per_epoch",
    "summarize_graph", "total_steps_for", "wrap_ortmodule", *_DISTRIBUTED,
    "run_text", "NotLikeForLike", "require_like_for_like", "settings_text", "shared_differences", "LockstepJob",
    "interleaved_runs", "run_lockstep", "StepGate", "TrainVerdict", "TrainVerdicts", "load_verdicts", "save_verdicts",
    "training_verdict", "verdict_lines", "verdicts_for", "load_check",
]
