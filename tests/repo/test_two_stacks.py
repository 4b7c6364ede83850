"""The two stacks: folders saved by transformers 5 (tests/fixtures/v5, written by scripts/make_v5_fixtures.py on
the current stack) load on either stack or are refused in one line naming the fix; both of torch's exporters
work, TorchScript keeps ONNX Runtime's fusions and the fusion report says why a dynamo export fused no Attention;
`workbench doctor` names the stack; training commands refuse on the current stack."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from workbench.models.compat import NewerTransformersError, load_tokenizer, transformers_major
from workbench.doctor.checks import stack

V5 = Path(__file__).resolve().parents[1] / "fixtures" / "v5"
EXPECTED = json.loads((V5 / "expected.json").read_text())
FOLDERS = ("generic_fast", "bert_tokenizer")


def test_the_fixtures_were_really_saved_by_transformers_5():
    assert int(EXPECTED["transformers"].split(".")[0]) == 5
    generic = json.loads((V5 / "generic_fast" / "tokenizer_config.json").read_text())
    # what transformers 4.57 cannot read as it is: a class it lacks, a list of extra special tokens, no special-tokens map
    assert generic["tokenizer_class"] == "TokenizersBackend" and isinstance(generic["extra_special_tokens"], list)
    assert not (V5 / "generic_fast" / "special_tokens_map.json").exists()
    assert json.loads((V5 / "bert_tokenizer" / "tokenizer_config.json").read_text())["tokenizer_class"] == "BertTokenizer"
    for name in FOLDERS:
        config = json.loads((V5 / name / "config.json").read_text())
        assert config["transformers_version"] == EXPECTED["transformers"] and config["dtype"] == "float32"


@pytest.mark.parametrize("name", FOLDERS)
def test_a_transformers_5_folder_tokenizes_and_predicts_as_transformers_5_did(name):
    """On either stack: the same input ids and logits as transformers 5 computed when it saved the folder."""
    import torch

    from workbench.models.load import load_model

    tok = load_tokenizer(V5 / name)
    enc = tok(EXPECTED["texts"], padding=True, return_tensors="pt")
    assert enc["input_ids"].tolist() == EXPECTED["folders"][name]["input_ids"]
    if name == "generic_fast":
        assert "[ENT]" in tok.all_special_tokens and tok.pad_token == "[PAD]" and tok.cls_token == "[CLS]"
    loaded = load_model(str(V5 / name))
    with torch.no_grad():
        logits = loaded.model(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}).logits
    np.testing.assert_allclose(logits.numpy(), np.array(EXPECTED["folders"][name]["logits"]), atol=1e-5)
    assert loaded.model.config.id2label == {0: "rotten", 1: "fresh"}


@pytest.mark.skipif(transformers_major() >= 5, reason="transformers 5 reads its own folders; the refusal is the training stack's")
def test_a_tokenizer_4x_cannot_read_is_refused_in_one_line_naming_the_current_stack(tmp_path, capsys):
    """The transformers 5 folder without its tokenizer.json: nothing 4.57 can load. The audit refuses before any
    work, in one line that names the field and `make setup-current` (not "save it with save_pretrained")."""
    from workbench.cli import main

    folder = tmp_path / "model"
    shutil.copytree(V5 / "generic_fast", folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(NewerTransformersError) as e:
        load_tokenizer(folder)
    assert "'TokenizersBackend'" in str(e.value) and "make setup-current" in str(e.value) and "\n" not in str(e.value)
    data = tmp_path / "reviews.csv"
    data.write_text("text,label\n" + "\n".join(f"{t},{'fresh' if i % 2 else 'rotten'}" for i, t in
                                                 enumerate(EXPECTED["texts"] * 4)) + "\n")
    code = main(["audit", "--model", str(folder), "--data", str(data), "--out", str(tmp_path / "out"), "--quick"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1, err
    assert "TokenizersBackend" in err[0] and "make setup-current" in err[0] and "save_pretrained" not in err[0]
    assert not (tmp_path / "out" / "summary.json").exists()


def _audited_folder(name: str, tmp_path: Path) -> Path:
    """A committed folder, or ``additional_special_tokens``: the generic fast tokenizer's folder with its list of extra
    special tokens under ``additional_special_tokens`` (the key transformers 4 writes) instead of ``extra_special_tokens``."""
    if name != "additional_special_tokens":
        return V5 / name
    folder = tmp_path / name
    shutil.copytree(V5 / "generic_fast", folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["additional_special_tokens"] = config.pop("extra_special_tokens")
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return folder


@pytest.mark.slow  # 10-25 s each on 2 cores (the whole quick audit: export, fusion, three presets, evaluation, report)
@pytest.mark.parametrize("name", [*FOLDERS, "additional_special_tokens"])
def test_every_default_preset_audits_a_classifier_saved_by_transformers_5(name, tmp_path):
    """Each transformers 5 folder (BERT tokenizer; generic fast tokenizer with a list of extra special tokens; the
    same list as additional_special_tokens), audited on this stack with the default presets: every preset's variant
    is in summary.json and validated against the FP32 graph, and the exit code is 0 or 3, never 1 (a step failed).
    The generic tokenizer gives no token_type_ids on transformers 5, and its static preset once stopped in ONNX
    Runtime's symbolic shape inference ("unsupported broadcast between Min(128, sequence) sequence")."""
    from workbench.audit.config import DEFAULT_PRESETS
    from workbench.cli import main

    folder = _audited_folder(name, tmp_path)
    tok = load_tokenizer(folder)
    if name != "bert_tokenizer":
        assert tok.convert_tokens_to_ids("[ENT]") == 250 and "[ENT]" in tok.all_special_tokens
    texts = [*EXPECTED["texts"], "a [ENT] film , not funny"]  # the extra special token read as one token
    rows = [(t, "fresh" if i % 3 else "rotten") for i, t in enumerate(texts * 24)]
    data = tmp_path / "reviews.csv"
    data.write_text("text,label\n" + "\n".join(f'"{t}",{label}' for t, label in rows) + "\n")
    out = tmp_path / "audit"
    code = main(["audit", "--model", str(folder), "--data", str(data), "--out", str(out), "--quick", "--min-speedup", "0"])
    summary = json.loads((out / "summary.json").read_text())
    assert code in (0, 3) and summary["verdict"]["exit_code"] == code, summary["verdict"]
    assert summary["verdict"]["status"] != "incomplete" and (out / "report.html").is_file()
    variants = {v["name"]: v for v in summary["quantization"]}
    assert sorted(variants) == sorted(DEFAULT_PRESETS), summary["verdict"]
    assert all(v["validation_passed"] for v in variants.values()), {k: v["validation"] for k, v in variants.items()}


