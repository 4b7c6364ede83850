"""Export a sequence classifier to ONNX and prove the graph computes what the model computes.

``run_export(model, ExportConfig(...), out_dir) -> ExportResult`` writes into ``out_dir``:

- ``model.onnx``: the graph (TorchScript exporter, ``dynamo=False``), dynamic ``batch`` and
  ``sequence`` axes, the chosen opset;
- ``tokenizer/``: the tokenizer it was exported with (later stages tokenize with it);
- ``validation_examples.jsonl`` and ``reference_logits.npy``: the real examples the graph was
  validated on and PyTorch's logits for them, so later stages (fusion, quantization) validate
  their graphs against *the same PyTorch reference* without reloading the model;
- ``export.json``: the :class:`ExportResult`.

Validation (:func:`validate_onnx`, reused by fusion and quantization) feeds real batches from the
data through ONNX Runtime and compares logits with the reference: largest and mean absolute
difference, agreement of predicted labels, pass/fail against a tolerance the user sets.

Attention matters here: load models with ``attn_implementation="eager"`` (the default in
:func:`workbench.models.load_model`). An SDPA export works, but ONNX Runtime's transformer
optimizer does not recognise its pattern and fuses no Attention (see :mod:`workbench.graph.fusion`).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np

from .. import runs
from ..metrics import Metric

RESULT_FILE = "export.json"
ONNX_FILE = "model.onnx"
TOKENIZER_DIR = "tokenizer"
EXAMPLES_FILE = "validation_examples.jsonl"
REFERENCE_FILE = "reference_logits.npy"
# The TorchScript exporter in torch 2.6 writes opsets 7..20; LayerNormalization is a single op
# from 17 on, SDPA attention needs 14+, and ONNX Runtime 1.19 runs up to opset 21.
OPSET_RANGE = (11, 20)


class ExportError(RuntimeError):
    """Export failed. ``operator`` names the unsupported operator when there is one, and
    ``options`` lists what to try (another opset, eager attention, ...)."""

    def __init__(self, message: str, operator: Optional[str] = None, options: Sequence[str] = ()):
        self.operator = operator
        self.options = list(options)
        text = message
        if self.options:
            text += "\nOptions:\n" + "\n".join(f"  - {o}" for o in self.options)
        super().__init__(text)


class Attention(str, enum.Enum):
    """Which attention implementation the model is loaded with before export."""

    EAGER = "eager"
    SDPA = "sdpa"


@dataclass
class ExportConfig:
    """How to export and how strictly to validate.

    ``tolerance`` is the largest absolute difference of logits allowed between the graph and
    PyTorch; ``min_label_agreement`` the smallest fraction of predicted labels that must agree.
    FP32 exports differ from PyTorch by about 1e-6; fused graphs by about 1e-5; INT8 graphs by
    much more (quantization sets its own tolerance). The tolerance is absolute, so read it
    against the size of the logits (``Validation.reference_scale``): an untrained tiny model's
    logits are about 0.02, where 1e-3 is already 5%.
    ``attn_implementation`` applies when the model is given by name or folder; a ``LoadedModel``
    is exported with the attention it was loaded with.
    """

    opset: int = 17
    max_length: int = 128
    dynamic_axes: bool = True
    attn_implementation: Attention = Attention.EAGER
    validation_split: str = "validation"
    validation_examples: int = 64
    validation_batch_size: int = 16
    tolerance: float = 1e-3
    min_label_agreement: float = 1.0
    do_constant_folding: bool = True
    device: str = "cpu"  # where ONNX Runtime runs the validation: "cpu", "cuda" or "cuda:N" (export itself is on the CPU)

    def __post_init__(self) -> None:
        from ..device import normalize_device

        self.device = normalize_device(self.device)
        if isinstance(self.attn_implementation, str) and not isinstance(self.attn_implementation, Attention):
            try:
                self.attn_implementation = Attention(self.attn_implementation)
            except ValueError:
                raise ValueError(
                    f"attn_implementation must be one of {[a.value for a in Attention]}, got "
                    f"{self.attn_implementation!r}; use 'eager' (what ONNX Runtime's optimizer fuses)"
                ) from None
        lo, hi = OPSET_RANGE
        if not isinstance(self.opset, int) or not lo <= self.opset <= hi:
            raise ValueError(
                f"opset must be an integer from {lo} to {hi}, got {self.opset!r}; 17 is the default "
                "(LayerNormalization as one op); SDPA attention needs 14 or later"
            )
        if self.max_length < 8 or self.max_length > 4096:
            raise ValueError(f"max_length must be between 8 and 4096 tokens, got {self.max_length}; 128 suits short reviews")
        for name in ("validation_examples", "validation_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not (self.tolerance > 0 and np.isfinite(self.tolerance)):
            raise ValueError(f"tolerance must be a positive number (largest |logit difference|), got {self.tolerance}; try 1e-3")
        if not 0.0 <= self.min_label_agreement <= 1.0:
            raise ValueError(f"min_label_agreement must be a fraction from 0 to 1, got {self.min_label_agreement}")
        if not self.validation_split:
            raise ValueError("validation_split must name a split such as 'validation' or 'test'")

    @classmethod
    def default(cls, **kw) -> "ExportConfig":
        """Opset 17, sequences up to 128 tokens, 64 validation examples, tolerance 1e-3."""
        return cls(**kw)

    @classmethod
    def quick(cls, **kw) -> "ExportConfig":
        """Fewer and shorter validation examples: tests and workshops."""
        return cls(**{"max_length": 64, "validation_examples": 32, **kw})

    @classmethod
    def strict(cls, **kw) -> "ExportConfig":
        """Tolerance 1e-5: what an FP32 export should meet (not a fused or quantized graph)."""
        return cls(**{"tolerance": 1e-5, "validation_examples": 128, **kw})


@dataclass(frozen=True)
class Validation:
    """How closely a graph reproduces the reference logits on real examples."""

    max_abs_diff: float
    mean_abs_diff: float
    label_agreement: float
    n_examples: int
    tolerance: float
    passed: bool
    message: str
    min_label_agreement: float = 1.0
    worst_example: int = -1  # index (within the validation examples) of the largest difference
    reference_scale: float = 0.0  # largest |reference logit|: what a difference is small against
    relative_diff: float = 0.0  # max_abs_diff / reference_scale

    def metrics(self) -> list[Metric]:
        return [
            Metric("max |Δ logit|", self.max_abs_diff, "", higher_is_better=False),
            Metric("mean |Δ logit|", self.mean_abs_diff, "", higher_is_better=False),
            Metric("max |Δ logit| / max |logit|", 100.0 * self.relative_diff, "%", higher_is_better=False),
            Metric("label agreement", 100.0 * self.label_agreement, "%", higher_is_better=True),
        ]


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

    @property
    def out_dir(self) -> Path:
        return Path(self.onnx_path).parent

    def metrics(self) -> list[Metric]:
        return [Metric("size on disk", self.size_mib, "MiB", higher_is_better=False),
                Metric("export time", self.export_seconds, "s", higher_is_better=False),
                *self.validation.metrics()]

    def load_tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.tokenizer_dir), local_files_only=True)

    def load_examples(self):
        """The validation examples as a ``datasets.Dataset`` (same order as the reference logits)."""
        return read_examples(self.examples_path)

    def reference_logits(self) -> np.ndarray:
        return np.load(self.reference_logits_path)


# ---- graph facts -------------------------------------------------------------------------------
def op_histogram(model_or_path) -> dict[str, int]:
    """Operator counts of a graph, most frequent first (``domain:`` prefix for non-ONNX domains
    is left out: contrib ops like ``Attention`` are named as ONNX Runtime names them)."""
    model = _as_model(model_or_path)
    counts = Counter(n.op_type for n in model.graph.node)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def file_size_mib(path: str | os.PathLike) -> float:
    """Size on disk of a graph, external weight file (``<name>.data``) included."""
    path = Path(path)
    size = path.stat().st_size
    side = path.with_name(path.name + ".data")
    if side.exists():
        size += side.stat().st_size
    return size / 2**20


def _as_model(model_or_path):
    import onnx

    if isinstance(model_or_path, (str, os.PathLike)):
        return onnx.load(str(model_or_path), load_external_data=False)
    return model_or_path


# ---- validation --------------------------------------------------------------------------------
def compare_logits(candidate: np.ndarray, reference: np.ndarray, tolerance: float,
                   min_label_agreement: float = 1.0, what: str = "the graph") -> Validation:
    """Compare two logit arrays of the same shape; the pure-NumPy core of :func:`validate_onnx`."""
    candidate = np.asarray(candidate, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if candidate.shape != reference.shape:
        raise ValueError(
            f"logits of {what} have shape {candidate.shape} but the reference has {reference.shape}; "
            "both must come from the same examples in the same order with the same classes"
        )
    n = int(reference.shape[0])
    if n == 0:
        raise ValueError("no examples to validate on: give a data split with at least one example")
    if not np.all(np.isfinite(candidate)):
        bad = int(np.sum(~np.isfinite(candidate).all(axis=-1)))
        return Validation(float("inf"), float("inf"), 0.0, n, tolerance, False,
                          f"FAILED: {what} produced NaN or infinite logits for {bad}/{n} examples; "
                          "the graph is broken (re-export it, or check the last transformation applied to it)",
                          min_label_agreement, -1, float(np.abs(reference).max()), float("inf"))
    diff = np.abs(candidate - reference)
    per_example = diff.max(axis=-1)
    worst = int(per_example.argmax())
    max_diff, mean_diff = float(diff.max()), float(diff.mean())
    agree = float(np.mean(candidate.argmax(-1) == reference.argmax(-1)))
    n_agree = int(round(agree * n))
    scale = float(np.abs(reference).max())
    relative = max_diff / scale if scale > 0 else float("inf")
    ok_diff = max_diff <= tolerance
    ok_agree = agree >= min_label_agreement
    passed = ok_diff and ok_agree
    detail = (f"largest |Δ logit| {max_diff:.3g} {'≤' if ok_diff else '>'} tolerance {tolerance:.3g}"
              f"{'' if ok_diff else f' (example {worst})'}, {relative:.2%} of the largest logit {scale:.3g}; "
              f"labels agree on {n_agree}/{n} examples")
    if passed:
        message = f"passed: {detail}"
    else:
        why = []
        if not ok_diff:
            why.append("the logits moved more than the tolerance")
        if not ok_agree:
            why.append(f"label agreement {agree:.1%} is below the required {min_label_agreement:.1%}")
        message = (f"FAILED: {detail}. {what[0].upper() + what[1:]} does not reproduce the reference: "
                   f"{' and '.join(why)}. If the graph was deliberately approximated (fused kernels, INT8), "
                   "raise the tolerance knowingly; otherwise re-export and check each transformation")
    return Validation(max_diff, mean_diff, agree, n, float(tolerance), passed, message, float(min_label_agreement),
                      worst, scale, relative)


def select_examples(data, cfg: ExportConfig):
    """The first ``cfg.validation_examples`` examples of ``cfg.validation_split`` (a
    ``DatasetDict``) or of the ``Dataset`` given. Real data, a fixed order."""
    import datasets

    ds = data
    if isinstance(data, (datasets.DatasetDict, dict)):
        if cfg.validation_split not in data:
            raise ValueError(
                f"validation split {cfg.validation_split!r} not in the data (splits: {list(data.keys())}); "
                "set ExportConfig(validation_split=...)"
            )
        ds = data[cfg.validation_split]
    if "text" not in ds.column_names:
        raise ValueError(f"the validation data needs a 'text' column; it has {ds.column_names}")
    if len(ds) == 0:
        raise ValueError("the validation split is empty: choose a split with examples")
    return ds.select(range(min(cfg.validation_examples, len(ds))))


def validate_onnx(
    onnx_path,
    reference,
    tokenizer,
    dataset,
    cfg: Optional[ExportConfig] = None,
    graph_optimization: str = "all",
    threads: Optional[int] = None,
    what: str = "the graph",
    device: Optional[str] = None,
) -> Validation:
    """Validate a graph (path or session) on real examples against a reference.

    ``reference`` is a :class:`workbench.models.LoadedModel` (PyTorch logits are computed on the
    same batches) or an array of reference logits for the examples. ``dataset`` is a
    ``DatasetDict`` (``cfg.validation_split`` is used) or a ``Dataset``; the first
    ``cfg.validation_examples`` examples are fed. ``tokenizer`` may be None when the reference is
    a LoadedModel (its tokenizer is used).
    """
    from ..ortinfer import as_session, predict_dataset, torch_predict_dataset

    cfg = cfg or ExportConfig()
    examples = select_examples(dataset, cfg)
    if tokenizer is None:
        tokenizer = getattr(reference, "tokenizer", None)
        if tokenizer is None:
            raise ValueError("give the tokenizer the graph was exported with (reference logits carry none)")
    session = as_session(onnx_path, threads=threads, graph_optimization=graph_optimization,
                         device=device if device is not None else cfg.device)
    got = predict_dataset(session, tokenizer, examples, cfg.max_length, cfg.validation_batch_size)
    if hasattr(reference, "model") and hasattr(reference, "tokenizer"):
        ref = torch_predict_dataset(reference.model, tokenizer, examples, cfg.max_length, cfg.validation_batch_size)
    else:
        ref = np.asarray(reference)
        if ref.ndim != 2 or ref.shape[0] < len(examples):
            raise ValueError(
                f"reference logits have shape {ref.shape}, expected ({len(examples)}, n_classes) for the "
                f"{len(examples)} validation examples; compute them on the same examples in the same order"
            )
        ref = ref[: len(examples)]
    return compare_logits(got, ref, cfg.tolerance, cfg.min_label_agreement, what)


def write_examples(path: Path, examples) -> Path:
    lines = [json.dumps({"text": t, "label": int(l)}) for t, l in zip(examples["text"], examples["label"])]
    return runs.atomic_write_text(path, "\n".join(lines) + "\n")


def read_examples(path: str | os.PathLike):
    import datasets

    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"no examples in {path}")
    return datasets.Dataset.from_list(rows)




# ---- export ------------------------------------------------------------------------------------
def _data_classes(data) -> Optional[list[str]]:
    """Class names carried by the data's ``label`` feature (a ClassLabel), if any."""
    import datasets

    ds = data["train"] if isinstance(data, datasets.DatasetDict) and "train" in data else data
    feature = getattr(ds, "features", {}).get("label") if hasattr(ds, "features") else None
    return list(feature.names) if isinstance(feature, datasets.ClassLabel) else None


