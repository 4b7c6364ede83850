"""Shared fixtures. Expensive artifacts (a trained checkpoint, an exported graph) are built once
per session and reused by every layer's tests."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ORTMODULE_FALLBACK_POLICY", "FALLBACK_DISABLE")

from pathlib import Path

import pytest

OUTPUT_ROOT = Path(__file__).resolve().parent.parent / "test-output"


@pytest.fixture(scope="session")
def quick_data():
    """A small stratified slice of the built-in reviews (same loading code as the real run)."""
    from workbench.data import DataConfig, load_data

    return load_data(DataConfig.quick())


@pytest.fixture(scope="session")
def tiny():
    from workbench.models import load_model

    return load_model("tiny", dropout=False)


@pytest.fixture(scope="session")
def minilm():
    from workbench.models import load_model

    return load_model("minilm")


@pytest.fixture
def output_dir(request) -> Path:
    """A folder under test-output/ named after the test, kept after the run (screenshots, figures)."""
    path = OUTPUT_ROOT / request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---- fixtures for training (issue 3) --------------------------------------------------------

# ---- fixtures for export and fusion (issue 4) -----------------------------------------------

# ---- fixtures for quantization (issue 5) ----------------------------------------------------
