"""Reading a sentence-transformers folder from its files alone, before torch loads anything, so any stage can
ask cheaply what kind of model it is and a broken folder fails with one line."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from ..models.load import ModelError

EMBEDDING = "embedding"
CLASSIFICATION = "classification"
TASKS = (CLASSIFICATION, EMBEDDING)
# pooling modes the exported graph computes (sentence-transformers' names, as in 1_Pooling/config.json)
POOLING_MODES = ("mean", "cls", "max", "lasttoken", "mean_sqrt_len_tokens")
_POOLING_KEYS = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
}
# Dense activations the graph reproduces (sentence-transformers stores the torch class path)
DENSE_ACTIVATIONS = ("torch.nn.modules.linear.Identity", "torch.nn.modules.activation.Tanh")


class EmbedError(ModelError):
    """An embedding model, task or file the workbench cannot use: one line with the value, the reason and the fix."""


@contextmanager
def as_embed_error(*errors: type[Exception]) -> Iterator[None]:
    """Another layer's refusal (its one line) raised as an :class:`EmbedError`, the embedding task's one error."""
    try:
        yield
    except errors as exc:
        raise EmbedError(str(exc)) from None


@dataclass(frozen=True)
class DenseLayer:
    path: str  # folder inside the model folder
    in_features: int
    out_features: int
    bias: bool
    activation: str


@dataclass(frozen=True)
class EmbedFolder:
    folder: Path
    transformer_path: Path  # the Hugging Face model folder (config.json, weights, tokenizer)
    pooling: str  # one of POOLING_MODES
    dimension: int  # the pooled (word-embedding) dimension
    normalize: bool
    dense: tuple[DenseLayer, ...] = ()
    max_seq_length: Optional[int] = None
    modules: tuple[str, ...] = field(default_factory=tuple)  # the module chain, short names

    @property
    def output_dimension(self) -> int:
        return self.dense[-1].out_features if self.dense else self.dimension

    def describe(self) -> str:
        chain = " -> ".join(self.modules)
        return (f"{chain} ({self.pooling} pooling, {self.output_dimension} dimensions"
                f"{', normalized' if self.normalize else ''}, max {self.max_seq_length} tokens)")


def _read_json(path: Path, what: str, fix: str) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise EmbedError(f"{path}: no {what}; {fix}") from exc
    except (OSError, ValueError) as exc:
        raise EmbedError(f"{path}: cannot read {what} ({exc}); {fix}") from exc


def task_of_folder(folder: str | os.PathLike) -> str:
    """``"embedding"`` for a sentence-transformers folder, else ``"classification"`` (whose checks say what is wrong)."""
    return EMBEDDING if (Path(folder) / "modules.json").is_file() else CLASSIFICATION


def read_folder(folder: str | os.PathLike) -> EmbedFolder:
    """Read a sentence-transformers folder; an :class:`EmbedError` when it is not one or lists a module the graph cannot reproduce."""
    from ..models.hub import model_source
    from ..models.load import MINILM, minilm_path

    with as_embed_error(ModelError):
        folder = minilm_path() if str(folder) == MINILM else Path(model_source(folder)).expanduser()  # a Hub id: its cached folder
    if not folder.is_dir():
        raise EmbedError(f"model folder {str(folder)!r} does not exist; give a sentence-transformers folder "
                         "(saved with SentenceTransformer.save(folder))")
    fix = "save the model with SentenceTransformer.save(folder), which writes it"
    modules = _read_json(folder / "modules.json", "modules.json (not a sentence-transformers folder)", fix)
    if not isinstance(modules, list) or not modules:
        raise EmbedError(f"{folder / 'modules.json'}: expected a list of modules, got {type(modules).__name__}; {fix}")
    transformer = pooling = None
    normalize = False
    dense: list[DenseLayer] = []
    names: list[str] = []
    no_pooling = (f"{folder}: no pooling config (modules.json lists no Pooling module after the Transformer), so the "
                  "sentence embedding is undefined; add a Pooling module (e.g. mean) and save with SentenceTransformer.save(folder)")
    for m in sorted(modules, key=lambda m: int(m.get("idx", 0))):
        raw_kind, path = str(m.get("type", "")), str(m.get("path", ""))
        short = raw_kind.rsplit(".", 1)[-1]
        # the class name decides wherever the package keeps it (5.7: sentence_transformers.base.modules.transformer.Transformer)
        kind = short if raw_kind.startswith("sentence_transformers.") else ""
        names.append(short)
        if kind == "Transformer" and transformer is None and pooling is None:
            transformer = folder / path
        elif kind == "Pooling" and transformer is not None and pooling is None and not dense:
            pooling = folder / path
        elif kind == "Dense" and pooling is not None and not normalize:
            cfg = _read_json(folder / path / "config.json", "Dense config", fix)
            act = str(cfg.get("activation_function", "torch.nn.modules.linear.Identity"))
            if act not in DENSE_ACTIVATIONS:
                raise EmbedError(f"{folder / path}: Dense activation {act!r} is not reproduced in the graph; "
                                 f"the ones that are: {', '.join(DENSE_ACTIVATIONS)}")
            dense.append(DenseLayer(path, int(cfg["in_features"]), int(cfg["out_features"]), bool(cfg.get("bias", True)), act))
        elif kind == "Normalize" and pooling is not None:
            normalize = True
        elif kind in ("Normalize", "Dense") and transformer is not None and pooling is None:
            raise EmbedError(no_pooling)
        else:
            raise EmbedError(f"{folder / 'modules.json'}: module {raw_kind or m!r} at position {m.get('idx')} is not handled "
                             "(the workbench exports Transformer -> Pooling -> optional Dense -> optional Normalize)")
    if transformer is None:
        raise EmbedError(f"{folder / 'modules.json'} lists no Transformer module; {fix}")
    if pooling is None:
        raise EmbedError(no_pooling)
    pcfg_path = pooling / "config.json"
    if not pcfg_path.is_file():
        raise EmbedError(f"{folder}: no pooling config ({pcfg_path.relative_to(folder)} is missing), so the sentence "
                         "embedding is undefined; save the model with SentenceTransformer.save(folder), which writes it")
    pcfg = _read_json(pcfg_path, "pooling config", fix)
    named = pcfg.get("pooling_mode")  # sentence-transformers 5.7's form: {"pooling_mode": "mean", "embedding_dimension": ..}
    if named is not None:
        modes = [str(x) for x in (named if isinstance(named, list) else [named])]
        other = [x for x in modes if x not in POOLING_MODES]
        modes = [x for x in modes if x in POOLING_MODES]
    else:
        modes = [mode for key, mode in _POOLING_KEYS.items() if pcfg.get(key)]
        other = sorted(k for k, v in pcfg.items() if k.startswith("pooling_mode_") and v and k not in _POOLING_KEYS)
    if other or len(modes) != 1:
        raise EmbedError(f"{pcfg_path}: pooling {modes + other or 'none'} is not one the graph computes; exactly one of "
                         f"{', '.join(POOLING_MODES)} must be set")
    if not (transformer / "config.json").is_file():
        raise EmbedError(f"{transformer}: the Transformer module has no config.json; {fix}")
    st_cfg = folder / "sentence_bert_config.json"
    max_len = _read_json(st_cfg, "sentence_bert_config.json", fix).get("max_seq_length") if st_cfg.is_file() else None
    dim = int(pcfg.get("word_embedding_dimension") or pcfg.get("embedding_dimension") or 0)
    return EmbedFolder(folder=folder.resolve(), transformer_path=transformer.resolve(), pooling=modes[0], dimension=dim,
                       normalize=normalize, dense=tuple(dense), max_seq_length=int(max_len) if max_len else None,
                       modules=tuple(names))


def check_task_of(model: str | os.PathLike, task: Optional[str] = None) -> str:
    """The task to run on ``model``: ``task`` when given (``auto`` or None: read from the folder)."""
    if task not in (None, "auto"):
        if task not in TASKS:
            raise EmbedError(f"task must be one of auto, {', '.join(TASKS)}, got {task!r}")
        return task
    from ..models.hub import model_source
    from ..models.load import MINILM

    if str(model) == MINILM:
        return CLASSIFICATION
    with as_embed_error(ModelError):
        return task_of_folder(Path(model_source(model)).expanduser())  # a Hub id: its cached folder
