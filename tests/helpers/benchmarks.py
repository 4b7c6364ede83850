"""The benchmark scripts (benchmarks/*.py) and the repository's scripts (scripts/*.py) imported as
modules, for the tests that check them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
SCRIPTS = REPO / "scripts"


def load_benchmark(name: str, folder: Path = BENCHMARKS) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (loaded once). Its folder is on the import path
    while it loads, so a benchmark that imports a sibling (``import bench``) finds it, then is taken off."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(str(folder))
    return module


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as the module ``name``."""
    return load_benchmark(name, SCRIPTS)
