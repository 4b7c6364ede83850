"""Every notebook in notebooks/ executes, top to bottom, with small parameters, and is committed
without outputs.

Parameters are injected papermill-style: a cell tagged ``injected-parameters`` is inserted after
the cell tagged ``parameters``. Each notebook then gets a final cell that checks its panels really
ran (a result, no error), so a notebook that only displays a panel cannot pass by doing nothing.
``client.widget_registry = {}`` keeps nbclient from stalling on Output widgets (FIELD_NOTES).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
EXPECTED = [
    "00_tour",
    "01_finetune_ortmodule",
    "02_eager_vs_ortmodule",
    "03_export_and_fusion",
    "04_quantization_drift",
    "05_audit_your_own_model",
]
CELL_TIMEOUT_S = 300

# Small parameters per notebook (RUNS is added by the test: a temporary folder).
SMALL: dict[str, dict[str, Any]] = {
    "00_tour": {"MAX_STEPS": 4, "N_BOOT": 100, "RUN_ALL": True},
    "01_finetune_ortmodule": {"MAX_STEPS": 4},
    "02_eager_vs_ortmodule": {"MAX_STEPS": 4},
    "03_export_and_fusion": {"FUSION_PRESET": "inspect_only"},
    "04_quantization_drift": {"N_BOOT": 100},
    "05_audit_your_own_model": {"N_BOOT": 100, "MAX_TRAIN": 256, "MAX_EVAL": 128},
}

# What must hold at the end of each notebook: its panels ran and kept a result.
CHECKS: dict[str, str] = {
    "00_tour": """
assert all(s.done for s in wb.steps), [s.label(i + 1) for i, s in enumerate(wb.steps)]
assert all(s.panel.error is None for s in wb.steps)
ort = wb.train.result.run("ortmodule")
assert ort.executed_in_onnxruntime, ort.reason + chr(10) + ort.error
""",
    "01_finetune_ortmodule": """
assert panel.error is None and panel.result is comparison
ort = comparison.run("ortmodule")
assert ort.executed_in_onnxruntime, ort.reason + chr(10) + ort.error
""",
    "02_eager_vs_ortmodule": """
assert train.error is None and compare.error is None
assert [r.backend.value for r in compare.result.runs] == list(BACKENDS)
assert compare.result.ratios, "ratios against the eager baseline: " + str(compare.result.notes)
""",
    "03_export_and_fusion": """
assert graph.error is None and graph.result is report
assert graph.export_result.validation.passed, graph.export_result.validation.message
""",
    "04_quantization_drift": """
assert quant.error is None and set(quant.results) == {result.name, kept.name}
assert kept.excluded_nodes
""",
    "05_audit_your_own_model": """
assert graph.error is None and quant.error is None and quant.result is result
slices = [d.slice for d in result.report.slices]
for column in SLICE_COLUMNS:
    assert any(s.startswith(column + "=") for s in slices), (column, slices)
""",
}


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def inject(nb: nbformat.NotebookNode, values: dict[str, Any]) -> None:
    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    source = "# injected by tests/notebooks\n" + "\n".join(f"{k} = {v!r}" for k, v in values.items())
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))


def test_the_six_notebooks_exist() -> None:
    assert [p.stem for p in notebook_paths()] == EXPECTED
    assert set(SMALL) == set(EXPECTED) == set(CHECKS)


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"{path.name}: cells {dirty} have outputs; clear them before committing (Edit > Clear Outputs of All Cells)"
    assert "widgets" not in nb.metadata, f"{path.name} carries saved widget state (and plotly.js): clear it"


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_one_parameters_cell_and_teaching_text(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: exactly one cell must be tagged 'parameters', found {len(tagged)}"
    assert tagged[0].cell_type == "code"
    names = {line.split("=")[0].strip() for line in tagged[0].source.splitlines() if "=" in line and not line.startswith("#")}
    assert set(SMALL[path.stem]) <= names, f"the test sets parameters the notebook does not declare: {set(SMALL[path.stem]) - names}"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), "a title first"
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "What to look at" in text or "What the numbers mean" in text
    assert "What to try next" in text


def kernel_env(runs_root: Path) -> dict[str, str]:
    """The kernel's environment: this one, with two changes.

    - no ``PYTEST_CURRENT_TEST``: ipykernel switches off its file-descriptor capture when it sees it,
      so the kernel would differ from one started by JupyterLab (which never has that variable).
      (ORTModule copes either way since ``workbench.train.allow_streams_without_fd``; before it,
      ``sys.stdout.fileno()`` raising broke ORTModule's first step.)
    - the repository first on ``PYTHONPATH`` (a stale editable install could otherwise resolve
      ``widgets`` as a namespace package from outside the repository).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["WORKBENCH_RUNS"] = str(runs_root)
    return env


def own_data_file(folder: Path) -> Path:
    """A user-style CSV: other column names, string labels and a slice column (from the quick reviews)."""
    from workbench.data import DataConfig, load_data

    dd = load_data(DataConfig.quick())
    rows = []
    for split in ("train", "validation", "test"):
        for i, ex in enumerate(dd[split]):
            rows.append({"review": ex["text"], "sentiment": "positive" if ex["label"] else "negative",
                         "source": "web" if i % 2 else "print"})
    import pandas as pd

    path = folder / "my_reviews.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_notebook_executes(path: Path, tmp_path: Path, output_dir: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    values = {**SMALL[path.stem], "RUNS": str(tmp_path / "runs")}
    if path.stem == "05_audit_your_own_model":
        values.update(DATA=str(own_data_file(tmp_path)), TEXT_COLUMN="review", LABEL_COLUMN="sentiment",
                      SLICE_COLUMNS=("source",))
    inject(nb, values)
    nb.cells.append(nbformat.v4.new_code_cell(CHECKS[path.stem].strip(), metadata={"tags": ["test-checks"]}))

    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.widget_registry = {}
    try:
        client.execute(env=kernel_env(tmp_path / "runs"))
    finally:
        # kept for a person to read when it fails (outputs only; widget state stripped)
        nb.metadata.pop("widgets", None)
        (output_dir / f"{path.stem}.executed.ipynb").write_text(json.dumps(nb, indent=1))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