def _resolve_model(model, cfg: ExportConfig, data):
    from ..models import BUILTIN_MODELS, LoadedModel, load_for_data, load_model, resolve_model_path

    if isinstance(model, LoadedModel):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(
            f"model must be 'minilm', 'tiny', a checkpoint folder or a workbench.models.LoadedModel, "
            f"got {type(model).__name__}"
        )
    name = str(model)
    attn = cfg.attn_implementation.value
    if name in BUILTIN_MODELS:
        classes = _data_classes(data)
        if classes:
            return load_for_data(name, classes, attn_implementation=attn)
        return load_model(name, attn_implementation=attn)
    folder = resolve_model_path(name)
    config = json.loads((folder / "config.json").read_text())
    id2label = {int(k): v for k, v in (config.get("id2label") or {}).items()}
    if len(id2label) >= 2:
        return load_model(name, num_labels=len(id2label), id2label=id2label, attn_implementation=attn)
    return load_model(name, attn_implementation=attn)


def _explain_failure(exc: BaseException, cfg: ExportConfig, attn: str) -> ExportError:
    text = str(exc)
    op = re.search(r"operator '([^']+)'", text)
    operator = op.group(1) if op else None
    added = re.search(r"added in version (\d+)", text)
    options = []
    if added:
        options.append(f"export with opset {added.group(1)} or later: ExportConfig(opset={added.group(1)}) "
                       f"(or `workbench export --opset {added.group(1)}`)")
    elif operator:
        other = [o for o in (17, 18, 14) if o != cfg.opset][0]
        options.append(f"try another opset, e.g. ExportConfig(opset={other}) (allowed {OPSET_RANGE[0]}..{OPSET_RANGE[1]})")
    if attn != "eager" or (operator and "attention" in operator):
        options.append("load the model with eager attention: ExportConfig(attn_implementation='eager') or "
                       "load_model(..., attn_implementation='eager') (it is also what ONNX Runtime fuses)")
    if not options:
        options.append(f"try another opset (allowed {OPSET_RANGE[0]}..{OPSET_RANGE[1]}) or eager attention")
    options.append("if the model has custom layers, export a standard Hugging Face architecture "
                   "(BERT, RoBERTa, DistilBERT, ...) or register a symbolic for the operator")
    where = f"operator {operator!r} cannot be exported" if operator else "the export failed"
    return ExportError(
        f"ONNX export failed at opset {cfg.opset} with {attn} attention: {where}. "
        f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}",
        operator=operator, options=options,
    )


