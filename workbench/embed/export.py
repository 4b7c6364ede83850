"""Export a sentence-transformers model to one ONNX graph from tokens to the sentence embedding (pooling,
Dense and normalization inside), so the graph and the tokenizer alone return what ``SentenceTransformer.encode``
does; validated against it per text by cosine. Attention is ``"eager"``: the pattern ORT's optimizer fuses.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .. import runs
from ..runs import layout
from .folder import EmbedError, EmbedFolder, read_folder

TOKENIZER_DIR = "tokenizer"
RESULT_FILE = "embed_export.json"
OUTPUT_NAME = "sentence_embedding"
OPSET = 17
MIN_COSINE = 0.9999  # the least cosine to SentenceTransformer.encode a validated text may have
VALIDATION_TEXTS = 64
VALIDATION_BATCH = 16


@dataclass(frozen=True)
class EmbedValidation:
    """The graph against ``SentenceTransformer.encode`` on the same texts."""

    texts: int
    min_cosine: float
    mean_cosine: float
    max_abs_diff: float
    threshold: float
    worst_text: str

    @property
    def passed(self) -> bool:
        return self.min_cosine >= self.threshold

    def text(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (f"validation {verdict}: cosine to SentenceTransformer.encode over {self.texts} texts min "
                f"{self.min_cosine:.6f} (threshold {self.threshold}), mean {self.mean_cosine:.6f}, largest "
                f"difference {self.max_abs_diff:.2e}")


@dataclass(frozen=True)
class EmbedExportResult:
    onnx_path: Path
    tokenizer_dir: Path
    folder: str
    pooling: str
    normalize: bool
    dimension: int
    max_length: int
    model_type: str
    num_heads: int
    hidden_size: int
    input_names: list[str]
    validation: EmbedValidation
    export_seconds: float
    opset: int = 17

    def load_tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.tokenizer_dir), local_files_only=True)


def pooled_encoder(info: EmbedFolder):
    """``(input_ids, attention_mask[, token_type_ids])`` -> the sentence embedding, as the folder's modules compute it."""
    import torch
    from transformers import AutoModel

    try:
        base = AutoModel.from_pretrained(str(info.transformer_path), local_files_only=True, attn_implementation="eager")
    except (OSError, ValueError) as exc:
        raise EmbedError(f"cannot load the Transformer module from {info.transformer_path}: {exc}") from exc
    base.eval()
    dense = torch.nn.ModuleList()
    for d in info.dense:
        linear = torch.nn.Linear(d.in_features, d.out_features, bias=d.bias)
        linear.load_state_dict(_dense_weights(info.folder / d.path))
        act = torch.nn.Tanh() if d.activation.endswith("Tanh") else torch.nn.Identity()
        dense.append(torch.nn.Sequential(linear, act))
    return _module_class()(base, info.pooling, info.normalize, dense).eval()


def _dense_weights(folder: Path) -> dict:
    import torch

    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(str(folder / "pytorch_model.bin"), map_location="cpu", weights_only=True)
    else:
        raise EmbedError(f"{folder}: the Dense module has no weights (model.safetensors or pytorch_model.bin)")
    return {k.removeprefix("linear."): v for k, v in state.items()}


def _module_class():
    """The module's class, defined on first use: torch is imported only when a model is exported."""
    import torch

    class _PooledEncoder(torch.nn.Module):
        def __init__(self, base, pooling: str, normalize: bool, dense) -> None:
            super().__init__()
            self.base, self.pooling, self.normalize, self.dense = base, pooling, normalize, dense
            self._takes_token_types = "token_type_ids" in base.forward.__code__.co_varnames

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kw = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None and self._takes_token_types:
                kw["token_type_ids"] = token_type_ids
            tokens = self.base(**kw).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            if self.pooling == "cls":
                pooled = tokens[:, 0]
            elif self.pooling == "max":
                pooled = torch.max(tokens + (mask - 1.0) * 1e9, dim=1).values
            elif self.pooling == "lasttoken":  # right padding: the last real token is at length - 1
                last = attention_mask.sum(dim=1) - 1
                idx = last.view(-1, 1, 1).expand(-1, 1, tokens.shape[-1])
                pooled = torch.gather(tokens, 1, idx).squeeze(1)
            else:
                total = (tokens * mask).sum(dim=1)
                count = torch.clamp(mask.sum(dim=1), min=1e-9)
                pooled = total / (torch.sqrt(count) if self.pooling == "mean_sqrt_len_tokens" else count)
            for layer in self.dense:
                pooled = layer(pooled)
            if self.normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2.0, dim=1)
            return pooled

    return _PooledEncoder