# ---- the exporters -------------------------------------------------------------------------------------------
def _fusions(export):
    from onnxruntime.transformers.optimizer import optimize_model

    info = export.model_info
    stats = optimize_model(str(export.onnx_path), model_type="bert", num_heads=info.num_heads,
                           hidden_size=info.hidden_size).get_fused_operator_statistics()
    return {k: v for k, v in stats.items() if v}


@pytest.mark.slow
def test_the_torchscript_export_matches_pytorch_and_keeps_every_fusion(tmp_path, quick_data):
    from workbench.graph import ExportConfig, run_export
    from workbench.graph.diagnose import exported_by
    from workbench.graph.trace import torchscript_available

    if not torchscript_available():
        pytest.skip("this torch no longer ships the TorchScript exporter")
    r = run_export("tiny", ExportConfig.quick(exporter="auto"), tmp_path / "ts", data=quick_data)
    assert r.exporter == "torchscript" and r.validation.passed and r.validation.max_abs_diff < 1e-4
    import onnx

    assert exported_by(onnx.load(str(r.onnx_path))) == "torchscript"
    layers = r.model_info.num_layers
    assert _fusions(r) == {"EmbedLayerNormalization": 1, "Attention": layers, "BiasGelu": layers,
                           "SkipLayerNormalization": 2 * layers}


