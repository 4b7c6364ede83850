"""On-device training: export a fine-tuned classifier as ONNX Runtime training artifacts, keep training it
with ``onnxruntime.training.api`` (no PyTorch in the loop), and prove it against the same steps in PyTorch
eager (same batches, dropout off, same AdamW update). :func:`run_ondevice` is the whole stage; the trained
model goes back out as an inference export later stages accept. The onnxruntime-training 1.19.2 pitfalls it
works around are in docs/ondevice.md.

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
