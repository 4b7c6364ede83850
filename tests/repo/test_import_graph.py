"""The import graph of ``workbench/``: no circle, and no arrow from a lower floor to a higher one.

The graph is built from the sources (``ast``), so imports inside functions and ``if TYPE_CHECKING``
blocks count: a lazy import that runs back up is still a dependency the next change pays for.
``from pkg import name`` is an arrow to ``pkg.name`` when that is a module, else to ``pkg``; an
arrow to one of the module's own enclosing packages is not counted (Python initializes a package
before its modules, so that is not a circle).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "workbench"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def read_floors(text: str) -> list[tuple[str, set[str]]]:
    """The floors of ARCHITECTURE.md's table, lowest first: ``[(name, {package, ...}), ...]``.

    A row is ``| N name | `pkg` `pkg` | what they hold |``; the floor is N."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"\|\s*(\d+)\s+([\w -]+?)\s*\|([^|]*)\|", line)
        if m:
            rows.append((int(m.group(1)), m.group(2), set(re.findall(r"`(\w+)`", m.group(3)))))
    return [(name, pkgs) for _, name, pkgs in sorted(rows)]


# Floors, lowest first. A module may import from its own floor or any floor below, never above.
FLOORS: list[tuple[str, set[str]]] = read_floors(ARCHITECTURE.read_text(encoding="utf-8"))


def modules() -> dict[str, Path]:
    out = {}
    for path in LIBRARY.rglob("*.py"):
        parts = ["workbench", *path.relative_to(LIBRARY).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` within ``workbench``."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target in mods and target != mod and not mod.startswith(target + "."):
                    edges[mod].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def floor_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    for i, (_, names) in enumerate(FLOORS):
        if top in names:
            return i
    raise AssertionError(f"{module}: its package {top!r} is on no floor of ARCHITECTURE.md's table; add it where it belongs")


def test_the_floors_are_read_from_architecture_md() -> None:
    names = [name for name, _ in FLOORS]
    assert names[0] == "base" and names[-1] == "fronts", names
    assert "core" in FLOORS[0][1] and "cli" in FLOORS[-1][1]
    table = "| 2 upper | `b` |  |\n| 1 lower | `a` `c` | x |\n| floor | packages | what |"
    assert read_floors(table) == [("lower", {"a", "c"}), ("upper", {"b"})]


def test_every_package_and_top_level_module_is_on_one_floor() -> None:
    tops = {p.stem for p in LIBRARY.glob("*.py")} | {p.name for p in LIBRARY.iterdir() if (p / "__init__.py").exists()}
    placed = [n for _, names in FLOORS for n in names]
    assert sorted(tops - set(placed)) == [], "on no floor of ARCHITECTURE.md"
    assert len(placed) == len(set(placed)), "a package on two floors"
    assert len([p for p in LIBRARY.glob("*.py")]) <= 6, "at most six modules at the top of workbench/"


def test_the_graph_is_read_from_the_sources() -> None:
    edges = import_graph()
    # a function-level import (flow.Run.export) and a relative `from . import x` both count
    assert "workbench.graph" in edges["workbench.flow.handoffs"] or "workbench.graph.export" in edges["workbench.flow.handoffs"]
    assert "workbench.runs.layout" in edges["workbench.runs.open"]


def test_the_cycle_finder_finds_a_planted_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_library() -> None:
    found = cycles(import_graph())
    assert not found, "import circles in workbench/: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_arrow_from_a_lower_floor_to_a_higher_one() -> None:
    bad = [(m, t) for m, targets in import_graph().items() for t in targets if floor_of(t) > floor_of(m)]
    assert not bad, "imports that run upward: " + ", ".join(
        f"{m} ({FLOORS[floor_of(m)][0]}) -> {t} ({FLOORS[floor_of(t)][0]})" for m, t in sorted(bad))


def test_runs_imports_no_stage() -> None:
    """``workbench.runs`` (layout, atomic writing) is the lowest floor: it reads no stage's results."""
    edges = import_graph()
    up = sorted(t for m, targets in edges.items() if m.startswith("workbench.runs") for t in targets
                if not t.startswith("workbench.runs") and t not in ("workbench.core.serial",))
    assert not up, f"workbench.runs imports {up}"
