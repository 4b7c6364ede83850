"""train stage."""

from .core import (  # noqa: F401
    Backend,
    EvalRecord,
    FallbackPolicy,
    ORTMODULE_OWN_DEFAULTS,
    Optimizer,
    Precision,
    Progress,
    RunStatus,
    Schedule,
    StepRecord,
    TUNED_DEFAULTS,
    TrainConfig,
    TrainConfigError,
    TrainRun,
    Trainer,
    _load_data,
    evaluate,
    explain_failure,
    iter_micro_batches,
    list_train_runs,
    load_train_run,
    lr_factor,
    run_training,
    run_training_isolated,
    wrap_ortmodule,
)
from .compare import (  # noqa: F401
    BF16_TOLERANCE,
    Comparison,
    DROPOUT_TOLERANCE,
    FP32_TOLERANCE,
    compare,
    comparison_table,
    load_comparison,
    loss_difference,
    run_comparison,
)
from .distributed import (  # noqa: F401
    run_distributed,
)
