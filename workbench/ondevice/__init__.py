"""On-device training: export a fine-tuned classifier as ONNX Runtime training artifacts, keep
training it with ``onnxruntime.training.api`` (no PyTorch in the loop), and prove it against the
same steps in PyTorch eager.

:func:`run_ondevice` ``(model, cfg, out_dir) -> OnDeviceResult`` is the whole stage: the four
artifacts (training, eval and optimizer graphs, checkpoint) for the chosen :class:`Trainable` set,
``cfg.steps`` steps on each side (same batches, dropout off, same AdamW update), both loss curves
and their agreement, step time and peak memory of both, and the trained model exported back to an
inference graph that fusion, quantization and the slice evaluation accept like any other export.
The pitfalls of onnxruntime-training 1.19.2 it works around (opset 14 for the gradient builder,
training-mode export, IR version 10, ORT's AdamW formula) are in docs/ondevice.md.

Files:

- ``config.py``: :class:`OnDeviceConfig`, :class:`Trainable`, the errors, file names and tolerances
- ``result.py``: :class:`Artifacts`, :class:`SideCost`, :class:`OnDeviceResult`, ``load_ondevice``, ``table``
- ``reference.py``: the PyTorch reference optimizer (ONNX Runtime's AdamW update, ``hf_adamw``)
- ``trainable.py``: which parameters train (``trainable_names``)
- ``artifacts.py``: export for training, ``generate_artifacts``, IR-version fix, gradient-builder errors
- ``data.py``: the model as trained here and the batches both sides train on
- ``loops.py``: the two training loops (onnxruntime.training.api, PyTorch eager), ``pytorch_curve``
- ``memory.py``: peak memory of each side in a fresh process (``python -m workbench.ondevice``)
- ``stage.py``: ``run_ondevice``, the whole stage; ``export_trained`` (a trained module to an export)
- ``web.py``: the web page, ``bake_learning_rate``, the 127.0.0.1 page server
- ``browser.py``: ``import_parameters`` (``workbench ondevice import``), ``BrowserImport``
- ``__main__.py``: the per-side child process that ``memory.py`` starts
"""

from .artifacts import build_artifacts  # noqa: F401
from .config import FP32_TOLERANCE, MAX_IR_VERSION, GradientGraphError, OnDeviceConfig, OnDeviceError, Trainable  # noqa: F401
from .data import load_ondevice_model  # noqa: F401
from .loops import pytorch_curve  # noqa: F401
from .result import OnDeviceResult, load_ondevice, table  # noqa: F401
from .stage import check_model, run_ondevice  # noqa: F401
from .trainable import trainable_names  # noqa: F401