@pytest.mark.slow
def test_the_dynamo_export_matches_pytorch_and_the_fusion_report_says_why_no_attention(tmp_path, quick_data):
    import torch

    from workbench.graph import ExportConfig, FusionConfig, run_export, run_fusion

    if int(torch.__version__.split(".")[1]) < 9 and torch.__version__.startswith("2.") or not importlib.util.find_spec("onnxscript"):
        pytest.skip(f"the dynamo exporter needs torch >= 2.9 and onnxscript (the current stack); torch {torch.__version__} here")
    r = run_export("tiny", ExportConfig.quick(exporter="dynamo"), tmp_path / "dyn", data=quick_data)
    assert r.exporter == "dynamo" and r.validation.passed and r.validation.max_abs_diff < 1e-4
    assert "Attention" not in _fusions(r)
    report = run_fusion(r, FusionConfig.quick(measure_latency=False), tmp_path / "fusion")
    attention = next(d for d in report.diagnoses if d.fusion == "Attention")
    assert attention.found == 0 and "dynamo exporter" in attention.cause and "--exporter torchscript" in attention.fix
    assert "exporter: dynamo" in attention.evidence


def test_auto_takes_torchscript_while_torch_ships_it_and_says_what_to_do_when_it_is_gone(monkeypatch):
    from workbench.graph import ExportConfig, ExportError
    from workbench.graph import trace

    if trace.torchscript_available():
        assert trace.resolve_exporter("auto") == "torchscript"
    from workbench.runtime import exporters

    monkeypatch.setattr(exporters, "torchscript_registration", lambda: None)  # a torch without the TorchScript exporter
    assert trace.resolve_exporter("auto") == "dynamo" and trace.resolve_exporter("dynamo") == "dynamo"
    with pytest.raises(ExportError, match="no longer ships the TorchScript exporter") as e:
        trace.resolve_exporter("torchscript")
    assert "--exporter dynamo" in str(e.value)
    with pytest.raises(ValueError, match="exporter must be one of auto, torchscript, dynamo, got 'onnx'"):
        ExportConfig(exporter="onnx")


# ---- doctor and the training commands -------------------------------------------------------------------------
def test_doctor_names_the_stack_and_what_it_runs():
    from workbench.doctor.checks import run_doctor

    report = run_doctor()
    first = report.checks[0]
    assert first.name == "stack" and first.value.startswith(f"{stack()} stack")
    if stack() == "current":
        assert "not training" in first.value and "make setup" in first.value
        assert report["transformers"].ok and report["transformers"].value.startswith("5.")
        assert not report["ortmodule extensions"].required
    else:
        assert "ortmodule" in first.value


@pytest.mark.parametrize("command", ["train", "compare", "demo", "workshop", "ondevice"])
def test_training_commands_refuse_on_the_current_stack_in_one_line(command, monkeypatch, capsys):
    from workbench.doctor import checks as env
    from workbench.cli import main

    monkeypatch.setattr(env, "stack", lambda: "current")
    code = main([command])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1, err
    assert f"workbench {command}:" in err[0] and "`make setup`" in err[0] and "current stack" in err[0]


