"""ondevice stage."""

from .core import (  # noqa: F401
    FP32_TOLERANCE,
    GradientGraphError,
    MAX_IR_VERSION,
    OnDeviceConfig,
    OnDeviceError,
    OnDeviceResult,
    Trainable,
    build_artifacts,
    check_model,
    load_ondevice,
    load_ondevice_model,
    pytorch_curve,
    run_ondevice,
    table,
    trainable_names,
)
