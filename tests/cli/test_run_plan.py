"""`workbench run PLAN`: the demo's stages as a plan file describes them; a bad file is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from workbench import cli


def test_a_bad_plan_is_exit_2_and_one_line(tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("config:\n  export: {opsett: 17}\n")
    assert cli.main(["run", str(plan), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "opsett" in err and "opset" in err.split("fields:")[1], err
    assert not (tmp_path / "run").exists()
    assert cli.main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the plan" in capsys.readouterr().err


def test_a_plan_runs_the_demos_stages_with_its_configs(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"quick": True, "stages": ["doctor", "data", "fine-tune", "export", "fuse", "quantize", "report"],
                                "config": {"fine-tune": {"model": str(tmp_path / "no-such-model"), "max_steps": 2}}}))
    assert cli.main(["run", str(plan), "--run-dir", str(tmp_path / "run")]) == 1  # the model is missing: fine-tune fails
    demo = json.loads((tmp_path / "run" / "demo.json").read_text())
    assert [s["name"] for s in demo["stages"]] == ["doctor", "data", "fine-tune", "export", "fuse", "quantize", "report"]
    assert demo["config"]["train"]["max_steps"] == 2 and demo["config"]["search"] is False
    failed = next(s for s in demo["stages"] if s["name"] == "fine-tune")
    assert failed["status"] == "failed" and "no-such-model" in failed["message"]
