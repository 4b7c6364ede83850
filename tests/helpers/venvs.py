"""Clean virtual environments for the tests that install something: made without pip, filled by this
environment's pip (``pip --python``) from the package index pip is configured with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def clean_venv(folder: Path) -> Path:
    """A new virtual environment at ``folder`` with nothing installed; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return folder / "bin" / "python"


def pip_install(python: Path, *requirements: str, timeout: int = 600) -> None:
    """``pip install`` ``requirements`` into the environment of ``python`` (dependencies included)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *requirements],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
