"""Every file and folder name of the run layout is written in one place, workbench/runs/layout.py:
a string literal equal to one of them anywhere else in the library is a second copy that can drift."""

from __future__ import annotations

import ast
from pathlib import Path

from workbench.runs import layout

LIBRARY = Path(__file__).resolve().parents[3]
SOURCES = [p for d in ("workbench", "widgets") for p in sorted((LIBRARY / d).rglob("*.py"))]
NAMES = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str) and ("." in v or "/" in v)}
NAMES |= {f"runs/{d}" for d in layout.STAGE_DIRS.values()}


def docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def literal_copies(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip and n.value in NAMES]


def test_the_layout_names_are_what_the_check_looks_for() -> None:
    assert {"compare.json", "export.json", "fusion.json", "quantize.json", "search.json", "model.onnx",
            "summary.json", "report.html", "runs/export"} <= NAMES


def test_no_layout_file_name_is_written_outside_the_layout_module() -> None:
    found = [f"{p.relative_to(LIBRARY)}:{line} {value!r}" for p in SOURCES if p.name != "layout.py" or p.parent.name != "runs"
             for line, value in literal_copies(p)]
    assert not found, "run-layout names written by hand (use workbench.runs.layout): " + ", ".join(found)
