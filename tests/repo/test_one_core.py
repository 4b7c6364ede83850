"""Each idea of the quantization core lives in one place that every task uses: the repository is read
(its syntax trees), nothing is run."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "workbench"


@lru_cache(maxsize=1)
def _modules() -> tuple:
    """Every library module's (path, syntax tree), parsed once for the file's tests."""
    return tuple((path.relative_to(LIBRARY.parent).as_posix(), ast.parse(path.read_text(), str(path)))
                 for path in sorted(LIBRARY.rglob("*.py")))


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
    assert _calls("SearchCandidate") == {"workbench/quant/choice.py"}  # every candidate through its constructors there
    assert _calls("choose") <= {"workbench/quant/search.py", "workbench/embed/search.py"}


def _names(name: str) -> set[str]:
    """The modules that read the name ``name`` (a constant, a function or a class, imported or not)."""
    return {where for where, tree in _modules() for node in ast.walk(tree)
            if (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)}


def test_one_timing_function_for_every_task():
    # graphs, PyTorch models and encode calls are timed in the same interleaved rounds; one speed type, one ratio type
    one = _defined({"time_interleaved", "time_callables", "measure_quietly", "Speed", "SpeedRun", "Rounds", "Timed"})
    assert one == {n: ["workbench/perf/speed.py"] for n in one}, one
    assert _defined({"EmbedSpeed", "EmbedSpeedRun", "time_embedders"}) == {"EmbedSpeed": [], "EmbedSpeedRun": [], "time_embedders": []}
    assert _calls("interleaved") == {"workbench/perf/speed.py"}  # the rounds themselves run in one place
    assert _calls("time_interleaved") == {"workbench/perf/speed.py"}


def test_one_verdict_and_one_summary_for_every_task():
    # one verdict builder; summary.json's common fields, its schema and its check, and its writer, in one place each
    assert _defined({"build_verdict"}) == {"build_verdict": ["workbench/report/verdict.py"]}
    assert _calls("build_verdict") == {"workbench/report/summary.py", "workbench/embed/report.py"}
    assert _names("SCHEMA_VERSION") <= {"workbench/report/schema.py", "workbench/report/summary.py", "workbench/report/__init__.py"}
    assert _names("SUMMARY_SCHEMA") <= {"workbench/report/schema.py", "workbench/report/__init__.py"}
    assert _calls("validate_summary") == {"workbench/report/summary.py"}  # in task_summary, for every task
    assert _calls("task_summary") == {"workbench/report/summary.py", "workbench/embed/report.py"}
    writers = {where for where, tree in _modules() for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "id", getattr(node.func, "attr", "")) == "atomic_write_set"
               and "SUMMARY_FILE" in ast.dump(node)}
    assert writers == {"workbench/report/write.py"}, writers
    assert _calls("render_html") <= {"workbench/report/write.py"} | {"workbench/report/__init__.py"}
