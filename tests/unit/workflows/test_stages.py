"""The stage registry (workbench.workflows.stages) and plans: every front's stage names are the
registry's, the demo's list is the registry's DEMO_STAGES, and a plan file becomes the DemoConfig it
describes or one line that names the key and the fix."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from workbench.graph import ExportConfig
from workbench.quant import QuantConfig
from workbench.train import TrainConfig
from workbench.workflows.demo import DemoConfig
from workbench.workflows.stages import ALIASES, DEMO_STAGES, STAGES, PlanError, canonical, load_plan, plan_config

REPO = Path(__file__).resolve().parents[3]
FRONTS = ("workbench/workflows/demo.py", "workbench/workflows/coverage.py", "workbench/audit/stage.py",
          "workbench/flow/handoffs.py", "widgets/workbench.py")


def stage_names(path: Path) -> list[str]:
    """The names given to ``Stage(...)`` in a file: string literals, and ``STEPS[i]`` read from the audit's STEPS."""
    from workbench.audit.config import STEPS

    names = []
    calls = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Call)]
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(node.func, ast.Name) and node.func.id == "Stage" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant):
                names.append(first.value)
            elif isinstance(first, ast.Subscript) and isinstance(first.value, ast.Name) and first.value.id == "STEPS":
                names.append(STEPS[first.slice.value])
            else:
                names.append(ast.unparse(first))
    return names


def test_every_stage_a_front_sequences_is_in_the_registry() -> None:
    found = {rel: stage_names(REPO / rel) for rel in FRONTS}
    assert all(found.values()), found
    unknown = {rel: [n for n in names if ALIASES.get(n, n) not in STAGES] for rel, names in found.items()}
    assert not any(unknown.values()), f"stage names that are not in workbench.workflows.stages.STAGES: {unknown}"


def test_the_demos_stages_are_the_registrys_demo_stages_in_order() -> None:
    assert stage_names(REPO / "workbench/workflows/demo.py") == list(DEMO_STAGES)
    assert [canonical(n) for n in ("train", "environment", "graph", "slice drift")] == ["fine-tune", "doctor", "fuse", "evaluate"]
    with pytest.raises(KeyError):
        canonical("no-such-stage")


def test_each_entry_has_its_config_type_and_a_run_function() -> None:
    assert STAGES["fine-tune"].config is TrainConfig and STAGES["export"].config is ExportConfig
    assert STAGES["quantize"].config is QuantConfig and STAGES["fuse"].inputs == ("export",)
    assert all(callable(s.run) and s.title for s in STAGES.values())


def test_a_plan_sets_each_stages_config() -> None:
    cfg, stages = plan_config({"quick": True, "stages": [s for s in DEMO_STAGES if s != "search"],
                               "config": {"fine-tune": {"max_steps": 3, "backends": ["eager"]}, "train": {"lr": 1e-4},
                                          "data": {"test_fraction": 0.2}, "export": {"opset": 16},
                                          "quantize": {"presets": ["dynamic"], "repeats": 2}}})
    quick = DemoConfig.quick()
    assert stages == tuple(s for s in DEMO_STAGES if s != "search") and cfg.search is False
    assert cfg.train.max_steps == 3 and cfg.train.lr == 1e-4 and cfg.backends == ("eager",)
    assert cfg.train.data.test_fraction == 0.2 and cfg.train.model == quick.train.model
    assert cfg.export.opset == 16 and cfg.quant_presets == ("dynamic",) and cfg.timing.repeats == 2
    assert plan_config({})[0] == DemoConfig.default()


@pytest.mark.parametrize("plan, words", [
    ({"stages": ["doctor", "bogus"]}, "unknown stage 'bogus'"),
    ({"stages": ["doctor", "data"]}, "only search may be left out"),
    ({"config": {"export": {"opsett": 1}}}, "ExportConfig has no field 'opsett'"),
    ({"config": {"fine-tune": {"backends": ["nope"]}}}, "backends must each be one of"),
    ({"config": {"quantize": {"presets": ["zzz"]}}}, "unknown quantization preset"),
    ({"config": {"doctor": {"a": 1}}}, "takes no config"),
    ({"extra": 1}, "unknown key 'extra'"),
    (["doctor"], "a plan is a mapping"),
])
def test_a_bad_plan_is_refused_in_one_line(plan, words) -> None:
    with pytest.raises(PlanError) as err:
        plan_config(plan, "plan.yaml")
    assert words in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("plan.yaml: ")


def test_plans_are_read_from_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("quick: true\nconfig:\n  fine-tune: {max_steps: 4}\n")
    (tmp_path / "p.json").write_text(json.dumps({"quick": True, "config": {"fine-tune": {"max_steps": 4}}}))
    assert load_plan(tmp_path / "p.yaml") == load_plan(tmp_path / "p.json")
    (tmp_path / "bad.yaml").write_text("config: [unclosed\n")
    with pytest.raises(PlanError, match="not valid YAML"):
        load_plan(tmp_path / "bad.yaml")