def test_the_audit_says_the_current_runtime_is_slower_only_where_this_machine_measured_it(tmp_path, monkeypatch):
    """The note compares this machine's two cached profiles (same CPU, flags, threads; ONNX Runtime 1.19.2 and this
    one): said when a kernel kind is more than 15% slower, silent when within that or when 1.19.2 was never measured."""
    from workbench.doctor import checks as env, runtimes
    from workbench.core import serial
    from workbench.perf.machine_profile import MachineProfile, PROFILE_VERSION, profile_key

    def profile(version: str, fp32: float, int8: float) -> MachineProfile:
        return MachineProfile(cpu_model="Test Xeon", flags={"avx512_vnni": True, "avx2": True}, cores=2, threads=2,
                              ort_version=version, fp32_gops=fp32, int8_gops=int8, qdq_int8_gops=None,
                              measured_at="2026-11-25T18:00:00+00:00", shapes=[[128, 384, 384]])

    def cache(p: MachineProfile) -> None:
        key = profile_key(p.cpu_model, p.flags, p.threads, p.ort_version)
        (tmp_path / f"{key}.json").write_text(json.dumps({**serial.to_dict(p), "key": key, "version": PROFILE_VERSION}))

    monkeypatch.setattr(env, "stack", lambda: "current")
    now = profile("1.32.0", 170.0, 250.0)
    monkeypatch.setattr(runtimes, "RUNTIME_RATIOS", ())  # no published measurement for this CPU class either
    assert env.slower_runtime_note(now, cache_dir=tmp_path) is None  # 1.19.2 never measured here: nothing said
    cache(profile("1.19.2", 180.0, 320.0))
    line = env.slower_runtime_note(now, cache_dir=tmp_path)
    assert line is not None and "\n" not in line and "onnxruntime 1.32.0 is slower than 1.19.2 on this machine" in line
    assert "INT8 250 vs 320 GOP/s" in line and "FP32" not in line.split("throughput is")[1].split("(")[0]  # FP32 within 15%
    assert env.slower_runtime_note(profile("1.32.0", 175.0, 300.0), cache_dir=tmp_path) is None
    monkeypatch.setattr(env, "stack", lambda: "training")
    assert env.slower_runtime_note(now, cache_dir=tmp_path) is None


# ---- make test: both stacks -------------------------------------------------------------------------------------
def _dry_run(target: str) -> list[str]:
    """The commands `make TARGET` would run (make -n: printed, nothing run), one per line."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(["make", "-n", "-C", str(root), "--no-print-directory", target], capture_output=True, text=True,
                         check=True).stdout
    return [line.strip().rstrip("\\").strip() for line in out.splitlines() if line.strip()]


def test_make_test_sets_up_and_runs_both_stacks():
    """What CI runs (.ci/run calls the README's `make test`): both environments set up (a fresh clone builds
    .venv-current itself), the training stack's whole suite, then on the current stack every test that does not
    train but the heavy ones, with its wheel tests; both on two workers, a failure of either fails the target,
    and the last line says how long each took."""
    lines = _dry_run("test")
    setup_training = lines.index("bash scripts/setup.sh --test")
    setup_current = lines.index("bash scripts/setup_current.sh")
    training = next(i for i, line in enumerate(lines) if ".venv/bin/python -m pytest" in line)
    current = next(i for i, line in enumerate(lines) if ".venv-current/bin/python -m pytest" in line)
    assert max(setup_training, setup_current) < training < current
    # every test on the training stack but the workshop room's (make test-room: it downloads every wheel again)
    assert re.findall(r' -m "([^"]*)"', lines[training]) == ["not room"]
    # on the current stack, what does not train; the Ray cluster tests run once, on the training stack
    assert ' -m "not train and not hosts and not room" ' in lines[current] and "|| rc=1" in lines[current]
    alone = next(line for line in _dry_run("test-current") if ".venv-current/bin/python -m pytest" in line)
    assert lines[current].split(" || ")[0].strip() == alone  # the same run as `make test-current`
    assert " -n 2 --dist loadgroup " in lines[training] and " -n 2 --dist loadgroup " in lines[current]
    assert any(line.startswith('echo "make test: training stack $((t1 - t0)) s') for line in lines)
    assert lines[-1] == "exit $rc"
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "\nmake test || rc=$?\n" in ci and ci.rstrip().endswith("exit $rc")


def test_the_current_stacks_wheel_tests_are_in_make_tests_selection():
    """The marker expression `make test` uses on the current stack selects both wheel tests (one of them heavy)
    and no test that trains (the notebooks' committed-defaults runs start from a fine-tuned checkpoint)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    expr = re.search(r'-m "([^"]+)"', next(line for line in _dry_run("test")
                                           if ".venv-current/bin/python -m pytest" in line)).group(1)
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "-m", expr,
                          "tests/repo/test_wheel_current.py", "tests/repo/test_wheel.py",
                          "tests/notebooks/test_notebooks.py", "tests/unit/train/test_train.py"],
                         cwd=root, capture_output=True, text=True, timeout=300).stdout
    ids = [line for line in out.splitlines() if "::" in line]
    assert any("test_wheel_current.py::" in i for i in ids) and any("test_wheel.py::" in i for i in ids), out[-2000:]
    assert not any("test_committed_defaults_write_no_stderr" in i for i in ids), ids
    assert not any("test_train.py::" in i for i in ids), ids