def reference_encode(folder: str | os.PathLike, texts: Sequence[str], batch_size: int = 32, max_length: Optional[int] = None) -> np.ndarray:
    """``SentenceTransformer.encode`` of ``texts`` (the reference every graph is held to)."""
    from .encode import st_encoder

    model = st_encoder(folder)
    if max_length is not None:
        model.max_seq_length = int(max_length)
    return np.asarray(model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False),
                      dtype=np.float32)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return num / np.maximum(den, 1e-12)


def validation_texts(n: int) -> list[str]:
    """``n`` real texts of every length: reviews and plot descriptions from the built-in corpus."""
    from .retrieval import corpus_frame

    frame = corpus_frame()
    plots = frame[frame["category"] == "plot"]["text"].tolist()
    reviews = frame[frame["category"] != "plot"]["text"].tolist()
    k = max(1, n // 4)
    return (plots[:k] + reviews[: n - k])[:n]


def run_embed_export(folder: str | os.PathLike, out_dir: str | os.PathLike, texts: Optional[Sequence[str]] = None) -> EmbedExportResult:
    """Export and validate on ``texts`` (default: built-in reviews and plots); a failed validation does not raise."""
    import onnx
    import torch
    from transformers import AutoTokenizer

    from ..data.batches import encode
    from ..graph.trace import standard_symbolics, torchscript_export_warnings
    from .encode import OnnxEncoder

    info = read_folder(folder)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    max_length = int(info.max_seq_length or 256)
    tokenizer = AutoTokenizer.from_pretrained(str(info.transformer_path), local_files_only=True)
    module = pooled_encoder(info)
    texts = list(texts) if texts is not None else validation_texts(VALIDATION_TEXTS)
    if not texts:
        raise EmbedError("validation needs at least one text; give texts or leave them to the built-in corpus")
    enc = dict(encode(tokenizer, texts[:2], max_length))
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in enc]
    t0 = time.perf_counter()
    path = out / layout.EXPORT_GRAPH
    with runs.atomic_path(path) as tmp, torch.no_grad(), standard_symbolics(), torchscript_export_warnings():
        torch.onnx.export(module, tuple(enc[n] for n in names), str(tmp), input_names=names, output_names=[OUTPUT_NAME],
                          dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, OUTPUT_NAME: {0: "batch"}},
                          opset_version=OPSET, do_constant_folding=True, dynamo=False)
    seconds = time.perf_counter() - t0
    onnx.checker.check_model(str(path))
    with runs.atomic_dir(out / TOKENIZER_DIR) as tmp:
        tokenizer.save_pretrained(str(tmp))
    reference = reference_encode(info.folder, texts, VALIDATION_BATCH, max_length)
    got = OnnxEncoder(path, tokenizer, max_length).encode(texts, VALIDATION_BATCH)
    cos = cosine_rows(reference, got)
    validation = EmbedValidation(texts=len(texts), min_cosine=float(cos.min()), mean_cosine=float(cos.mean()),
                                 max_abs_diff=float(np.abs(reference - got).max()), threshold=MIN_COSINE,
                                 worst_text=str(texts[int(np.argmin(cos))]))
    c = module.base.config
    result = EmbedExportResult(
        onnx_path=path.resolve(), tokenizer_dir=(out / TOKENIZER_DIR).resolve(), folder=str(info.folder),
        pooling=info.pooling, normalize=info.normalize, dimension=info.output_dimension, max_length=max_length,
        model_type=str(getattr(c, "model_type", "")), num_heads=int(getattr(c, "num_attention_heads", 0) or 0),
        hidden_size=int(getattr(c, "hidden_size", 0) or 0), input_names=names, validation=validation,
        export_seconds=seconds, opset=OPSET)
    runs.save_result(result, out / RESULT_FILE)
    return result
