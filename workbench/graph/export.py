"""Export a sequence classifier to ONNX and prove the graph computes what the model computes.

The real examples it was validated on are saved with PyTorch's logits for them, so later stages validate
against *the same PyTorch reference* without reloading the model. Load models with
``attn_implementation="eager"`` (the default of :func:`workbench.models.load.load_model`): an SDPA export
works, but the transformer optimizer does not recognise its pattern and fuses no Attention.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from .. import runs
from .facts import file_size_mib, graph_inputs, load_graph, op_histogram
from .config import ExportConfig
from .trace import OPSET_RANGE, ExportError, export_onnx, resolve_exporter
from .validate import Validation, read_examples, select_examples, validate_onnx, write_examples

from ..runs.layout import EXPORT_DIR, EXPORT_FILE, EXPORT_GRAPH as ONNX_FILE  # noqa: E402, F401  (the run layout names every file)
TOKENIZER_DIR = "tokenizer"
EXAMPLES_FILE = "validation_examples.jsonl"
REFERENCE_FILE = "reference_logits.npy"


@dataclass(frozen=True)
class ModelInfo:
    """What later stages need to know about the architecture (optimizer hints, timing vocab)."""

    model_type: str
    num_layers: int
    num_heads: int
    hidden_size: int
    vocab_size: int
    num_parameters: int


@dataclass(frozen=True)
class ExportResult:
    onnx_path: Path
    model_source: str
    model_name: str
    opset: int
    input_names: list[str]
    output_names: list[str]
    validation: Validation
    size_mib: float
    node_count: int
    op_histogram: dict[str, int]
    attn_implementation: str
    class_names: list[str]
    max_length: int
    model_info: ModelInfo
    tokenizer_dir: Path
    examples_path: Path
    reference_logits_path: Path
    export_seconds: float
    config: ExportConfig = field(default_factory=ExportConfig)
    trained_in: str = ""  # where the weights were trained when not by the workbench's PyTorch (an on-device run, a browser)
    exporter: str = ""  # "torchscript" or "dynamo": which of torch's exporters wrote the graph ("" in older results)

    @property
    def out_dir(self) -> Path:
        return Path(self.onnx_path).parent

    def load_tokenizer(self):
        from ..models.compat import load_tokenizer as _load_tokenizer

        return _load_tokenizer(self.tokenizer_dir)

    def load_examples(self):
        """The validation examples as a ``datasets.Dataset`` (same order as the reference logits)."""
        return read_examples(self.examples_path)

    def reference_logits(self) -> np.ndarray:
        return np.load(self.reference_logits_path)


# ---- the export ----------------------------------------------------------------------------------
def data_classes(data) -> Optional[list[str]]:
    """Class names carried by the data's ``label`` feature (a ClassLabel), if any."""
    import datasets

    ds = data["train"] if isinstance(data, datasets.DatasetDict) and "train" in data else data
    feature = getattr(ds, "features", {}).get("label") if hasattr(ds, "features") else None
    return list(feature.names) if isinstance(feature, datasets.ClassLabel) else None


def _resolve_model(model, cfg: ExportConfig, data):
    from ..models.load import BUILTIN_MODELS, LoadedModel, load_for_data, load_model, resolve_model_path

    if isinstance(model, LoadedModel):
        return model
    name = str(model)  # run_export checked the type
    attn = cfg.attn_implementation.value
    if name in BUILTIN_MODELS:
        classes = data_classes(data)
        if classes:
            return load_for_data(name, classes, attn_implementation=attn)
        return load_model(name, attn_implementation=attn)
    folder = resolve_model_path(name)
    config = json.loads((folder / "config.json").read_text())
    id2label = {int(k): v for k, v in (config.get("id2label") or {}).items()}
    if len(id2label) >= 2:
        return load_model(name, num_labels=len(id2label), id2label=id2label, attn_implementation=attn)
    return load_model(name, attn_implementation=attn)


def save_tokenizer(tokenizer, folder: Path) -> Path:
    with runs.atomic_dir(folder) as tmp:
        tokenizer.save_pretrained(str(tmp))
    return folder


