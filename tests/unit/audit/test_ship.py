"""The audit ships the graph its verdict keeps: ``chosen/`` holds the graph, tokenizer.json, labels.json,
settings.json and a predict.py that needs only onnxruntime, tokenizers and numpy. predict.py, run in a fresh
virtual environment with only those three installed, gives the labels the audit's INT8 predictions gave
(``quantize/<chosen>/quantize.json``: the report's ``candidate_pred``, row by row of the scored texts)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.audit_fixtures import CLASSES, make_rows, train_tiny_classifier, write_csv
from helpers.venvs import clean_venv, pip_install

N_ROWS = 120


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """One audit of the tiny classifier with budgets any sane INT8 variant meets (speed guard off): the run folder."""
    from workbench.cli import main

    model = train_tiny_classifier(tmp_path_factory.mktemp("ship-model") / "classifier")
    data = write_csv(tmp_path_factory.mktemp("ship-data") / "reviews.csv", make_rows(N_ROWS, seed=7))
    out = tmp_path_factory.mktemp("ship-audit")
    code = main(["audit", "--model", str(model), "--data", str(data), "--text-column", "review", "--label-column", "sentiment",
                 "--out", str(out), "--quick", "--presets", "dynamic", "--budget-overall", "0.99", "--budget-slice", "0.99",
                 "--min-speedup", "0"])
    assert code == 0, (out / "summary.json").read_text()
    return out


def audit_predictions(run: Path) -> tuple[list[str], list[str], np.ndarray]:
    """The scored texts, the chosen INT8 variant's label for each (as the audit scored them) and its confidence
    (the probability of that label)."""
    summary = json.loads((run / "summary.json").read_text())
    chosen = summary["verdict"]["chosen"]
    result = json.loads((run / "quantize" / chosen / "quantize.json").read_text())
    texts = [json.loads(line)["text"] for line in (run / "quantize" / "baseline" / "test_examples.jsonl").read_text().splitlines()]
    labels = [CLASSES[i] for i in result["report"]["candidate_pred"]]
    assert len(labels) == len(texts) == summary["data"]["rows_scored"]
    return texts, labels, np.asarray(result["report"]["candidate_confidence"])


def load_predict(folder: Path):
    spec = importlib.util.spec_from_file_location(f"shipped_predict_{abs(hash(str(folder)))}", folder / "predict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chosen_holds_the_int8_graph_and_what_it_needs(audited):
    import onnx
    import onnxruntime

    chosen = audited / "chosen"
    settings = json.loads((chosen / "settings.json").read_text())
    verdict = json.loads((audited / "summary.json").read_text())["verdict"]
    assert settings["precision"] == "int8" and settings["variant"] == verdict["chosen"] and not settings["fp32_graph_kept"]
    assert (chosen / "model.onnx").read_bytes() == next((audited / "quantize" / verdict["chosen"]).glob("*.onnx")).read_bytes()
    assert json.loads((chosen / "labels.json").read_text()) == list(CLASSES)
    assert settings["max_length"] == 128 and settings["onnxruntime_version"] == onnxruntime.__version__
    assert [i["name"] for i in settings["inputs"]] == [i.name for i in onnx.load(str(chosen / "model.onnx")).graph.input]
    assert all(i["dtype"] == "int64" for i in settings["inputs"])
    assert settings["padding"]["side"] == "right" and settings["truncation"]["max_length"] == 128
    # the session optimizers the graph asks to leave out (a fusion left out on purpose), which predict.py passes on
    from workbench.runtime.graphmeta import disabled_optimizers

    assert settings["disabled_optimizers"] == list(disabled_optimizers(chosen / "model.onnx"))
    assert 'disabled_optimizers=SETTINGS.get("disabled_optimizers")' in (chosen / "predict.py").read_text()
    # the ONNX Runtime operators, as the graph has them; the unfused export has none
    graph = onnx.load(str(chosen / "model.onnx"))
    own = sorted({n.op_type for n in graph.graph.node if n.domain == "com.microsoft"})
    assert own and settings["contrib_ops"] == own and settings["graph_kind"] == "fused"
    assert settings["unfused_export"] == "export/model.onnx"
    assert not [n for n in onnx.load(str(audited / settings["unfused_export"])).graph.node if n.domain.startswith("com.microsoft")]
    assert (chosen / "tokenizer.json").is_file() and settings["tokenizer_checked_on"] == N_ROWS
    stages = {s["name"]: s["status"] for s in json.loads((audited / "summary.json").read_text())["stages"]}
    assert stages["ship"] == "ok" and "id='chosen'" in (audited / "report.html").read_text()


def test_predict_py_gives_the_audits_int8_labels_in_this_process(audited):
    texts, want, confidence = audit_predictions(audited)
    predict = load_predict(audited / "chosen")
    rows = predict.predict(texts)
    assert [r["label"] for r in rows] == want
    assert all(abs(sum(r["probabilities"].values()) - 1) < 1e-6 for r in rows)
    # the same numbers, not only the same labels: each label's probability as the audit scored it
    np.testing.assert_allclose([r["probabilities"][r["label"]] for r in rows], confidence, atol=1e-4)


def test_with_no_int8_variant_chosen_the_fp32_graph_is_shipped(audited, tmp_path):
    """A search that kept FP32 ships the FP32 graph it measured, says so, and predict.py gives its labels."""
    from workbench.quant import load_search
    from workbench.quant.ship import ship_search

    search = load_search(audited / "search" / "search.json")
    fp32 = next(c for c in search.candidates if c.precision == "fp32")
    kept = dataclasses.replace(search, chosen=fp32.name)
    shipped = ship_search(kept, tmp_path / "chosen", unfused=audited / "export" / "model.onnx")
    settings = json.loads((tmp_path / "chosen" / "settings.json").read_text())
    assert shipped.precision == settings["precision"] == "fp32" and settings["fp32_graph_kept"]
    assert "FP32 graph" in settings["note"] and settings["quantization"] is None
    assert (tmp_path / "chosen" / "model.onnx").read_bytes() == (audited / "fusion" / "model_fused.onnx").read_bytes()
    texts, _, _ = audit_predictions(audited)
    fp32 = np.load(audited / "quantize" / "baseline" / "test_fp32_logits.npy")
    rows = load_predict(tmp_path / "chosen").predict(texts)
    assert [r["label"] for r in rows] == [CLASSES[i] for i in fp32.argmax(-1)]
    probs = np.exp(fp32 - fp32.max(-1, keepdims=True))
    np.testing.assert_allclose([list(r["probabilities"].values()) for r in rows], probs / probs.sum(-1, keepdims=True), atol=1e-4)


@pytest.mark.slow
@pytest.mark.wheel
def test_predict_py_runs_with_only_onnxruntime_tokenizers_and_numpy(audited, tmp_path):
    """A fresh venv with onnxruntime (the version the audit ran), tokenizers and numpy, nothing else asked for: predict.py,
    fed the scored texts on stdin from another folder, prints the audit's INT8 label for each; torch is not there."""
    texts, want, confidence = audit_predictions(audited)
    settings = json.loads((audited / "chosen" / "settings.json").read_text())
    py = clean_venv(tmp_path / "venv")
    pip_install(py, f"onnxruntime=={settings['onnxruntime_version']}", "tokenizers", "numpy")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    bare = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('torch'), u.find_spec('transformers'))"],
                          capture_output=True, text=True, cwd=outside, env=env, timeout=120)
    assert bare.returncode == 0 and bare.stdout.split() == ["None", "None"], bare.stdout + bare.stderr
    run = subprocess.run([str(py), str(audited / "chosen" / "predict.py")], input="\n".join(texts) + "\n", capture_output=True,
                         text=True, cwd=outside, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == want
    printed = [dict(cell.split("=") for cell in line.split("\t")[1:]) for line in lines]
    assert all(list(p) == list(CLASSES) for p in printed)
    np.testing.assert_allclose([float(p[label]) for p, label in zip(printed, want)], confidence, atol=1.5e-4)
    one = subprocess.run([str(py), str(audited / "chosen" / "predict.py"), texts[0]], capture_output=True, text=True,
                         cwd=outside, env=env, timeout=300)
    assert one.returncode == 0 and one.stdout.split("\t")[0] in CLASSES, one.stderr[-3000:]


def test_the_predict_template_imports_only_onnxruntime_tokenizers_numpy_and_the_standard_library():
    import ast

    from workbench.quant.ship import predict_template

    tree = ast.parse(predict_template())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported - set(sys.stdlib_module_names) - {"__future__"} == {"numpy", "onnxruntime", "tokenizers"}
