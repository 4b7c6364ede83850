"""The stage registry (workbench.workflows.stages): one route per front, one builder of the
fronts' lists (no other hand-written list of stages in workbench/ or widgets/), each front
sequencing exactly its route; and plans (workbench.workflows.plan): a plan file becomes the
DemoConfig it describes or one line that names the key and the fix."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from workbench.graph import ExportConfig, FusionConfig
from workbench.workflows.demo import DemoConfig
from workbench.workflows.plan import PlanError, load_plan, plan_config
from workbench.workflows.stages import (AUDIT_STAGES, COVERAGE_STAGES, DEMO_STAGES, EXPORT_AND_FUSE, ROUTES, STAGES,
                                        stages_for)
from workbench.workflows.steps import FineTuneStep, Job, QuantizeStep

REPO = Path(__file__).resolve().parents[3]
# the one place a Stage is constructed: the registry's builder
BUILDER = ("workbench/workflows/stages.py", "stages_for")


def stage_constructions(tree: ast.AST, rel: str) -> list[str]:
    """``file:function:line`` of every ``Stage(...)`` / ``x.Stage(...)`` call in ``tree``."""
    found = []

    def walk(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                f = child.func
                if (isinstance(f, ast.Name) and f.id == "Stage") or (isinstance(f, ast.Attribute) and f.attr == "Stage"):
                    found.append(f"{rel}:{func}:{child.lineno}")
            walk(child, inner)

    walk(tree, "<module>")
    return found


def test_no_front_writes_its_own_list_of_stages() -> None:
    """Every Stage in workbench/ and widgets/ comes from the registry's builder: a front that
    writes ``Stage("train", ...)`` by hand is a second list whose names and needs drift."""
    found = []
    for tree in ("workbench", "widgets"):
        for path in sorted((REPO / tree).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            found += stage_constructions(ast.parse(path.read_text(encoding="utf-8")), rel)
    builder = [f for f in found if f.startswith(f"{BUILDER[0]}:{BUILDER[1]}:")]
    assert builder, f"the check no longer sees the builder's own Stage(...) in {BUILDER}"
    assert not sorted(set(found) - set(builder)), f"Stage(...) written outside the registry's builder: {sorted(set(found) - set(builder))}"


def test_the_check_sees_a_hand_written_stage() -> None:
    tree = ast.parse("from workbench.flow import sequence\n"
                     "def run():\n    return [sequence.Stage('a', f), Stage('b', g, needs=('a',))]\n")
    assert stage_constructions(tree, "w.py") == ["w.py:run:3", "w.py:run:3"]


def test_every_route_runs_registry_stages_with_needs_that_come_before() -> None:
    for route in ROUTES.values():
        assert set(route.stages) <= set(STAGES) and route.optional <= set(route.stages), route.name
        stages = stages_for(route, Job(Path("."), {}))
        assert [s.name for s in stages] == list(route.stages)
        for i, s in enumerate(stages):
            assert set(s.needs) <= set(route.stages[:i]), (route.name, s.name, s.needs)
        assert [s.name for s in stages if s.finally_] == [n for n in route.stages if n == "report"]


def test_needs_and_skip_reasons_come_from_the_registry() -> None:
    job = Job(Path("."), {})
    demo = {s.name: s for s in stages_for("demo", job)}
    assert demo["export"].needs == ("data", "fine-tune") and demo["quantize"].needs == ("data", "export")
    assert demo["fuse"].skip_reason == STAGES["fuse"].skip_reason == "needs the exported graph"
    audit = {s.name: s for s in stages_for("audit", job)}
    assert audit["export"].needs == ("doctor", "data") and audit["search"].needs == ("quantize",)
    assert audit["fuse"].skip_reason == "needs an exported graph that passed validation"
    # the Workbench's graph step exports and fuses: export needs the fine-tune step (its data comes from the training config)
    wb = {s.name: s for s in stages_for("workbench", job)}
    assert wb["export"].needs == ("fine-tune",) and wb["quantize"].needs == ("fuse",) and wb["fuse"].skip_reason == ""
    cov = {s.name: s for s in stages_for("coverage", job, leave_out=("fine-tune",))}
    assert list(cov) == ["build", "export", "fuse", "quantize"] and cov["export"].needs == ("build",)


@pytest.mark.parametrize("configs, hooks, kw, words", [
    ({"train": 1}, {}, {}, "has no stage 'train'"),
    ({}, {"build": print}, {}, "has no stage 'build'"),
    ({}, {}, {"leave_out": ("fuse",)}, "cannot leave out ['fuse']; optional: ['search']"),
    ({}, {}, {"resume": {"graph": print}}, "has no stage 'graph'"),
])
def test_the_builder_names_a_config_or_hook_that_does_not_fit_the_route(configs, hooks, kw, words) -> None:
    with pytest.raises(ValueError) as err:
        stages_for("demo", Job(Path("."), configs, hooks=hooks), **kw)
    assert words in str(err.value)


class Captured(Exception):
    """What a front gave run_stages (raised by the stand-in, so nothing runs)."""

    def __init__(self, stages) -> None:
        super().__init__([s.name for s in stages])
        self.stages = stages


class Called(Exception):
    """A registry run function was called (raised by the stand-in, so neither it nor a hook runs)."""

    def __init__(self, name: str, config, job) -> None:
        super().__init__(name)
        self.name, self.config, self.job = name, config, job


def capture(stages, **_kw):
    raise Captured(stages)


def sequenced(monkeypatch, module, call) -> list[str]:
    """The stage names a front sequences; each stage's body is checked to be the registry's run of
    that stage (stood in for, on every registry entry), given the front's config for it."""
    from dataclasses import replace

    from workbench.flow.sequence import StageRecord

    monkeypatch.setattr(module, "run_stages", capture)
    with pytest.raises(Captured) as got:
        call()
    for name, spec in list(STAGES.items()):
        monkeypatch.setitem(STAGES, name, replace(spec, run=lambda cfg, rec, job: (_ for _ in ()).throw(Called(rec.name, cfg, job))))
    for stage in got.value.stages:
        with pytest.raises(Called) as called:
            stage.run(StageRecord(stage.name))
        assert called.value.name == stage.name
        assert called.value.config is called.value.job.configs.get(stage.name)
    return [s.name for s in got.value.stages]


