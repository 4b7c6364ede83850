"""Every notebook in notebooks/ executes, top to bottom, with small parameters, and is committed
without outputs; run with its committed defaults (MiniLM, the workshop checkpoint: marked slow) it
writes nothing to stderr.

Parameters are injected papermill-style: a cell tagged ``injected-parameters`` is inserted after
the cell tagged ``parameters``. Each notebook then gets a final cell that checks its panels really
ran (a result, no error), so a notebook that only displays a panel cannot pass by doing nothing.
``client.widget_registry = {}`` keeps nbclient from stalling on Output widgets (checked here).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

# The notebooks that start from the workshop's fine-tuned checkpoint (workbench.teaching.workshop): tests/conftest.py
# groups their committed-defaults runs, which build that checkpoint.
from tests.conftest import CHECKPOINT_NOTEBOOKS as NEEDS_CHECKPOINT

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
EXPECTED = [
    "00_tour",
    "01_finetune_ortmodule",
    "02_eager_vs_ortmodule",
    "03_export_and_fusion",
    "04_quantization_drift",
    "05_audit_your_own_model",
    "06_on_device_training",
    "07_quantize_embedding_model",
]
CELL_TIMEOUT_S = 300
DEFAULTS_CELL_TIMEOUT_S = 3600  # committed defaults: the tour trains MiniLM twice inside one cell (RUN_ALL); a guard, not a budget

# Small parameters per notebook (RUNS is added by the test: a temporary folder; the notebooks in
# NEEDS_CHECKPOINT get MODEL = the tiny_checkpoint fixture's folder, so no fine-tuning runs here).
SMALL: dict[str, dict[str, Any]] = {
    "00_tour": {"MODEL": "tiny", "PRESET": "quick", "MAX_STEPS": 4, "N_BOOT": 100, "RUN_ALL": True},
    "01_finetune_ortmodule": {"MODEL": "tiny", "PRESET": "quick", "MAX_STEPS": 4},
    "02_eager_vs_ortmodule": {"MODEL": "tiny", "PRESET": "quick", "MAX_STEPS": 4},
    "03_export_and_fusion": {"MODEL": "tiny", "FUSION_PRESET": "inspect_only"},
    "04_quantization_drift": {"MODEL": "tiny", "N_BOOT": 100, "MAX_EVAL": 128},
    "05_audit_your_own_model": {"MODEL": "tiny", "N_BOOT": 100, "MAX_TRAIN": 256, "MAX_EVAL": 128},
    "06_on_device_training": {"MODEL": "tiny", "TRAINABLE": "last", "STEPS": 3, "LR": 1e-3, "BATCH_SIZE": 8, "THREADS": 1,
                              "MEASURE_MEMORY": False},
    "07_quantize_embedding_model": {"PRESETS": ("dynamic",), "MAX_QUERIES": 4, "MAX_DOCS": 30, "N_BOOT": 100,
                                    "TIME_SPEED": False},
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
r = compare.result.ratios[0]
assert r.interleaved == ISOLATE and r.like_for_like and r.baseline_settings, r
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
    "06_on_device_training": """
assert panel.error is None and panel.result is result
assert result.loss_parity and result.validation.passed, (result.max_loss_diff, result.validation.message)
assert len(result.ondevice_losses) == STEPS
""",
    "07_quantize_embedding_model": """