def model_info(loaded) -> ModelInfo:
    c = loaded.model.config
    return ModelInfo(
        model_type=str(getattr(c, "model_type", "")),
        num_layers=int(getattr(c, "num_hidden_layers", getattr(c, "n_layers", 0)) or 0),
        num_heads=int(getattr(c, "num_attention_heads", getattr(c, "n_heads", 0)) or 0),
        hidden_size=int(getattr(c, "hidden_size", getattr(c, "dim", 0)) or 0),
        vocab_size=int(getattr(c, "vocab_size", 0) or 0),
        num_parameters=int(loaded.num_parameters),
    )


def run_export(model: Union[str, Any], cfg: Optional[ExportConfig] = None, out_dir: str | os.PathLike | None = None,
               *, data=None) -> ExportResult:
    """Export ``model`` to ``out_dir/model.onnx``, validate it against PyTorch and save ``export.json``.
    A failed validation does not raise: ``result.validation.passed`` is False and its message says why."""
    import onnx

    from ..data.load import DataConfig, load_data
    from ..runtime.device import require_device
    from ..models.load import BUILTIN_MODELS, LoadedModel, check_model_type, resolve_model_path
    from ..runtime.ortinfer import torch_predict_dataset

    cfg = cfg or ExportConfig()
    require_device(cfg.device)  # CUDA asked for and absent: say so before exporting anything
    if not isinstance(model, (str, os.PathLike, LoadedModel)):
        raise TypeError(
            f"model must be 'minilm', 'tiny', a checkpoint folder or a workbench.models.load.LoadedModel, "
            f"got {type(model).__name__}"
        )
    if isinstance(model, (str, os.PathLike)) and str(model) not in BUILTIN_MODELS:
        check_model_type(resolve_model_path(str(model)))  # a wrong folder or type fails here, before any data is loaded
    out = Path(out_dir) if out_dir is not None else runs.default_out(EXPORT_DIR)
    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = load_data(DataConfig.quick())
    loaded = _resolve_model(model, cfg, data)
    examples = select_examples(data, cfg)
    id2label = getattr(loaded.model.config, "id2label", None) or {}
    class_names = [str(id2label[i]) for i in sorted(id2label)] or [str(i) for i in range(loaded.num_labels)]

    t0 = time.perf_counter()
    onnx_path = out / ONNX_FILE
    exporter = resolve_exporter(cfg.exporter)
    outputs = export_onnx(loaded, onnx_path, cfg, examples["text"], exporter)
    export_seconds = time.perf_counter() - t0
    try:
        onnx.checker.check_model(str(onnx_path))
    except Exception as exc:
        raise ExportError(f"the exported graph at {onnx_path} is not valid ONNX: {exc}",
                          options=[f"try another opset (allowed {OPSET_RANGE[0]}..{OPSET_RANGE[1]})"]) from exc

    tok_dir = save_tokenizer(loaded.tokenizer, out / TOKENIZER_DIR)
    reference = torch_predict_dataset(loaded.model, loaded.tokenizer, examples, cfg.max_length, cfg.validation_batch_size)
    ex_path = write_examples(out / EXAMPLES_FILE, examples)
    ref_path = runs.atomic_write_npy(out / REFERENCE_FILE, reference)
    validation = validate_onnx(onnx_path, reference, loaded.tokenizer, examples, cfg, what="the exported graph")

    proto = load_graph(onnx_path)  # parsed once: inputs, node count and operator counts all come from it
    result = ExportResult(
        onnx_path=onnx_path.resolve(),
        model_source=str(loaded.source),
        model_name=str(loaded.name),
        opset=cfg.opset,
        input_names=graph_inputs(proto),
        output_names=outputs,
        validation=validation,
        size_mib=file_size_mib(onnx_path),
        node_count=len(proto.graph.node),
        op_histogram=op_histogram(proto),
        attn_implementation=str(loaded.attn_implementation),
        class_names=class_names,
        max_length=cfg.max_length,
        model_info=model_info(loaded),
        tokenizer_dir=tok_dir.resolve(),
        examples_path=ex_path.resolve(),
        reference_logits_path=ref_path.resolve(),
        export_seconds=export_seconds,
        config=cfg,
        exporter=exporter,
    )
    runs.save_result(result, out / EXPORT_FILE)
    return result


def load_export(path: str | os.PathLike) -> ExportResult:
    """Read an ``export.json`` (or the folder holding it)."""
    return runs.load_result(ExportResult, path, EXPORT_FILE)
