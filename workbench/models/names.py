"""What :mod:`workbench.models.load` and :mod:`workbench.models.hub` both start from: the offline
defaults (nothing is fetched from a hub unless you set ``HF_HUB_OFFLINE=0``), the built-in model names
and :class:`ModelError`."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MINILM = "minilm"
TINY = "tiny"
BUILTIN_MODELS = (MINILM, TINY)


class ModelError(ValueError):
    """A model that cannot be loaded or is not supported; the message says what to do."""
