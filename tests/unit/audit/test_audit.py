"""`workbench audit` on a classifier fine-tuned elsewhere: every row scored, slices present, exit
codes a CI job can use, bad input refused fast with one line and exit code 2, and summary.json
matching its schema. The model is a tiny BERT the test fine-tunes itself (3 named classes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers.audit_fixtures import CLASSES, make_rows, train_tiny_classifier, write_csv

REPO = Path(__file__).resolve().parents[3]
N_ROWS = 300


@pytest.fixture(scope="module")
def audit_model(tmp_path_factory) -> Path:
    return train_tiny_classifier(tmp_path_factory.mktemp("audit-model") / "classifier")


@pytest.fixture(scope="module")
def audit_csv(tmp_path_factory) -> Path:
    return write_csv(tmp_path_factory.mktemp("audit-data") / "reviews.csv", make_rows(N_ROWS, seed=5))


def _audit_args(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["audit", "--model", str(model), "--data", str(data), "--text-column", "review", "--label-column", "sentiment",
            "--slice-column", "channel", "--out", str(out), "--quick", *extra]


@pytest.fixture(scope="module")
def audit_meets(audit_model, audit_csv, tmp_path_factory):
    """One audit with a budget any sane INT8 variant meets (99 points, speed guard off): (exit code, out folder, summary).

    Run as a user would, from another folder with relative paths: a relative --out once broke the
    static preset (pre-processing resolved it against its scratch folder)."""
    from workbench.cli import main

    out = tmp_path_factory.mktemp("audit-meets")
    cwd = out.parent
    rel = [Path(os.path.relpath(p, cwd)) for p in (audit_model, audit_csv, out)]
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        # --min-speedup 0: the tiny model is not faster in INT8, and this audit is about accuracy (the guard: below)
        code = main(_audit_args(*rel, "--presets", "dynamic", "static-minmax", "--budget-overall", "0.99", "--budget-slice", "0.99",
                                "--min-speedup", "0"))
    finally:
        os.chdir(previous)
    return code, out, json.loads((out / "summary.json").read_text())


def test_audit_scores_every_row_and_meets_a_loose_budget(audit_meets):
    code, out, s = audit_meets
    assert code == 0, s["verdict"]
    d = s["data"]
    assert d["rows_in_file"] == N_ROWS and d["rows_skipped"] == 0
    # every row is scored except the held-out calibration rows, which are named
    assert d["rows_scored"] + d["calibration_count"] == N_ROWS
    assert len(d["calibration_rows"]) == d["calibration_count"] > 0
    assert d["calibration_count"] <= N_ROWS // 5 and d["calibration_count"] % 8 == 0
    assert d["label_format"] == "names" and d["class_names"] == list(CLASSES)
    for q in s["quantization"]:
        assert q["overall"]["n"] == d["rows_scored"]
    scored_rows = [json.loads(line)["row"] for line in (out / "quantize" / "baseline" / "test_examples.jsonl").read_text().splitlines()]
    assert sorted(scored_rows + d["calibration_rows"]) == list(range(N_ROWS))
    names = {x["name"] for x in s["slices"]}
    assert {"channel=web", "channel=email", "negation", "class:negative", "class:neutral", "class:positive"} <= names
    web = sum(1 for r in make_rows(N_ROWS, seed=5) if r["channel"] == "web")
    assert next(x["n"] for x in s["slices"] if x["name"] == "channel=web") == web - sum(
        1 for r in d["calibration_rows"] if make_rows(N_ROWS, seed=5)[r]["channel"] == "web")
    assert s["verdict"]["status"] == "meets_budget" and s["verdict"]["chosen"] in {q["name"] for q in s["quantization"]}
    assert s["export"]["validation"]["passed"]
    assert {"dynamic", "static-minmax"} == {q["name"] for q in s["quantization"]}
    assert (out / "report.html").is_file()
    # the stages under the registry's names (its audit route), in audit.json and summary.json alike
    from workbench.workflows.stages import AUDIT_STAGES

    assert [x["name"] for x in s["stages"]] == list(AUDIT_STAGES) and all(x["status"] == "ok" for x in s["stages"])
    assert [x["name"] for x in json.loads((out / "audit.json").read_text())["stages"]] == list(AUDIT_STAGES[:-1])


def test_summary_matches_its_schema(audit_meets):
    import jsonschema

    from workbench.report import SCHEMA_VERSION, SUMMARY_SCHEMA, validate_summary

    _, _, s = audit_meets
    assert s["schema_version"] == SCHEMA_VERSION
    jsonschema.validate(s, SUMMARY_SCHEMA)
    validate_summary(s)
    broken = dict(s, verdict={**s["verdict"], "exit_code": 7})
    with pytest.raises(ValueError, match="verdict/exit_code"):
        validate_summary(broken)
    # one schema for every task: what the classification task must hold is required of it, not of an embedding summary
    assert s["task"] == "classification" and s["budget"]["metric"] == "accuracy"
    without_rows = {k: v for k, v in s.items() if k != "quantization"}
    with pytest.raises(ValueError, match="'quantization' is a required property"):
        validate_summary(without_rows)
    with pytest.raises(ValueError, match="'(model|variants|evaluation|speed|settings)' is a required property"):
        validate_summary({**without_rows, "task": "embedding"})


def test_a_variant_within_budget_but_under_the_speed_guard_exits_3(audit_meets, audit_model, audit_csv, tmp_path):
    """A speed guard no INT8 graph can pass (100x faster than FP32 beyond doubt: INT8 arithmetic is at most a few
    times FP32's on any CPU) with budgets any sane variant meets: exit 3, the FP32 graph kept, and the verdict
    says the guard, not the accuracy, stopped them."""
    from workbench.cli import main

    code = main(_audit_args(audit_model, audit_csv, tmp_path, "--presets", "dynamic", "--budget-overall", "0.99",
                            "--budget-slice", "0.99", "--min-speedup", "100"))
    s = json.loads((tmp_path / "summary.json").read_text())
    assert code == 3, s["verdict"]
    assert s["verdict"]["status"] == "no_candidate_meets_budget" and s["verdict"]["chosen"] is None
    assert s["verdict"]["reason"] == "speed_guard" and "none is at least 100.00x faster" in s["verdict"]["text"]
    assert s["search"]["chosen"].endswith("/fp32")
    assert s["data"]["calibration_count"] == 0 and s["data"]["rows_scored"] == N_ROWS  # no static preset: nothing held out


def test_labels_given_as_ids_are_mapped(audit_model, tmp_path):
    from workbench.audit import AuditConfig, check_model, prepare_data

    path = write_csv(tmp_path / "ids.csv", make_rows(60, seed=1), label_as_id=True)
    cfg = AuditConfig(data=str(path), text_column="review", label_column="sentiment", presets=("dynamic",))
    prepared = prepare_data(cfg, check_model(str(audit_model)))
    assert prepared.facts["label_format"] == "ids"
    want = [CLASSES.index(r["sentiment"]) for r in make_rows(60, seed=1)]
    assert list(prepared.scored["label"]) == want



def test_calibration_holds_out_at_most_128_rows_and_a_fifth(audit_model, tmp_path):
    """docs/audit.md's 'at most 128 rows and a fifth of the file': a big file is capped at 128, a small
    one at a fifth (rounded down to batches of 8); dynamic presets hold nothing out."""
    from workbench.audit import AuditConfig, check_model, prepare_data

    model = check_model(str(audit_model))
    for n, want in ((1000, 128), (300, 56)):  # 1000 / 5 = 200 -> the 128 cap; 300 / 5 = 60 -> 56 (batches of 8)
        path = write_csv(tmp_path / f"r{n}.csv", make_rows(n, seed=2))
        cfg = AuditConfig(data=str(path), text_column="review", label_column="sentiment", presets=("dynamic", "static-minmax"))
        facts = prepare_data(cfg, model).facts
        assert facts["calibration_count"] == len(facts["calibration_rows"]) == want, n
        assert facts["rows_scored"] == n - want
    cfg = AuditConfig(data=str(path), text_column="review", label_column="sentiment", presets=("dynamic",))
    assert prepare_data(cfg, model).facts["calibration_count"] == 0


def test_the_model_folder_is_the_stage_input(audit_meets, audit_model, audit_csv, tmp_path):
    """run_audit(model, AuditConfig, out): the folder is the input, not a config field; audit.json and
    summary.json still name it as given; check_inputs takes the same arguments and writes nothing heavy."""
    from workbench.audit import AuditConfig, AuditInputError, check_inputs

    _, out, s = audit_meets
    saved = json.loads((out / "audit.json").read_text())
    assert Path(saved["config"]["model"]).name == audit_model.name == Path(s["config"]["model"]).name
    assert saved["model"]["folder"] == str(audit_model.resolve())
    with pytest.raises(TypeError):
        AuditConfig(model=str(audit_model), data=str(audit_csv))  # the model is the input, not a setting
    cfg = AuditConfig(data=str(audit_csv), text_column="review", label_column="sentiment", presets=("dynamic",))
    checked = check_inputs(audit_model, cfg, tmp_path / "out")
    assert checked.out_dir == tmp_path / "out" and checked.model.class_names == list(CLASSES)
    assert checked.data.facts["rows_scored"] == N_ROWS and list((tmp_path / "out").iterdir()) == []
    with pytest.raises(AuditInputError, match="model folder not found"):
        check_inputs(tmp_path / "no-such-model", cfg, tmp_path / "out")

# ---- bad input: one line, exit code 2, before any heavy work -----------------------------------
def _bad_inputs(model: Path, csv: Path, tmp: Path) -> dict:
    base_model = tmp / "base-encoder"
    base_model.mkdir()
    cfg = json.loads((model / "config.json").read_text())
    (base_model / "config.json").write_text(json.dumps({**cfg, "architectures": ["BertModel"]}))
    gpt = tmp / "gpt"
    gpt.mkdir()
    (gpt / "config.json").write_text(json.dumps({"architectures": ["GPT2ForSequenceClassification"], "model_type": "gpt2"}))
    unknown = tmp / "unknown_labels.csv"
    pd.DataFrame({"review": ["good", "bad", "meh"], "sentiment": ["positive", "awful", "so-so"], "channel": ["a", "b",
                                                                                                             "a"]}).to_csv(unknown,
                                                                                                                           index=False)
    empty = tmp / "empty.csv"
    empty.write_text("")
    garbled = tmp / "garbled.parquet"
    garbled.write_bytes(b"this is not parquet")
    return {
        "no such folder": (["--model", str(tmp / "nope")], "model folder not found"),
        "a built-in name": (["--model", "minilm"], "'minilm' is a built-in name of train, export and the demo"),
        "not a classifier": (["--model", str(base_model)], "not a sequence-classification model"),
        "unsupported architecture": (["--model", str(gpt)], "not one the exporter handles"),
        "unknown labels": (["--data", str(unknown)], "does not know: ['awful', 'so-so']"),
        "missing columns": (["--text-column", "body"], "['body'] not in"),
        "empty file": (["--data", str(empty)], "is empty"),
        "unreadable file": (["--data", str(garbled)], "could not read"),
    }


def test_bad_inputs_exit_2_with_one_line_before_any_export(audit_model, audit_csv, tmp_path, capsys):
    from workbench.cli import main

    cases = _bad_inputs(audit_model, audit_csv, tmp_path)
    for name, (override, expected) in cases.items():
        out = tmp_path / f"out-{name.replace(' ', '-')}"
        args = _audit_args(audit_model, audit_csv, out)
        for i in range(0, len(override), 2):
            args[args.index(override[i]) + 1] = override[i + 1]
        code = main(args)
        err = capsys.readouterr().err.strip()
        assert code == 2, (name, err)
        assert expected in err, (name, err)
        assert len(err.splitlines()) == 1 and err.startswith("workbench: error: "), (name, err)
        assert not out.exists(), f"{name}: the output folder was created before the input was checked"
    # both sets are listed for unknown labels, and the columns found for missing columns
    main(_audit_args(audit_model, tmp_path / "unknown_labels.csv", tmp_path / "x"))
    err = capsys.readouterr().err
    assert "'negative'" in err and "'neutral'" in err and "'positive'" in err
    args = _audit_args(audit_model, audit_csv, tmp_path / "y")
    args[args.index("--text-column") + 1] = "body"
    main(args)
    err = capsys.readouterr().err
    assert "['review', 'sentiment', 'channel', 'id']" in err


def test_unwritable_out_is_bad_input(audit_model, audit_csv, tmp_path, capsys, monkeypatch):
    from workbench.cli import main

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code = main(_audit_args(audit_model, audit_csv, blocker / "out"))
    err = capsys.readouterr().err
    assert code == 2 and "cannot write the output folder" in err
    # without --out the run folder goes under runs/ (WORKBENCH_RUNS): the same one line when it cannot be made
    import workbench.runs as runs

    monkeypatch.setattr(runs, "DEFAULT_ROOT", blocker / "runs")
    args = _audit_args(audit_model, audit_csv, tmp_path)
    del args[args.index("--out"):args.index("--out") + 2]
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "cannot write the output folder" in err and str(blocker) in err, err


def test_audit_help_documents_exit_codes():
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "audit", "--help"], capture_output=True, text=True,
                          cwd="/", env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for code in ("0  a quantized", "3  no quantized", "2  bad input", "1  a step failed"):
        assert code in proc.stdout


def test_demo_runs_folder_that_cannot_be_created(tmp_path, capsys):
    from workbench.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["demo", "--quick", "--runs", str(blocker / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "cannot create a run folder" in err and str(blocker) in err


def test_the_cli_exits_1_when_a_step_fails(audit_model, audit_csv, tmp_path, monkeypatch, capsys):
    """docs/audit.md's exit code 1: the static preset's quantization fails (the real function, made to
    raise for static mode) while the dynamic one meets the budget: the command exits 1, the report
    is written and names the failed step."""
    import workbench.quant as quant
    from workbench.cli import main

    real = quant.run_quantization

    def static_fails(source, cfg, *a, **k):
        if cfg.mode.value == "static":
            raise quant.QuantizeError("static pre-processing failed (made to fail by the test)")
        return real(source, cfg, *a, **k)

    monkeypatch.setattr(quant, "run_quantization", static_fails)
    out = tmp_path / "audit"
    code = main(_audit_args(audit_model, audit_csv, out, "--presets", "dynamic", "static-minmax", "--budget-overall", "0.99",
                            "--budget-slice", "0.99", "--min-speedup", "0"))
    assert code == 1, capsys.readouterr()
    s = json.loads((out / "summary.json").read_text())
    assert s["verdict"]["exit_code"] == 1 and "made to fail by the test" in s["verdict"]["text"]


def test_a_failed_step_makes_the_verdict_incomplete_in_summary_json_too(audit_meets):
    """A static preset that failed while a dynamic one met the budget: the audit exits 1, and
    summary.json must say the same (a CI job may read either), naming the failed step."""
    from workbench.report import EXIT_INCOMPLETE, build_summary, inputs_from_run

    _, out, _ = audit_meets
    stages = [{"name": "doctor", "status": "ok", "seconds": 1.0},
              {"name": "quantize", "status": "failed", "seconds": 2.0, "message": "QuantizeError: static pre-processing failed"}]
    s = build_summary(inputs_from_run(out, kind="audit", stages=stages, budget_overall=0.99, budget_per_slice=0.99))
    v = s["verdict"]
    assert v["status"] == "incomplete" and v["exit_code"] == EXIT_INCOMPLETE
    assert "quantize (QuantizeError: static pre-processing failed)" in v["text"] and "Of what did run:" in v["text"]
    ok = build_summary(inputs_from_run(out, kind="audit", stages=stages[:1], budget_overall=0.99, budget_per_slice=0.99))
    assert ok["verdict"]["status"] == "meets_budget" and ok["verdict"]["exit_code"] == 0