def _is_onnxruntime_symbolic(fn) -> bool:
    module = getattr(fn, "__module__", "") or ""
    return module == "onnxruntime" or module.startswith("onnxruntime.")


@contextlib.contextmanager
def standard_symbolics():
    """Export with torch's own ONNX symbolics, not the ones ORTModule registers for training.

    Building an ``ORTModule`` registers custom symbolics process-wide (``embedding`` as a
    ``com.microsoft::ATen`` node, ``gelu`` as the contrib ``Gelu``, ...) and never removes them.
    An inference export made afterwards in the same process (a notebook that fine-tunes with
    ORTModule, then exports) would then hold ATen nodes: the transformer optimizer cannot fuse
    EmbedLayerNormalization, and the graph needs ORTModule's ATen executor to run at all. While
    our export runs, those overrides are taken out of torch's registry; they are put back after.
    """
    from torch.onnx._internal import registration

    removed = []
    for group in list(registration.registry._registry.values()):
        overrides = getattr(getattr(group, "_functions", None), "_overrides", {})
        for opset, fn in list(overrides.items()):
            if _is_onnxruntime_symbolic(fn):
                group.remove_custom(opset)
                removed.append((group, opset, fn))
    try:
        yield [f"{g._name}@{o}" for g, o, _ in removed]
    finally:
        for group, opset, fn in removed:
            group.add_custom(fn, opset)


