"""The library layer never imports widget or notebook machinery.

``workbench/`` must stay importable and testable without Jupyter: the panels in ``widgets/`` are
views over it, never the other way round. This walks the AST of every module under
``workbench/`` (so imports inside functions and ``if TYPE_CHECKING`` blocks count too) and fails
on ``ipywidgets``, ``IPython``, ``traitlets`` (or anything below them), and on the ``widgets``
package itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parents[2] / "workbench"
FORBIDDEN = ("ipywidgets", "IPython", "traitlets", "widgets", "anywidget", "ipykernel")


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import statement; relative imports are skipped
    (they stay inside ``workbench``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call):
            # importlib.import_module("x") / __import__("x") with a literal name
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                if isinstance(node.args[0].value, str) and not node.args[0].value.startswith("."):
                    found.append((node.lineno, node.args[0].value))
    return found


def is_forbidden(module: str) -> bool:
    top = module.split(".")[0]
    return top in FORBIDDEN


def library_files() -> list[Path]:
    return sorted(LIBRARY.rglob("*.py"))


def test_library_has_modules() -> None:
    files = library_files()
    assert LIBRARY / "__init__.py" in files
    assert len(files) >= 5, f"expected the workbench package under {LIBRARY}, found {files}"


@pytest.mark.parametrize("path", library_files(), ids=lambda p: str(p.relative_to(LIBRARY)))
def test_module_imports_no_widget_machinery(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = [(line, mod) for line, mod in imported_modules(tree) if is_forbidden(mod)]
    assert not bad, (
        f"{path.relative_to(LIBRARY.parent)} imports {', '.join(f'{m} (line {n})' for n, m in bad)}: "
        "workbench/ is the library layer and must not import ipywidgets, IPython, traitlets or the "
        "widgets package; move the view code to widgets/ and pass plain data or callbacks down"
    )


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import ipywidgets as W", ["ipywidgets"]),
        ("from IPython.display import display", ["IPython.display"]),
        ("def f():\n    import traitlets.config\n", ["traitlets.config"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ipywidgets import Button\n", ["ipywidgets"]),
        ("import importlib\nimportlib.import_module('IPython')\n", ["IPython"]),
        ("from widgets.base import Panel", ["widgets.base"]),
    ],
)
def test_detector_catches_forbidden_imports(source: str, expected: list[str]) -> None:
    """The walker itself: each of these would be a layering violation and must be found."""
    found = [m for _, m in imported_modules(ast.parse(source)) if is_forbidden(m)]
    assert found == expected


@pytest.mark.parametrize(
    "source",
    ["import plotly.graph_objects as go", "from . import runs", "from .plots import train", "import ipywidgets_like_name_is_not_it"],
)
def test_detector_allows_library_imports(source: str) -> None:
    assert not [m for _, m in imported_modules(ast.parse(source)) if is_forbidden(m)]