def test_the_demo_sequences_its_route_and_gives_no_body(monkeypatch, tmp_path: Path) -> None:
    from workbench.workflows import demo

    assert sequenced(monkeypatch, demo, lambda: demo.run_demo(DemoConfig.quick(search=True), tmp_path, log=lambda _: None)) \
        == list(DEMO_STAGES)
    assert sequenced(monkeypatch, demo, lambda: demo.run_demo(DemoConfig.quick(), tmp_path, log=lambda _: None)) \
        == [n for n in DEMO_STAGES if n != "search"]


def test_the_demos_configs_are_its_stages_configs() -> None:
    from workbench.workflows.demo import demo_configs

    cfg = DemoConfig.quick(search=True, quant_presets=("dynamic", "static"))
    configs = demo_configs(cfg)
    assert configs["data"] is cfg.train.data and configs["export"] is cfg.export and configs["fuse"] is cfg.fusion
    assert configs["fine-tune"].train is cfg.train and configs["fine-tune"].compare.backends == cfg.backends
    assert list(configs["quantize"].presets) == ["dynamic", "static"]
    assert configs["quantize"].evaluation.n_boot == cfg.n_boot and configs["search"].min_speedup == cfg.min_speedup
    assert "search" not in demo_configs(DemoConfig.quick())


def test_the_audit_sequences_its_route_and_gives_no_body(monkeypatch, tmp_path: Path) -> None:
    import datasets

    from workbench.audit import AuditConfig, stage

    rows = datasets.Dataset.from_dict({"text": ["good", "not bad"], "label": [1, 0]})
    checked = SimpleNamespace(out_dir=tmp_path, model=SimpleNamespace(folder=tmp_path, model_type="bert", num_labels=2, architectures=[],
                                                                      class_names=["neg", "pos"]),
                              data=SimpleNamespace(facts={"source": "rows.csv", "calibration_count": 8}, scored=rows, calibration=rows))
    run = lambda: stage.run_audit(tmp_path, AuditConfig(data="rows.csv"), tmp_path, log=lambda _: None, checked=checked)  # noqa: E731
    assert sequenced(monkeypatch, stage, run) == list(AUDIT_STAGES)
    assert list(AUDIT_STAGES) == ["doctor", "data", "export", "fuse", "quantize", "evaluate", "search", "ship", "report"]