def test_without_a_local_profile_the_audit_quotes_the_measurement_of_this_cpu_class(tmp_path, monkeypatch):
    """No 1.19.2 profile of this machine: the note quotes the two runtimes' measured ratio for CPUs with these flags
    (where and when it was measured, and that this machine was not), one line; silent for a class measured even,
    for a class never measured, and on the training stack."""
    from workbench.doctor import checks as env, runtimes
    from workbench.perf.machine_profile import MachineProfile

    def profile(flags: dict) -> MachineProfile:
        return MachineProfile(cpu_model="Some CPU", flags=flags, cores=2, threads=2, ort_version="1.32.0", fp32_gops=150.0,
                              int8_gops=250.0, qdq_int8_gops=None, measured_at="2026-11-25T18:00:00+00:00",
                              shapes=[[128, 384, 384]])

    monkeypatch.setattr(env, "stack", lambda: "current")
    xeon = profile({"avx2": True, "avx512f": True, "avx512_vnni": True})
    line = env.slower_runtime_note(xeon, cache_dir=tmp_path)
    assert line is not None and "\n" not in line
    assert "onnxruntime 1.19.2 (the training stack) ran the same graphs faster than onnxruntime 1.32.0" in line
    assert "AVX-512 VNNI" in line and "1.22x" in line and "not measured on this machine" in line and "make setup" in line
    epyc = runtimes.published_runtime_ratio({"avx2": True})
    assert epyc is not None and "AMD EPYC" in epyc.machine and epyc.int8 > epyc.fp32 > 1
    assert "AVX2 + FMA" in env.slower_runtime_note(profile({"avx2": True}), cache_dir=tmp_path)
    assert env.slower_runtime_note(profile({"avx2": False}), cache_dir=tmp_path) is None  # a class never measured
    even = runtimes.RuntimeRatio("AVX2", ("avx2",), (), "a test machine", "today", "1.32.0", 1.01, 1.03, 1.0, 1.02)
    monkeypatch.setattr(runtimes, "RUNTIME_RATIOS", (even,))
    assert env.slower_runtime_note(profile({"avx2": True}), cache_dir=tmp_path) is None  # measured even: nothing said
    monkeypatch.setattr(env, "stack", lambda: "training")
    assert env.slower_runtime_note(xeon, cache_dir=tmp_path) is None


def test_doctor_machine_line_carries_the_slower_runtime_note(monkeypatch):
    from workbench.doctor import checks as env
    from workbench.perf import machine_profile as mp

    xeon = mp.MachineProfile(cpu_model="Test Xeon without a cached profile", flags={"avx2": True, "avx512_vnni": True},
                             cores=2, threads=2, ort_version="1.32.0", fp32_gops=150.0, int8_gops=250.0, qdq_int8_gops=None,
                             measured_at="2026-11-25T18:00:00+00:00", shapes=[[128, 384, 384]])
    monkeypatch.setattr(mp, "machine_profile", lambda *a, **k: xeon)
    monkeypatch.setattr(env, "stack", lambda: "current")
    line = env.check_machine().value
    assert "Test Xeon" in line and "ran the same graphs faster than onnxruntime 1.32.0" in line and "AVX-512 VNNI" in line
    monkeypatch.setattr(env, "stack", lambda: "training")
    assert "faster" not in env.check_machine().value
