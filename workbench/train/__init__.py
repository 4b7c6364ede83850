"""The train stage: fine-tuning with one training loop and three backends, so that runs differ only by backend.

Backends: ``eager`` (plain PyTorch), ``ortmodule`` (forward and backward exported to ONNX once and run by
ONNX Runtime; the optimizer step stays in PyTorch), ``compile`` (``torch.compile``, Inductor).

Stage contract. Training has no upstream result: model and data are named in :class:`TrainConfig`, so the
calls read ``run_training(cfg, backend, run_dir)`` and ``run_comparison(cfg, CompareConfig, run_dir)``. A
setting that cannot work raises :class:`TrainConfigError` before anything runs; a failure *during* training
is a result too (status ``failed`` or ``fell_back``, cause and fix in ``reason``), saved like any other.
``<run_dir>/<backend>/`` holds ``train.json``, ``checkpoint/`` and ORTModule's ``graphs/``.

Files (one idea each):

=================  ===============================================================================
``config.py``      :class:`TrainConfig` (presets ``quick``, ``demo``, ``full``, ``bench``), the enums,
                   the tuned and ORTModule-own defaults, :func:`check_backend`
``results.py``     :class:`TrainRun`, :class:`StepRecord`, :class:`EvalRecord`,
                   :class:`CompileStats`, :class:`Progress`; :func:`load_train_run`
``schedule.py``    steps per epoch, the seeded batch order, the learning-rate schedule
``memory.py``      :class:`PeakMemory`: peak RSS (CPU) or allocator peak (CUDA) during one run
``ortmodule.py``   wrapping in ORTModule with the config's knobs; detecting a silent fallback
``backends.py``    the module each backend trains, the optimizer, Dynamo's counters,
                   :func:`explain_failure` (an exception -> cause and fix)
``inductor.py``    Inductor's embedding gradient checked against eager's once per process, and
                   left to PyTorch's kernel where torch's Inductor gets it wrong
``loop.py``        :class:`Trainer` (one optimizer step; the benchmark interleaves several),
                   :func:`run_training` ``(cfg, backend, run_dir) -> TrainRun``, :func:`evaluate`
``checkpoint.py``  the trained weights as a Hugging Face folder, written atomically
``graphs.py``      ORTModule's training graphs, summarised stage by stage
``process.py``     one run in its own process (``python -m workbench.train``), its turns on stdin
``lockstep.py``    :func:`run_lockstep`: runs in their own processes taking turns step by step;
                   :func:`run_training_isolated`, a group of one
``verdict.py``     :func:`training_verdict`: does a backend pay here, like for like, with an interval
``__main__.py``    ``python -m workbench.train``: that child process
``compare.py``     :func:`run_comparison` ``(cfg, CompareConfig, run_dir) -> Comparison``,
                   :func:`compare` (finished runs), loss parity and its tolerances
``distributed.py`` :func:`run_distributed` (the same loop under ``torchrun``) and its worker
                   (``python -m workbench.train.distributed``)
=================  ===============================================================================
"""

from .backends import explain_failure  # noqa: F401
from .compare import (  # noqa: F401
    BF16_TOLERANCE,
    DROPOUT_TOLERANCE,
    FP32_TOLERANCE,
    CompareConfig,
    Comparison,
    Ratio,
    compare,
    comparison_table,
    load_comparison,
    loss_difference,
    run_comparison,
)
from .config import (  # noqa: F401
    DEFAULT_BACKENDS,
    ORTMODULE_OWN_DEFAULTS,
    TUNED_DEFAULTS,
    Backend,
    FallbackPolicy,
    NotLikeForLike,
    Optimizer,
    Precision,
    Schedule,
    TrainConfig,
    TrainConfigError,
    require_like_for_like,
    settings_text,
    shared_differences,
)
from .lockstep import LockstepJob, run_lockstep, run_training_isolated  # noqa: F401
from .loop import Trainer, evaluate, load_train_data, run_training  # noqa: F401
from .ortmodule import allow_streams_without_fd, wrap_ortmodule  # noqa: F401
from .results import (  # noqa: F401
    STEP_WARMUP,
    EvalRecord,
    Progress,
    RunStatus,
    StepRecord,
    TrainRun,
    load_train_run,
    run_text,
)
from .schedule import iter_micro_batches, lr_factor  # noqa: F401
from .verdict import load_check, load_verdicts, save_verdicts, training_verdict, verdict_lines, verdicts_for  # noqa: F401
