"""Hub ids (``sentence-transformers/all-MiniLM-L6-v2``) as their snapshot folder in the local Hugging Face cache,
so they flow on as a local folder does; every front resolves ``--model`` here. A download needs
``HF_HUB_OFFLINE=0``; a built-in name and an existing path always win over an id.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from .names import BUILTIN_MODELS, ModelError

# what huggingface_hub accepts as a repo id: "name" or "namespace/name" of letters, digits, "-", "_", "."
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
# files a download leaves out (and a cache look-up does not ask for): other frameworks' weights and
# exported graphs the workbench never reads
IGNORE_PATTERNS = ("*.h5", "*.msgpack", "*.ot", "*.tflite", "*.onnx", "onnx/*", "openvino/*", "coreml/*")


def is_hub_id(name: str) -> bool:
    """True when ``name`` is written like a Hub repo id (``org/name`` or a legacy ``name``)."""
    return bool(_REPO_ID.match(name)) and "--" not in name and ".." not in name and not name.endswith(".") and len(name) <= 96


def model_source(name: str | os.PathLike) -> str:
    """``name`` as a model the workbench can read: a Hub id as its snapshot folder, anything else unchanged."""
    text = str(name)
    if text in BUILTIN_MODELS or not is_hub_id(text) or Path(text).expanduser().exists():
        return text
    return str(hub_folder(text))


def hub_offline() -> bool:
    """Whether the Hub may not be reached (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``, then or now)."""
    from huggingface_hub import constants

    now = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return bool(constants.HF_HUB_OFFLINE) or now.strip().lower() in ("1", "on", "yes", "true")


def hub_folder(repo_id: str, cache_dir: Optional[str | os.PathLike] = None) -> Path:
    """The snapshot folder of ``repo_id`` in the Hugging Face cache: the cached one, else downloaded unless offline."""
    from huggingface_hub import constants, snapshot_download

    cache = Path(cache_dir if cache_dir is not None else constants.HF_HUB_CACHE).expanduser()
    ignore = list(IGNORE_PATTERNS)
    try:
        return Path(snapshot_download(repo_id, cache_dir=cache, local_files_only=True, ignore_patterns=ignore))
    except FileNotFoundError as exc:  # huggingface_hub's LocalEntryNotFoundError: not in the cache (or only in part)
        if hub_offline():
            raise ModelError(
                f"model {repo_id!r} is neither a built-in model {list(BUILTIN_MODELS)} nor an existing folder, and as a Hugging "
                f"Face Hub id it is not in the local cache ({cache}) while downloads are off (HF_HUB_OFFLINE=1): run `hf download "
                f"{repo_id}` on a machine with network and copy that cache here, set HF_HUB_OFFLINE=0 to let the workbench "
                "download it, or give a local model folder (with config.json)") from exc
    except ValueError as exc:  # an id huggingface_hub refuses
        raise ModelError(f"model {repo_id!r} is not a local folder nor a valid Hugging Face Hub id ({_first_line(exc)}); "
                         "give a local model folder or an id such as sentence-transformers/all-MiniLM-L6-v2") from exc
    try:
        return Path(snapshot_download(repo_id, cache_dir=cache, ignore_patterns=ignore))
    except (OSError, ValueError) as exc:  # not found, gated, private, no network: huggingface_hub's errors are these kinds
        raise ModelError(
            f"model {repo_id!r} is not an existing folder and could not be fetched from the Hugging Face Hub into {cache} "
            f"({type(exc).__name__}: {_first_line(exc)}); check the id and the network (a gated or private model needs "
            "`hf auth login`), or give a local model folder (with config.json)") from exc


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:160]


def model_name(folder: str | os.PathLike) -> str:
    """A model folder's name for titles and run folders: a Hub cache snapshot's repo name, not its commit hash."""
    path = Path(folder)
    repo = path.parent.parent.name
    if path.parent.name == "snapshots" and repo.startswith("models--"):
        return repo.split("--")[-1]
    return path.name