@contextlib.contextmanager
def _without_ir_dump():
    """Keep torch 2.6 from printing the whole TorchScript IR graph when an export fails.

    torch 2.6's ``torch.onnx.utils.setup_onnx_logging`` tests the *function*
    ``_C._jit_is_onnx_log_enabled`` instead of calling it, so ONNX logging is always switched on
    during an export, and a failed export prints its IR graph (hundreds of lines, on stdout)
    before raising. While our export runs, that helper is replaced by one that calls the function;
    logging then stays as the user set it (off by default). The exception is untouched.
    """
    import torch
    import torch.onnx.utils as onnx_utils

    original = getattr(onnx_utils, "setup_onnx_logging", None)
    if original is None:  # another torch version: nothing to fix
        yield
        return

    @contextlib.contextmanager
    def setup_onnx_logging(verbose: bool):
        # Off unless asked for, even if something earlier in the process (an ORTModule export)
        # switched it on and left it on; the previous state comes back afterwards.
        was_enabled = torch._C._jit_is_onnx_log_enabled()
        torch._C._jit_set_onnx_log_enabled(bool(verbose))
        try:
            yield
        finally:
            torch._C._jit_set_onnx_log_enabled(was_enabled)

    onnx_utils.setup_onnx_logging = setup_onnx_logging
    try:
        yield
    finally:
        onnx_utils.setup_onnx_logging = original


