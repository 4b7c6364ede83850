"""The code's shape: no function over 80 lines, no module over 500, no private name imported from
another module. What is over the line today is listed here by name and may only leave the list:
a new long function, long module or private import fails, and so does a listed one that no longer
needs its entry (take it off)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("workbench", "widgets")
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500

KNOWN_LONG_FUNCTIONS: set[str] = set()
KNOWN_LONG_MODULES: set[str] = set()


def sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
            for tree in TREES for p in sorted((ROOT / tree).rglob("*.py"))}


def long_functions(tree: ast.Module, rel: str, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    found: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                lines = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and lines > limit:
                    found[f"{rel}:{name}"] = lines
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def private_imports(tree: ast.Module, rel: str) -> set[str]:
    """``file: module._name`` for every ``from module import _name`` of another workbench/widgets module."""
    parts = Path(rel).with_suffix("").parts
    package = list(parts[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - (node.level - 1)] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            if base.split(".")[0] in TREES:
                out |= {f"{rel}: {base}.{a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")}
    return out


KNOWN_PRIVATE_IMPORTS_PER_FILE: dict[str, int] = {}


def test_no_new_function_over_80_lines() -> None:
    found = {k: v for rel, tree in sources().items() for k, v in long_functions(tree, rel).items()}
    new = sorted(set(found) - KNOWN_LONG_FUNCTIONS)
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines: " + ", ".join(f"{k} ({found[k]})" for k in new)
    gone = sorted(KNOWN_LONG_FUNCTIONS - set(found))
    assert not gone, f"no longer over {MAX_FUNCTION_LINES} lines (or renamed): take {gone} off KNOWN_LONG_FUNCTIONS"


def test_no_new_module_over_500_lines() -> None:
    found = {rel for rel in sources() if len((ROOT / rel).read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES}
    assert not sorted(found - KNOWN_LONG_MODULES), f"modules over {MAX_MODULE_LINES} lines: {sorted(found - KNOWN_LONG_MODULES)}"
    assert not sorted(KNOWN_LONG_MODULES - found), f"take {sorted(KNOWN_LONG_MODULES - found)} off KNOWN_LONG_MODULES"


def test_no_new_private_import_across_modules() -> None:
    counts: dict[str, list[str]] = {}
    for rel, tree in sources().items():
        for item in private_imports(tree, rel):
            counts.setdefault(rel, []).append(item)
    grown = {rel: sorted(items) for rel, items in counts.items() if len(items) > KNOWN_PRIVATE_IMPORTS_PER_FILE.get(rel, 0)}
    assert not grown, f"private names imported from another module (make the helper public): {grown}"
    shrunk = sorted(rel for rel, n in KNOWN_PRIVATE_IMPORTS_PER_FILE.items() if len(counts.get(rel, [])) < n)
    assert not shrunk, f"fewer private imports than listed now: lower KNOWN_PRIVATE_IMPORTS_PER_FILE for {shrunk}"


def test_the_checks_see_what_they_look_for() -> None:
    tree = ast.parse("def f():\n" + "    x = 1\n" * 81 + "class C:\n    def g(self):\n        pass\n"
                     "from ..cli.tools import _hidden, ok\nfrom . import _b\nimport os\n")
    assert long_functions(tree, "workbench/x/m.py") == {"workbench/x/m.py:f": 82}
    assert private_imports(tree, "workbench/x/m.py") == {"workbench/x/m.py: workbench.cli.tools._hidden",
                                                          "workbench/x/m.py: workbench.x._b"}


def test_tests_reach_their_helpers_without_sys_path_insert() -> None:
    """Shared test code is the package tests/helpers (imported as ``helpers.<module>``: pytest puts
    tests/, the rootdir conftest's folder, on sys.path); only helpers/benchmarks.py touches sys.path."""
    offenders = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
                       if "sys.path.insert" in p.read_text(encoding="utf-8")
                       and p.relative_to(ROOT).as_posix() not in ("tests/helpers/benchmarks.py", "tests/repo/test_code_shape.py"))
    assert not offenders, f"sys.path.insert in {offenders}: import from tests/helpers instead"
