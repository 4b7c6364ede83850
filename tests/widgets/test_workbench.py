"""The Workbench stepper without a browser: steps blocked until their inputs exist, done marks,
results flowing from step to step, one run folder, and a saved run opened without recomputing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import workbench.graph as workbench_graph
import workbench.quant as workbench_quant
import workbench.train as workbench_train
import workbench.sessions.quant as quant_module  # the sessions run the stages
import workbench.sessions.train as train_module
from widgets import Workbench
from widgets.workbench import DONE, WAITING
from workbench.workflows.stages import WORKBENCH_STAGES


def titles(wb: Workbench) -> list[str]:
    return [wb.accordion.get_title(i) for i in range(len(wb.steps))]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Workbench:
    wb = Workbench(runs_root=tmp_path_factory.mktemp("wb-runs"), max_steps=4, n_boot=100, background=False)
    wb.run_all()
    return wb


def test_steps_wait_for_their_inputs(tmp_path: Path) -> None:
    wb = Workbench(runs_root=tmp_path, background=False)
    t = titles(wb)
    # the registry's names (its workbench route), and the compare view after the fine-tune step
    assert [s.key for s in wb.steps] == ["doctor", "fine-tune", "compare", "fuse", "quantize"]
    assert [s.key for s in wb.steps if s.key != "compare"] == [n for n in WORKBENCH_STAGES if n != "export"]  # the graph step exports
    assert wb.doctor.ok, wb.doctor.result.as_text()  # the test environment is set up: the doctor passes
    assert t[0].startswith(f"{DONE} 1. Environment")
    assert "2. Fine-tune — ready" in t[1]
    for i, needs in ((2, "a training run"), (3, "a trained checkpoint"), (4, "a fused graph")):
        assert t[i].startswith(WAITING) and needs in t[i]
        assert wb.steps[i].panel.run_button.disabled
    assert wb.accordion.selected_index == 1, "the first step that can run is open"
    assert not list(tmp_path.iterdir()), "no run folder until something runs"


def test_a_failing_doctor_is_not_marked_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import workbench.sessions.doctor as doctor_module
    from workbench.doctor.checks import Check, DoctorReport

    broken = DoctorReport([Check("ORTModule extensions", False, "not compiled", "run make setup")])
    monkeypatch.setattr(doctor_module, "run_doctor", lambda: broken)
    wb = Workbench(runs_root=tmp_path, background=False)
    assert not wb.doctor.ok
    assert not titles(wb)[0].startswith(DONE), titles(wb)[0]
    assert "ORTModule extensions" in wb.doctor.checks_html.value and "run make setup" in wb.doctor.checks_html.value
    assert "1 check(s) need attention" in wb.doctor.status.value


def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="did you mean 'max_steps'"):
        Workbench(maxsteps=3)


def test_run_all_fills_every_step(finished: Workbench) -> None:
    assert all(t.startswith(DONE) for t in titles(finished)), titles(finished)
    assert finished.compare.result is not None and finished.compare.input is finished.train.result
    assert finished.quant.result is not None
    # the graph step exported a checkpoint the training step wrote
    checkpoints = set(finished.train.checkpoints().values())
    assert finished.graph.export_result.model_source in checkpoints
    # and the quantization step quantized the graph step's fused graph
    assert Path(finished.quant.result.source_path) == Path(finished.graph.result.fused_path)


def test_one_run_folder_holds_every_stage(finished: Workbench) -> None:
    run = finished.run_dir
    assert run.parent == finished.runs_root
    assert (run / "train" / "compare.json").is_file()
    assert (run / "export" / "export.json").is_file()
    assert (run / "fusion" / "fusion.json").is_file()
    assert list(run.glob("quantize/*/quantize.json"))
    assert [p.name for p in finished.list_saved()] == [run.name]


def test_a_saved_run_opens_without_recomputing(finished: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    def no(*a, **k):
        raise AssertionError("opening a saved run must not recompute")

    for module, names in ((train_module, ("run_comparison",)), (workbench_graph, ("run_export", "run_fusion")),
                          (quant_module, ("run_quantization", "run_search"))):
        for name in names:
            monkeypatch.setattr(module, name, no)
    wb = Workbench(runs_root=finished.runs_root, saved=finished.run_dir, background=False)
    assert all(t.startswith(DONE) for t in titles(wb)), titles(wb)
    assert [r.losses for r in wb.train.result.runs] == [r.losses for r in finished.train.result.runs]
    assert wb.graph.result.fused_op_counts == finished.graph.result.fused_op_counts
    assert wb.quant.result.name == finished.quant.result.name
    assert not wb.graph.run_button.disabled, "opened checkpoints make the graph step runnable again"


def test_run_all_resumes_an_opened_run_and_stops_at_the_first_error(finished: Workbench, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """run_all goes through the one sequencer: resume keeps the steps that have a result, and the
    first failing step stops the rest and is raised (its panel shows it)."""
    def no(*a, **k):
        raise AssertionError("a resumed step must not recompute")

    for module, names in ((workbench_train, ("run_comparison",)), (workbench_graph, ("run_export", "run_fusion")),
                          (workbench_quant, ("run_quantization",))):  # what the registry's stages call
        for name in names:
            monkeypatch.setattr(module, name, no)
    # a copy of the finished run, in a runs folder of its own: the run without resume below starts a
    # new run folder, which must not land beside the shared fixture's (test_one_run_folder_... counts them)
    copy = tmp_path / finished.run_dir.name
    shutil.copytree(finished.run_dir, copy, symlinks=True)
    wb = Workbench(runs_root=tmp_path, saved=copy, background=False)
    results = wb.run_all(resume=True)
    assert results["quantize"].name == finished.quant.result.name
    with pytest.raises(AssertionError, match="must not recompute"):
        wb.run_all()  # without resume the fine-tune runs again: the patched run_comparison refuses
    assert isinstance(wb.train.error, AssertionError) and "must not recompute" in wb.train.error_box.value


def test_run_all_sequences_the_registrys_workbench_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import widgets.workbench as workbench_module
    from workbench.flow.sequence import SequenceResult

    given = []
    monkeypatch.setattr(workbench_module, "run_stages", lambda stages, **kw: given.extend(stages) or SequenceResult([], {}))
    Workbench(runs_root=tmp_path, background=False).run_all()
    assert [s.name for s in given] == list(WORKBENCH_STAGES)
    assert {s.name: s.needs for s in given} == {"doctor": (), "fine-tune": (), "export": ("fine-tune",), "fuse": ("export",),
                                                "quantize": ("fuse",)}


def test_opening_a_folder_without_results_is_shown(tmp_path: Path) -> None:
    wb = Workbench(runs_root=tmp_path, background=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no saved result"):
        wb.open_run(empty)
    assert wb.error_box.layout.display != "none" and "holds no saved result" in wb.error_box.value
    wb.saved_select.options = [("empty", str(empty))]
    wb.open_button.click()  # the button keeps the error in the widget
    assert "holds no saved result" in wb.error_box.value


def test_a_working_step_says_running_in_its_title(tmp_path: Path) -> None:
    wb = Workbench(runs_root=tmp_path, max_steps=2, background=False)
    seen: list[str] = []
    wb.train.on_busy(lambda p: seen.append(f"{p.busy}: {wb.accordion.get_title(1)}"))
    wb.train.run()
    assert seen[0] == "True: ● 2. Fine-tune — running"
    assert seen[-1].startswith(f"False: {DONE} 2. Fine-tune — done")


def test_write_report_button_reports_what_was_done(finished: Workbench) -> None:
    import json

    from workbench.report import validate_summary

    finished.report_button.click()
    assert finished.error_box.layout.display == "none", finished.error_box.value
    page, data = finished.run_dir / "report.html", finished.run_dir / "summary.json"
    assert page.is_file() and "Plotly.newPlot" in page.read_text()
    summary = json.loads(data.read_text())
    validate_summary(summary)
    assert summary["kind"] == "workbench" and summary["training"] is not None and summary["quantization"]
    assert "wrote" in finished.report_link.value
