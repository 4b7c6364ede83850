"""One run layout, opened from any of its folders, continued by the CLI from any of them and from a
moved copy; paths inside a run saved relative to it; the demo and the Workbench hand on the same
checkpoint (workbench.flow.handoffs)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.flow import handoffs as flow
from workbench import runs
from workbench.workflows.demo import DemoConfig, run_demo
from workbench.runs import layout

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """The quick demo (tiny model, eager + ORTModule, 4 steps, dynamic INT8), written once."""
    cfg = DemoConfig.quick()
    cfg = dataclasses.replace(cfg, train=cfg.train.replace(max_steps=4), n_boot=100)
    run = tmp_path_factory.mktemp("layout") / "20260101-000000-demo"
    result = run_demo(cfg, run, log=lambda line: None)
    assert result.ok, [(s.name, s.message) for s in result.stages if s.status != "ok"]
    return run


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m workbench.cli ARGV`` from another folder, as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def saved_results(run: Path) -> str:
    """Every result the stages saved (summary.json is the report's record for reading, with the
    folder it was written in; it is rewritten, not continued)."""
    return "".join(p.read_text() for p in run.rglob("*.json") if p.name != layout.SUMMARY_FILE)


# ---- the layout the demo writes ----------------------------------------------------------------
def test_the_demo_writes_the_run_layout(demo_run: Path) -> None:
    for rel in (layout.COMPARE, layout.checkpoint("ortmodule"), layout.EXPORT, layout.EXPORTED_GRAPH, layout.FUSION,
                layout.FUSED, layout.BASELINE, f"{layout.quantize_dir('dynamic')}/{layout.QUANTIZE_FILE}",
                layout.REPORT_FILE, layout.SUMMARY_FILE, layout.DEMO_FILE):
        assert (demo_run / rel).exists(), rel
    assert not (demo_run / "compare.json").exists(), "one place for the comparison: train/compare.json"
    found = runs.find_results(demo_run)
    assert {k: v.relative_to(demo_run).as_posix() for k, v in found.items()} == {
        "compare": layout.COMPARE, "export": layout.EXPORT, "fusion": layout.FUSION,
        "quantize": f"{layout.quantize_dir('dynamic')}/{layout.QUANTIZE_FILE}"}


def test_the_layout_names_are_the_files_the_stages_write(demo_run: Path) -> None:
    """The stage modules name their files themselves; the layout must agree with what they wrote."""
    run = flow.open_run(demo_run)
    assert run.export().onnx_path.name == layout.EXPORT_GRAPH
    assert Path(run.fusion().fused_path).name == layout.FUSED_GRAPH
    assert run.result_path("quantize").name == layout.QUANTIZE_FILE
    assert Path(run.quantization().baseline_path).is_relative_to(demo_run / layout.BASELINE)
    assert {p.name for p in demo_run.iterdir()} >= {layout.REPORT_FILE, layout.SUMMARY_FILE, layout.DEMO_FILE,
                                                     layout.DEMO_SUMMARY, layout.DATA_FILE, layout.DOCTOR_FILE}


def test_results_store_paths_inside_the_run_relative_to_it(demo_run: Path) -> None:
    raw = json.loads((demo_run / layout.EXPORT).read_text())
    assert raw["onnx_path"] == layout.EXPORTED_GRAPH
    assert raw["model_source"] == layout.checkpoint("ortmodule")
    assert raw["_run_relative"]["root"] == ".."
    raw = json.loads((demo_run / layout.COMPARE).read_text())
    assert {r["checkpoint_dir"] for r in raw["runs"]} == {layout.checkpoint("eager"), layout.checkpoint("ortmodule")}
    assert str(demo_run) not in saved_results(demo_run), "an absolute path into the run was saved"
    # and they come back absolute, under wherever the run lies
    exported = flow.open_run(demo_run).export()
    assert exported.onnx_path == demo_run / layout.EXPORTED_GRAPH and exported.onnx_path.is_file()


def test_old_results_with_absolute_paths_still_load(tmp_path: Path) -> None:
    @dataclasses.dataclass(frozen=True)
    class R:
        graph: Path
        model: str
        note: str

    inside, outside = tmp_path / "run" / "export" / "model.onnx", "/elsewhere/model"
    legacy = tmp_path / "run" / "export" / "old.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text(json.dumps({"graph": str(inside), "model": outside, "note": "eager"}))  # written before relative paths
    assert runs.load_result(R, legacy) == R(inside, outside, "eager")
    runs.save_result(R(inside, outside, "eager"), legacy)
    raw = json.loads(legacy.read_text())
    assert raw["graph"] == "export/model.onnx" and raw["model"] == outside and raw["note"] == "eager"
    assert runs.load_result(R, legacy) == R(inside, outside, "eager")


# ---- open_run from any folder --------------------------------------------------------------------
@pytest.mark.parametrize("where", [".", "train", "train/eager", "train/ortmodule/checkpoint", "export", "fusion",
                                   "quantize", "quantize/dynamic", "quantize/baseline", "figures", "fusion/fusion.json",
                                   "export/model.onnx", "demo.json"])
def test_open_run_from_every_folder_and_result_file(demo_run: Path, where: str) -> None:
    run = flow.open_run(demo_run / where)
    assert run.root == demo_run
    graph = run.graph_to_quantize()
    assert graph.kind == "fused" and graph.path == demo_run / layout.FUSED
    assert "fused graph" in graph.note and str(graph.path) in graph.note
    checkpoint = run.checkpoint_to_export()
    assert checkpoint.path == demo_run / layout.checkpoint("ortmodule") and "ONNX Runtime" in checkpoint.note
    assert run.export_to_fuse().path == demo_run / layout.EXPORT
    assert run.stage_dir("quantize", "x") == demo_run / "quantize" / "x"


def test_open_run_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "empty" / "export").mkdir(parents=True)
    with pytest.raises(runs.RunError, match="holds no saved result.*workbench runs"):
        flow.open_run(tmp_path / "empty")
    with pytest.raises(runs.RunError, match="holds no saved result"):
        flow.open_run(tmp_path / "empty" / "export")
    with pytest.raises(runs.RunError, match="no such file or folder: '.*nowhere'"):
        flow.open_run(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="unknown stage 'quantise'"):
        flow.Run(tmp_path, tmp_path).stage_dir("quantise")


def test_an_older_flat_run_still_opens(tmp_path: Path) -> None:
    """compare.json at the root, export.json and fusion.json side by side: the older layouts."""
    for rel in ("compare.json", "export/export.json", "export/fusion.json"):
        runs.atomic_write_json(tmp_path / "old" / rel, {})
    run = flow.open_run(tmp_path / "old" / "export")
    assert run.root == tmp_path / "old"
    assert {k: v.relative_to(run.root).as_posix() for k, v in run.results().items()} == {
        "compare": "compare.json", "export": "export/export.json", "fusion": "export/fusion.json"}


# ---- one orchestrator: both fronts pick the same checkpoint --------------------------------------
def test_the_demo_and_the_workbench_export_the_same_checkpoint(demo_run: Path, tmp_path: Path) -> None:
    from widgets import Workbench

    comparison = flow.open_run(demo_run).comparison()
    pick = flow.checkpoint_to_export(comparison)
    assert pick.kind == "ortmodule checkpoint"
    exported = flow.open_run(demo_run).export()
    assert Path(exported.model_source) == pick.path, "the demo exported what workbench.flow.handoffs picks"
    # the Workbench lists the eager run first; it preselects the same checkpoint for its graph step
    assert [r.backend.value for r in comparison.runs][0] == "eager"
    wb = Workbench(runs_root=tmp_path, background=False)
    wb.train.show(comparison)
    assert Path(wb.graph.controls["model"].value) == pick.path
    # a Workbench opened on a stage folder of the run shows it and quantizes the fused graph
    wb = Workbench(runs_root=tmp_path, saved=demo_run / "quantize" / "dynamic", background=False)
    assert Path(wb.graph.controls["model"].value) == pick.path
    assert Path(wb.quant.options["graph"].fused_path) == demo_run / layout.FUSED


def test_the_fused_graph_is_quantized_only_when_it_passed_validation(demo_run: Path) -> None:
    run = flow.open_run(demo_run)
    export, fusion = run.export(), run.fusion()
    bad = dataclasses.replace(fusion.fused, validation=dataclasses.replace(fusion.fused.validation, passed=False,
                                                                           message="max |dlogit| 3.0"))
    broken = dataclasses.replace(fusion, variants=[bad if v is fusion.fused else v for v in fusion.variants])
    pick = flow.graph_to_quantize(export, broken)
    assert pick.kind == "exported" and pick.path == export.onnx_path and "failed validation" in pick.note
    assert flow.graph_to_quantize(export, None).note.endswith("(fuse first to quantize the fused graph)")
    assert flow.graph_to_quantize(None, None) is None


# ---- the CLI continues a run from any of its folders ---------------------------------------------
QUICK_QUANT = ("--quick", "--node-samples", "0", "--n-boot", "100", "--repeats", "1", "--shapes", "1x16", "--json")


@pytest.mark.slow  # a long run for make test-fast: 7 s each on 2 cores
@pytest.mark.parametrize("where", [".", "export", "fusion", "fusion/fusion.json"])
def test_cli_quantize_takes_the_fused_graph_from_any_folder(demo_run: Path, where: str, tmp_path: Path) -> None:
    proc = cli("quantize", str(demo_run / where), *QUICK_QUANT, "--run-dir", str(tmp_path / "q"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["graph_kind"] == "fused" and Path(out["graph"]) == demo_run / layout.FUSED
    assert f"quantizing the fused graph {demo_run / layout.FUSED}" in proc.stderr  # it says which it used
    assert out["input"].startswith("quantizing the fused graph")


def test_cli_refuses_a_folder_outside_any_run_in_one_line(tmp_path: Path) -> None:
    proc = cli("quantize", str(tmp_path), "--quick", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "run `workbench export` first" in proc.stderr
    proc = cli("quantize", str(tmp_path), "--graph", "fused", "--quick", cwd=tmp_path)
    assert proc.returncode == 2


@pytest.mark.slow  # a long run for make test-fast: 19 s on 2 cores
def test_a_moved_copy_is_continued_inside_the_copy(demo_run: Path, tmp_path: Path) -> None:
    """Copy the run elsewhere, take the original away, continue the copy with the CLI: every stage
    reads the copy's results and writes into the copy."""
    copy = tmp_path / "colleague" / demo_run.name
    shutil.copytree(demo_run, copy)
    away = demo_run.with_name(demo_run.name + "-away")
    demo_run.rename(away)
    try:
        # export: the checkpoint the flow picks, from the copy's train/ folder
        proc = cli("export", "--model", str(copy / "train"), "--preset", "quick", "--validation-examples", "8", "--json",
                   cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert Path(out["run_dir"]) == copy and Path(out["onnx_path"]) == copy / layout.EXPORTED_GRAPH
        assert f"exporting the ortmodule checkpoint {copy / layout.checkpoint('ortmodule')}" in proc.stderr
        # fuse: from the copy's export folder, into the copy's fusion folder
        proc = cli("fuse", str(copy / "export"), "--preset", "inspect", "--variants", "transformer", "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert Path(out["result"]) == copy / layout.FUSION and Path(out["fused_path"]) == copy / layout.FUSED
        assert f"fusing the export {copy / layout.EXPORT}" in proc.stderr
        # quantize: from the copy's root, the fused graph, into the copy's quantize folder
        proc = cli("quantize", str(copy), *QUICK_QUANT, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert Path(out["graph"]) == copy / layout.FUSED and Path(out["run_dir"]).parent == copy / layout.QUANTIZE_DIR
        saved = flow.open_run(copy / "quantize").quantization()
        assert saved.source_path == copy / layout.FUSED and saved.baseline_path.is_relative_to(copy)
        assert not demo_run.exists(), "something wrote to the original run's place"
        every = saved_results(copy)
        assert str(demo_run) not in every and str(away) not in every
    finally:
        away.rename(demo_run)
