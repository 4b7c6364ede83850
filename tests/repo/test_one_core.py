"""Each idea of the quantization core lives in one place that every task uses: the repository is read
(its syntax trees), nothing is run."""

from __future__ import annotations

import ast
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "workbench"


def _modules():
    for path in sorted(LIBRARY.rglob("*.py")):
        yield path.relative_to(LIBRARY.parent).as_posix(), ast.parse(path.read_text(), str(path))


def _calls(name: str) -> set[str]:
    """The modules that call ``name`` (a function or a method of that name)."""
    found = set()
    for where, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                    found.add(where)
    return found


def _defined(names: set[str]) -> dict[str, list[str]]:
    """``{name: [modules defining a function or class of that name]}``."""
    out: dict[str, list[str]] = {n: [] for n in names}
    for where, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
                out[node.name].append(where)
    return out


def test_one_requantization_with_the_worst_nodes_left_in_fp32():
    # every task quantizes through the Quantizer: no second place quantizes a graph file or ranks nodes to leave out
    assert _calls("quantize_graph") == {"workbench/quant/quantizer.py"}
    assert _calls("worst_nodes") <= {"workbench/quant/quantizer.py", "workbench/quant/run.py"}
    assert _defined({"Quantizer", "VariantBuilder"}) == {"Quantizer": ["workbench/quant/quantizer.py"], "VariantBuilder": []}


def test_one_search_for_every_task():
    # the search, its choice, its message and its candidates' constructors are written once; a task brings its terms
    one = _defined({"run_search", "search_results", "select_candidate", "choose", "choice_message", "fp32_candidate",
                    "int8_candidate", "search_over_results"})
    home = {"run_search": "search", "search_results": "search", "choose": "search"}
    assert one == {n: [f"workbench/quant/{home.get(n, 'choice')}.py"] for n in one if n != "search_over_results"} | {
        "search_over_results": []}, one
    assert _calls("select_candidate") == {"workbench/quant/search.py"}  # by choose, for every search
    assert _calls("SearchCandidate") <= {"workbench/quant/choice.py", "workbench/embed/search.py"}