assert panel.error is None and panel.result is result
assert [v.name for v in result.evaluation.variants] == ["fused", *PRESETS]
assert abs(result.evaluation.fp32_metrics["ndcg@10"] - result.evaluation.reference_metrics["ndcg@10"]) <= 1e-3
""",
}


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def inject(nb: nbformat.NotebookNode, values: dict[str, Any]) -> None:
    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    source = "# injected by tests/notebooks\n" + "\n".join(f"{k} = {v!r}" for k, v in values.items())
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))


def test_every_notebook_exists_and_has_its_checks() -> None:
    assert [p.stem for p in notebook_paths()] == EXPECTED
    assert set(SMALL) == set(EXPECTED) == set(CHECKS) == set(REAL_CHECKS)


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


def kernel_env(runs_root: Path, home: Path | None = None) -> dict[str, str]:
    """The kernel's environment: this one, with two changes.

    - no ``PYTEST_CURRENT_TEST``: ipykernel switches off its file-descriptor capture when it sees it,
      so the kernel would differ from one started by JupyterLab (which never has that variable).
      (ORTModule copes either way since ``workbench.train.allow_streams_without_fd``; before it,
      ``sys.stdout.fileno()`` raising broke ORTModule's first step.)
    - the repository first on ``PYTHONPATH`` (a stale editable install could otherwise resolve
      ``widgets`` as a namespace package from outside the repository).

    ``home`` sets ``WORKBENCH_HOME`` (where the workshop checkpoint is cached).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["WORKBENCH_RUNS"] = str(runs_root)
    if home is not None:
        env["WORKBENCH_HOME"] = str(home)
    return env


def stderr_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """Every stderr text the notebook's cells printed (the red boxes a learner would see)."""
    return [f"cell {i}: {o.text}" for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.outputs if o.output_type == "stream" and o.name == "stderr"]


def cell_seconds(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    """How long each code cell ran (nbclient's execution timestamps), with its first line."""
    from datetime import datetime

    out = []
    for i, c in enumerate(nb.cells):
        t = c.metadata.get("execution", {}) if c.cell_type == "code" else {}
        if "iopub.execute_input" in t and "shell.execute_reply" in t:
            start, end = (datetime.fromisoformat(t[k].replace("Z", "+00:00")) for k in ("iopub.execute_input", "shell.execute_reply"))
            out.append({"cell": i, "first_line": c.source.splitlines()[0] if c.source else "",
                        "seconds": round((end - start).total_seconds(), 1)})
    return out


def exercise_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """The text the exercise check cells showed (``check_*`` calls from workbench.teaching.exercises)."""
    texts = []
    for c in nb.cells:
        if c.cell_type == "code" and "exercises import" in c.source:
            for o in c.outputs:
                texts.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return texts


def own_data_file(folder: Path) -> Path:
    """A user-style CSV: other column names, string labels and a slice column (from the quick reviews).
    The labels are the classes the checkpoint was fine-tuned with (rotten, fresh): data labelled with
    classes the model does not know is refused, so "your data" speaks the model's classes."""
    from workbench.data.load import DataConfig, load_data

    dd = load_data(DataConfig.quick())
    rows = []
    for split in ("train", "validation", "test"):
        for i, ex in enumerate(dd[split]):
            rows.append({"review": ex["text"], "sentiment": "fresh" if ex["label"] else "rotten",
                         "source": "web" if i % 2 else "print"})
    import pandas as pd

    path = folder / "my_reviews.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.slow  # a long run for make test-fast: 10-21 s each on 2 cores
@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_notebook_executes(path: Path, tmp_path: Path, output_dir: Path, request) -> None:
    nb = nbformat.read(path, as_version=4)
    values = {**SMALL[path.stem], "RUNS": str(tmp_path / "runs")}
    if path.stem in NEEDS_CHECKPOINT:
        values["MODEL"] = str(request.getfixturevalue("tiny_checkpoint"))
    if path.stem == "05_audit_your_own_model":
        values.update(DATA=str(own_data_file(tmp_path)), TEXT_COLUMN="review", LABEL_COLUMN="sentiment",
                      SLICE_COLUMNS=("source",))
    inject(nb, values)
    nb.cells.append(nbformat.v4.new_code_cell(CHECKS[path.stem].strip(), metadata={"tags": ["test-checks"]}))

    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.widget_registry = {}
    try:
        client.execute(env=kernel_env(tmp_path / "runs", tmp_path / "home"))
    finally:
        # kept for a person to read when it fails (outputs only; widget state stripped)
        nb.metadata.pop("widgets", None)
        (output_dir / f"{path.stem}.executed.ipynb").write_text(json.dumps(nb, indent=1))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert not stderr_outputs(nb)
    checks = exercise_outputs(nb)
    assert checks and all("not yet" in t for t in checks), checks  # unattempted exercises say so, and pass


# With its committed defaults the tour only shows the stepper and waits for the learner to press
# Train, Export and fuse, Quantize. The learner's next minutes are what the defaults test is for, so
# it presses them all: RUN_ALL = True calls the same panels' run() in the cell (the buttons call it in
# a thread), and whatever they print lands in the cell's outputs, where the test reads it. Every
# other parameter keeps its committed value.
PRESS_EVERY_BUTTON: dict[str, dict[str, Any]] = {"00_tour": {"RUN_ALL": True}}

# With the committed defaults, beyond CHECKS: the learner sees the real thing. A random or merely
# pre-trained classifier scores about 0.5 on the reviews; the demo recipe's MiniLM about 0.77
# (finetuned.json). MiniLM has 6 encoder layers, each fused to one Attention.
REAL = "assert {acc} > 0.7, ('accuracy of the FP32 model', {acc})\n"
REAL_CHECKS: dict[str, str] = {
    "00_tour": REAL.format(acc="wb.quant.result.report.overall.reference.accuracy")
    + "assert wb.graph.result.fused_op_counts.get('Attention') == 6, wb.graph.result.fused_op_counts\n",
    "01_finetune_ortmodule": "assert ort.final_accuracy > 0.7, ort.final_accuracy\n",
    "02_eager_vs_ortmodule": "assert all(r.final_accuracy > 0.7 for r in compare.result.runs), [r.final_accuracy for r in "
                             "compare.result.runs]\n",
    "03_export_and_fusion": "assert 'finetuned' in str(graph.export_result.model_source), graph.export_result.model_source\n"
    "assert report.num_layers == 6 and report.fused_op_counts.get('Attention') == 6, report.fused_op_counts\n",
    "04_quantization_drift": REAL.format(acc="result.report.overall.reference.accuracy"),
    "05_audit_your_own_model": REAL.format(acc="result.report.overall.reference.accuracy"),
    "06_on_device_training": "assert 'finetuned' in str(result.model_source), result.model_source\n"
    "assert result.artifacts.total_parameters > 20_000_000, result.artifacts.total_parameters  # MiniLM: 22.7 M\n",
    "07_quantize_embedding_model": "assert result.evaluation.fp32_metrics['ndcg@10'] > 0.3, result.evaluation.fp32_metrics\n"
    "assert result.speed is not None and {s.batch for s in result.speed.speeds} == {1, 32}, result.speed\n",
}


@pytest.fixture(scope="session")
def workshop_home() -> Path:
    """The workshop cache the notebooks use: ``$WORKBENCH_HOME`` or ~/.cache/ort-workbench."""
    from workbench.teaching.workshop import workbench_home

    return workbench_home()


@pytest.fixture(scope="session")
def workshop_checkpoint(workshop_home: Path) -> Path:
    """MiniLM fine-tuned by the demo's recipe in the workshop cache, built (once) through the same
    function the notebooks call, so a checkpoint made by `make workshop` is reused and one made here
    serves the next session too."""
    from workbench.teaching.workshop import ensure_finetuned

    return ensure_finetuned("minilm")


@pytest.mark.slow
@pytest.mark.heavy  # 40-270 s each on 2 cores
@pytest.mark.timeout(2 * DEFAULTS_CELL_TIMEOUT_S)  # the first one may also fine-tune the workshop checkpoint
@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_committed_defaults_write_no_stderr(path: Path, tmp_path: Path, output_dir: Path, workshop_home: Path, request) -> None:
    """What a learner sees with the committed parameters: MiniLM, the built-in reviews, the workshop
    checkpoint. No error, and nothing on stderr (a red box in JupyterLab) that the notebook does
    not print on purpose: none of them prints to stderr on purpose. The time each notebook took
    is written to ``<output_dir>/timing.json`` (read by notebooks/README.md's table; never asserted)."""
    import time

    if path.stem in NEEDS_CHECKPOINT:
        request.getfixturevalue("workshop_checkpoint")  # fine-tuned here, before the clock starts
    nb = nbformat.read(path, as_version=4)
    if path.stem in PRESS_EVERY_BUTTON:
        inject(nb, PRESS_EVERY_BUTTON[path.stem])
    # the kernel's peak memory (what a laptop needs) and CPU seconds (user + system, kernel and its
    # children: on a busy machine a better guide to a quiet laptop's minutes than the wall time), for
    # the workshop plan; printed to stdout, before the checks so that it is measured when a check fails
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json as _j, resource as _r\n"
        "_s, _c = _r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN)\n"
        "print('PEAK_RSS', _j.dumps({'kernel_mib': _s.ru_maxrss / 1024, 'children_mib': _c.ru_maxrss / 1024, "
        "'cpu_s': round(_s.ru_utime + _s.ru_stime + _c.ru_utime + _c.ru_stime, 1)}))", metadata={"tags": ["test-measure"]}))
    nb.cells.append(nbformat.v4.new_code_cell(CHECKS[path.stem].strip() + "\n" + REAL_CHECKS[path.stem],
                                              metadata={"tags": ["test-checks"]}))
    client = NotebookClient(nb, timeout=DEFAULTS_CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.widget_registry = {}
    t0 = time.perf_counter()
    try:
        client.execute(env=kernel_env(tmp_path / "runs", workshop_home))
    finally:
        seconds = time.perf_counter() - t0
        nb.metadata.pop("widgets", None)
        (output_dir / f"{path.stem}.executed.ipynb").write_text(json.dumps(nb, indent=1))
        peak = [json.loads(o.text.split("PEAK_RSS", 1)[1]) for c in nb.cells if "test-measure" in c.metadata.get("tags", [])
                for o in c.get("outputs", []) if o.output_type == "stream" and "PEAK_RSS" in o.text]
        (output_dir / "timing.json").write_text(json.dumps({"notebook": path.stem, "seconds": round(seconds, 1),
                                                            "peak_rss_mib": peak[0] if peak else None,
                                                            "load_average": os.getloadavg(),
                                                            "cells": cell_seconds(nb)}, indent=1))
    errors = [f"{o.ename}: {o.evalue}" for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert not stderr_outputs(nb), "\n".join(stderr_outputs(nb))
    checks = exercise_outputs(nb)
    assert checks and all("not yet" in t for t in checks), checks