def export_onnx(loaded, path: Path, cfg: ExportConfig, sample_texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Trace ``loaded.model`` on a real batch and write the graph to ``path`` (atomically).

    Returns the graph's input and output names. Raises :class:`ExportError` with options.
    """
    import torch

    from ..batches import encode, model_inputs

    model = loaded.model
    model.eval()
    enc = encode(loaded.tokenizer, list(sample_texts)[:2] or ["a sample sentence"], cfg.max_length)
    # The TorchScript exporter binds inputs to forward()'s signature and names graph inputs in
    # that order (input_ids, attention_mask, token_type_ids for BERT), whatever order the
    # tokenizer produced them in: name them in signature order or the names get swapped. And
    # only what forward() takes: DistilBERT and MPNet have no token_type_ids, whatever the
    # tokenizer produces (model_inputs).
    enc = model_inputs(model, enc)
    names = list(enc)
    dynamic = None
    if cfg.dynamic_axes:
        dynamic = {k: {0: "batch", 1: "sequence"} for k in names}
        dynamic["logits"] = {0: "batch"}
    attn = getattr(loaded, "attn_implementation", "eager")
    try:
        with runs.atomic_path(path) as tmp, torch.no_grad(), _without_ir_dump(), standard_symbolics():
            torch.onnx.export(
                model, (), str(tmp), kwargs=enc, input_names=names, output_names=["logits"],
                dynamic_axes=dynamic, opset_version=cfg.opset, do_constant_folding=cfg.do_constant_folding,
                dynamo=False,
            )
    except ExportError:
        raise
    except Exception as exc:  # torch raises UnsupportedOperatorError, OnnxExporterError, RuntimeError, ...
        raise _explain_failure(exc, cfg, attn) from exc
    return names, ["logits"]


def save_tokenizer(tokenizer, folder: Path) -> Path:
    """Save the tokenizer into ``folder`` atomically (temporary folder, then rename)."""
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


def run_export(model: Union[str, Any], cfg: Optional[ExportConfig] = None, out_dir: str | os.PathLike = "runs/export",
               data=None) -> ExportResult:
    """Export ``model`` ("minilm", "tiny", a checkpoint folder or a ``LoadedModel``) to
    ``out_dir/model.onnx``, validate it against PyTorch on real examples and save ``export.json``.

    ``data`` is a ``DatasetDict``/``Dataset`` to validate on (default: the quick slice of the
    built-in reviews). A failed validation does not raise: ``result.validation.passed`` is False
    and its message says by how much and what to do.
    """
    import onnx

    from ..data import DataConfig, load_data
    from ..ortinfer import torch_predict_dataset

    from ..models import BUILTIN_MODELS, LoadedModel, check_model_type, resolve_model_path

    cfg = cfg or ExportConfig()
    from ..device import require_device

    require_device(cfg.device)  # CUDA asked for and absent: say so before exporting anything
    if not isinstance(model, (str, os.PathLike, LoadedModel)):
        raise TypeError(
            f"model must be 'minilm', 'tiny', a checkpoint folder or a workbench.models.LoadedModel, "
            f"got {type(model).__name__}"
        )
    if isinstance(model, (str, os.PathLike)) and str(model) not in BUILTIN_MODELS:
        check_model_type(resolve_model_path(str(model)))  # a wrong folder or type fails here, before any data is loaded
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = load_data(DataConfig.quick())
    loaded = _resolve_model(model, cfg, data)
    examples = select_examples(data, cfg)
    id2label = getattr(loaded.model.config, "id2label", None) or {}
    class_names = [str(id2label[i]) for i in sorted(id2label)] or [str(i) for i in range(loaded.num_labels)]

    t0 = time.perf_counter()
    onnx_path = out / ONNX_FILE
    inputs, outputs = export_onnx(loaded, onnx_path, cfg, examples["text"])
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

    proto = onnx.load(str(onnx_path), load_external_data=False)
    # What the graph declares (the exporter drops an input the traced model never reads).
    initializers = {i.name for i in proto.graph.initializer}
    inputs = [i.name for i in proto.graph.input if i.name not in initializers]
    result = ExportResult(
        onnx_path=onnx_path.resolve(),
        model_source=str(loaded.source),
        model_name=str(loaded.name),
        opset=cfg.opset,
        input_names=inputs,
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
    )
    runs.save_result(result, out / RESULT_FILE)
    return result


def load_export(path: str | os.PathLike) -> ExportResult:
    """Read an ``export.json`` (or the folder holding it)."""
    return runs.load_result(ExportResult, path, RESULT_FILE)
