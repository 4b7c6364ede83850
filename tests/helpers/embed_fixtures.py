"""Tiny sentence-transformers folders (a 2-layer random BERT with MiniLM's tokenizer, any pooling),
saved with sentence-transformers itself, so the folder-reading and export code meets real files."""

from __future__ import annotations

from pathlib import Path


def make_tiny_st_folder(folder: Path, pooling: str = "mean", normalize: bool = True, dense: int = 0, seed: int = 0) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    from workbench.models.load import TINY_CONFIG, minilm_path

    torch.manual_seed(seed)
    folder = Path(folder)
    base = folder / "_base"
    tok = AutoTokenizer.from_pretrained(str(minilm_path()), local_files_only=True)
    BertModel(BertConfig(vocab_size=tok.vocab_size, **TINY_CONFIG)).save_pretrained(str(base))
    tok.save_pretrained(str(base))
    word = models.Transformer(str(base), max_seq_length=64)
    mods = [word, models.Pooling(word.get_embedding_dimension(), pooling_mode=pooling)]
    if dense:
        mods.append(models.Dense(word.get_embedding_dimension(), dense, activation_function=torch.nn.Tanh()))
    if normalize:
        mods.append(models.Normalize())
    out = folder / "model"
    SentenceTransformer(modules=mods, device="cpu").save(str(out))
    return out
