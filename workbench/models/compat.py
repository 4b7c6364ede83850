"""Folders saved by transformers 5 on the training stack's transformers 4.57 (ORTModule pins torch 2.6, where
transformers 5 breaks ``torch.compile``). Weights and config.json load as they are; tokenizer folders differ:

- ``"tokenizer_class": "TokenizersBackend"`` (not in 4.57): its ``tokenizer.json`` is read by ``PreTrainedTokenizerFast``;
- ``extra_special_tokens`` is a list, which 4.57 calls ``additional_special_tokens`` (it wants a dict there);
- no ``special_tokens_map.json``: the special tokens are in tokenizer_config.json, which 4.57 reads.

A class 4.57 lacks and no ``tokenizer.json``: :class:`NewerTransformersError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CURRENT_STACK_HINT = ("set up the current stack with `make setup-current` and run the same command with "
                      ".venv-current/bin/workbench")


class NewerTransformersError(ValueError):
    """The folder needs a newer transformers than the one installed; the message names what and the fix."""


def transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _read_config(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _known_class(name: str) -> bool:
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    try:
        return tokenizer_class_from_name(name) is not None
    except Exception:  # noqa: BLE001  (an unknown name raises in some versions, returns None in others)
        return False


def v5_overrides(config: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments that make transformers 4.x read a transformers 5 tokenizer_config.json."""
    extra = config.get("extra_special_tokens")
    if not isinstance(extra, list):
        return {}
    tokens = [t["content"] if isinstance(t, dict) else str(t) for t in extra]
    merged = list(config.get("additional_special_tokens") or []) + [t for t in tokens
                                                                     if t not in (config.get("additional_special_tokens") or [])]
    return {"extra_special_tokens": {}, "additional_special_tokens": merged}


def load_tokenizer(folder: str | os.PathLike):
    """``AutoTokenizer.from_pretrained(folder)`` offline, reading folders saved by transformers 5 on 4.x."""
    from transformers import AutoTokenizer

    path = Path(folder)
    if transformers_major() >= 5:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    config = _read_config(path)
    cls = str(config.get("tokenizer_class") or "")
    overrides = v5_overrides(config)
    if cls and not _known_class(cls):
        if not (path / "tokenizer.json").is_file():
            import transformers

            raise NewerTransformersError(
                f"{path / 'tokenizer_config.json'} names tokenizer class {cls!r}, which transformers "
                f"{transformers.__version__} (this training stack) does not have, and the folder has no tokenizer.json to read "
                f"instead; {CURRENT_STACK_HINT}")
        # TokenizersBackend (or another class this version lacks) over a tokenizer.json: the fast tokenizer itself
        from transformers import PreTrainedTokenizerFast
        from transformers.utils import logging as hf_logging

        # transformers warns that the folder names another class than PreTrainedTokenizerFast: that is the point here
        log = hf_logging.get_logger("transformers.tokenization_utils_base")
        level = log.level
        log.setLevel(hf_logging.ERROR)
        try:
            return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True, **overrides)
        finally:
            log.setLevel(level)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, **overrides)
