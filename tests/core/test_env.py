"""The doctor: passes here, and names the fix when a piece is missing."""

from __future__ import annotations

import json

import pytest

from workbench import cli, env


def test_doctor_passes_in_the_set_up_environment():
    report = env.run_doctor()
    assert report.ok, report.as_text()
    assert report["onnxruntime"].value.startswith("1.19.2")
    assert "training build" in report["onnxruntime"].value
    assert "torch_interop_utils" in report["ortmodule extensions"].value
    assert "CPUExecutionProvider" in report["execution providers"].value


def test_missing_extensions_are_reported_with_the_fix(monkeypatch):
    monkeypatch.setattr(env, "ortmodule_extension_files", lambda: [])
    check = env.check_ortmodule_extensions()
    assert not check.ok and check.required
    assert "torch_cpp_extensions.install" in check.fix


def test_wrong_torch_and_missing_training_build(monkeypatch):
    real = env._version
    monkeypatch.setattr(env, "_version", lambda d: "2.8.0" if d == "torch" else real(d))
    check = env.check_torch()
    assert not check.ok and "2.4-2.6" in check.fix

    monkeypatch.setattr(env, "_version", lambda d: "1.22.0" if d == "onnxruntime" else None)
    check = env.check_onnxruntime()
    assert not check.ok and "not a training build" in check.value and "make setup" in check.fix

    monkeypatch.setattr(env, "_version", lambda d: {"onnxruntime": "1.22.0", "onnxruntime-training-cpu": "1.19.2"}.get(d))
    check = env.check_onnxruntime()
    assert not check.ok and "overwrite each other" in check.fix


def test_cli_doctor_exit_code_and_json(monkeypatch, capsys):
    assert cli.main(["doctor", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is True and {c["name"] for c in payload["checks"]} >= {"torch", "ortmodule extensions"}

    monkeypatch.setattr(env, "ortmodule_extension_files", lambda: [])
    monkeypatch.setattr(env, "CHECKS", [env.check_python, env.check_ortmodule_extensions])
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "fix: compile them once" in out
