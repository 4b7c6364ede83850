"""On-device training: export a fine-tuned classifier as ONNX Runtime training artifacts, keep
training it with ``onnxruntime.training.api`` (no PyTorch in the loop), and prove it.

ONNX Runtime's training story has two halves. ORTModule (:mod:`workbench.train`) accelerates a
PyTorch training loop; *on-device training* writes four artifacts (a training graph with the loss
and the gradient graph, an eval graph, an optimizer graph and a checkpoint of the parameters) that
``onnxruntime.training.api`` runs on its own, e.g. to personalise a model on a phone, in a browser
or on an edge box. This package does the second half and holds it to the same standards:

Entry points:

``run_ondevice(model, cfg, out_dir, *, data=None, progress=None, stop=None) -> OnDeviceResult``
    ``model``: ``"tiny"``, ``"minilm"`` or a fine-tuned sequence-classification folder; ``cfg`` an
    :class:`OnDeviceConfig` (``OnDeviceConfig.quick()``, ``OnDeviceConfig.default()``).
    The whole stage: artifacts, ``cfg.steps`` steps with ``CheckpointState``/``Module``/
    ``Optimizer`` and the same steps in PyTorch eager (same batches, dropout off, same trainable
    set, same learning rate and AdamW update), both loss curves and their agreement, step time
    and peak memory of both, and the trained model exported back to an inference graph
    (``Module.export_model_for_inferencing``) saved as an ``export.json`` that
    :func:`workbench.graph.run_fusion`, :func:`workbench.quant.run_quantization` and the slice
    evaluation accept like any other export.
``build_artifacts(loaded, cfg, folder) -> Artifacts``
    export the model for training and call ``onnxruntime.training.artifacts.generate_artifacts``
    with the chosen trainable set (:class:`Trainable`: the classifier head, the last N encoder
    layers plus the head, or everything), loss ``CrossEntropyLoss`` and optimizer ``AdamW``.
``load_ondevice(path) -> OnDeviceResult``, ``table(result) -> str``
    read a saved ``ondevice.json`` back; the result as a few lines of text (what the CLI prints).
``pytorch_curve(model, cfg, data, lr=None, torch_adamw=False)``
    PyTorch eager's losses alone (what the tolerance is measured against).
``web.write_page``, ``web.serve(run_dir)``, ``browser.import_parameters(run, file) -> BrowserImport``
    the run's web page (the artifacts trained by onnxruntime-web 1.19.2 in a browser, the learning
    rate baked into its optimizer graph), served on 127.0.0.1, and the page's downloaded parameters
    folded back into the checkpoint and exported (``workbench ondevice serve`` / ``import``).

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

Two pitfalls of onnxruntime-training 1.19.2 (found on the tiny model and MiniLM; the tests check both):

* The gradient builder fails on an opset-17 export: opset 17 writes LayerNorm as one
  ``LayerNormalization`` node with one output, and ORT's LayerNormalization gradient reads the
  saved mean and inverse standard deviation (outputs 1 and 2): ``gradient_builder_base.h:123 ...
  i < node_->OutputDefs().size() was false``. At **opset 14** LayerNorm is exported as primitive
  ops and the builder succeeds, so 14 is the default; :class:`GradientGraphError` names the
  operator and the fix when it fails.
* The graph must be exported with ``TrainingMode.TRAINING`` and no constant folding (parameters
  stay initializers under their PyTorch names). With ``TrainingMode.EVAL`` the builder failed here
  with ``Duplicate definition of name (...LayerNorm.weight_grad)``. Dropout is switched off in the
  model's config (probability 0), so the training-mode graph computes what eval mode computes.
* ``generate_artifacts`` writes ``optimizer_model.onnx`` with IR version 14 (onnx 1.23's
  default); ONNX Runtime 1.19.2 refuses it ("max supported IR version: 10"). The optimizer graph
  uses nothing newer than IR 10 (one contrib node, opset imports of 2024), so every artifact with
  a newer IR version is rewritten with :data:`MAX_IR_VERSION` and reported in ``Artifacts.notes``.

The PyTorch reference uses the AdamW update ONNX Runtime runs, not ``torch.optim.AdamW``: ORT's
``AdamWOptimizer`` node (``adam_mode=1``, the Hugging Face formula) adds epsilon to ``sqrt(v)``
before the bias correction and decays the weights after the update; torch adds epsilon after the
correction and decays before. Measured here on the tiny model (layer 1 + head, lr 1e-3, eps 1e-8,
20 steps): with ``torch.optim.AdamW`` the curves drift apart by up to 2.1e-4; with the same formula
(:func:`~workbench.ondevice.reference.hf_adamw`) by at most 6e-8, one float32 ulp at a loss of 0.69. See :data:`FP32_TOLERANCE`
for the tolerance and how it was measured.
"""

from .artifacts import build_artifacts, explain_gradient_failure, export_for_training  # noqa: F401
from .config import (  # noqa: F401
    ARTIFACTS_DIR,
    EXPORT_TOLERANCE,
    FP32_TOLERANCE,
    INFERENCE_DIR,
    MAX_IR_VERSION,
    RESULT_FILE,
    TRAINED_CHECKPOINT,
    TRAINED_MODEL_DIR,
    GradientGraphError,
    OnDeviceConfig,
    OnDeviceError,
    Trainable,
)
from .data import load_ondevice_model  # noqa: F401
from .loops import pytorch_curve  # noqa: F401
from .memory import measure_isolated  # noqa: F401
from .reference import hf_adamw  # noqa: F401
from .result import Artifacts, ArtifactFile, OnDeviceResult, SideCost, load_ondevice, table  # noqa: F401
from .stage import check_model, run_ondevice  # noqa: F401
from .trainable import POSITION_EMBEDDINGS_NOTE, trainable_names  # noqa: F401