def test_the_embedding_audit_sequences_its_route_and_gives_no_body(monkeypatch, tmp_path: Path) -> None:
    from workbench.embed import audit
    from workbench.embed.audit import EmbedAuditConfig

    checked = SimpleNamespace(out_dir=tmp_path, folder=SimpleNamespace(folder=tmp_path, describe=lambda: "mean pooling"),
                              source="builtin", task=None, texts=[])
    cfg = EmbedAuditConfig(presets=("dynamic",))
    run = lambda: audit.run_embed_audit(tmp_path, cfg, tmp_path, log=lambda _: None, checked=checked)  # noqa: E731
    assert sequenced(monkeypatch, audit, run) == list(ROUTES["embed-audit"].stages) \
        == ["export", "quantize", "evaluate", "search", "report"]
    quantize = lambda: audit.run_embed_quantization(tmp_path, cfg, tmp_path, log=lambda _: None, checked=checked)  # noqa: E731
    assert sequenced(monkeypatch, audit, quantize) == ["export", "quantize", "evaluate", "search"]
    assert ROUTES["embed-audit"].needs_of("search", ["export", "quantize", "evaluate"]) == ("export", "quantize")


@pytest.mark.parametrize("name", ["export", "quantize", "evaluate", "search", "report"])
def test_the_registrys_run_runs_the_embedding_tasks_body_of_a_stage(monkeypatch, tmp_path: Path, name: str) -> None:
    from workbench.embed import stages as embed_stages
    from workbench.flow.sequence import StageRecord

    seen = []
    monkeypatch.setattr(embed_stages, name.replace("-", "_"), lambda cfg, rec, job: seen.append((cfg, rec.name, job.task)) or "done")
    job = Job(tmp_path, {name: "its config"}, task="embedding")
    assert STAGES[name].run("its config", StageRecord(name), job) == "done"
    assert seen == [("its config", name, "embedding")]
    classifier = Job(tmp_path, {}, task="classifier")
    assert classifier.functions().stages == {} and job.functions().quantize.__name__ == "build_variants"


def test_the_coverage_run_and_the_graph_panels_export_sequence_their_routes(monkeypatch, tmp_path: Path) -> None:
    from workbench.workflows import coverage, stages

    assert sequenced(monkeypatch, coverage, lambda: coverage.run_coverage("bert", tmp_path, data=object(), train_steps=2)) \
        == list(COVERAGE_STAGES)
    assert sequenced(monkeypatch, coverage, lambda: coverage.run_coverage("bert", tmp_path, data=object())) \
        == [n for n in COVERAGE_STAGES if n != "fine-tune"]
    run = lambda: stages.export_and_fuse("tiny", ExportConfig.quick(), FusionConfig.quick(), tmp_path)  # noqa: E731
    assert sequenced(monkeypatch, stages, run) == list(EXPORT_AND_FUSE) == ["export", "fuse"]


def test_a_stage_runs_the_registrys_function_with_its_config_then_the_fronts_hook(tmp_path: Path) -> None:
    from workbench.flow.sequence import run_stages

    seen = []
    job = Job(tmp_path, {"build": {"model_type": "bert"}}, hooks={"build": lambda rec, result: seen.append((rec.name, result))})
    done = run_stages(stages_for("coverage", job, leave_out=("fine-tune",))[:1], log=lambda _: None)
    assert done.outcomes[0].status == "ok" and (tmp_path / "model" / "config.json").is_file()
    assert seen == [("build", done.results["build"])]


def test_each_entry_has_its_config_type_and_a_run_function() -> None:
    assert STAGES["fine-tune"].config is FineTuneStep and STAGES["export"].config is ExportConfig
    assert STAGES["quantize"].config is QuantizeStep and STAGES["fuse"].inputs == ("export",)
    assert all(callable(s.run) and s.title for s in STAGES.values())


def test_a_plan_sets_each_stages_config() -> None:
    cfg, stages = plan_config({"quick": True, "stages": [s for s in DEMO_STAGES if s != "search"],
                               "config": {"fine-tune": {"max_steps": 3, "backends": ["eager"], "lr": 1e-4},
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
    ({"stages": ["environment", "data"]}, "unknown stage 'environment'; stages: doctor, data, fine-tune"),  # a name fronts once showed
    ({"config": {"train": {"max_steps": 4}}}, "config.train: no such stage; stages: doctor, data, fine-tune"),
    ({"config": {"quantize": {"n_boot": 50}}}, "n_boot must be at least 100"),  # what the search would refuse, before anything runs
    ({"config": {"search": {"min_speedup": -1}}}, "min_speedup is a speed-up over the FP32 graph between 0 (off) and 100"),
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
