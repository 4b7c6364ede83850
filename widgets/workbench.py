"""The Workbench: every panel in order, as steps.

    environment -> fine-tune -> compare -> export and fuse -> quantize

The steps' keys are the stage registry's names (:mod:`workbench.workflows.stages`: ``doctor``,
``fine-tune``, ``fuse``, ``quantize``, the registry's workbench route; ``compare`` is a view of
the fine-tune step's comparison, not a stage); the titles are the Workbench's own words.

Each step is enabled when its inputs exist (compare needs training runs, the graph step a trained
checkpoint, quantization a fused graph) and its title says whether it is done. Results flow from
one step to the next by :mod:`workbench.flow.handoffs`'s rules (the checkpoint the demo exports, the graph
it quantizes); every step writes into one run folder (:mod:`workbench.runs.layout`), and a saved
run (from the Workbench, ``workbench demo`` or the CLI) can be opened from any of its folders
without recomputing anything.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Callable, Optional

import ipywidgets as W

from workbench import runs
from workbench.flow import handoffs as flow
from workbench.flow.sequence import run_stages
from workbench.workflows.stages import stages_for
from workbench.workflows.steps import DoctorStep, FineTuneStep, Job, QuantizeStep

from .base import MUTED_COLOUR, Panel, check_kwargs, error_html
from .doctor import DoctorBanner
from .graph import GraphPanel
from .quant import QuantPanel
from .train import ComparePanel, TrainPanel

DONE, READY, WAITING, FAILED = "✓", "●", "○", "✗"


class Step:
    """One step: its panel, what it waits for, and whether it is done."""

    def __init__(self, key: str, title: str, panel: Panel, missing: Callable[[], Optional[str]], done: Callable[[], bool]):
        self.key, self.title, self.panel = key, title, panel
        self._missing, self._done = missing, done

    @property
    def missing(self) -> Optional[str]:
        """What input is missing ("" or None when the step can run)."""
        return self._missing()

    @property
    def done(self) -> bool:
        return self._done()

    @property
    def state(self) -> str:
        if self.panel.busy:
            return "running"
        if self.done:
            return "done"
        if self.panel.error is not None:
            return "failed"
        return "waiting" if self.missing else "ready"

    def label(self, number: int) -> str:
        state = self.state
        mark = {"done": DONE, "failed": FAILED, "waiting": WAITING}.get(state, READY)
        text = f"waiting for {self.missing}" if state == "waiting" else state
        return f"{mark} {number}. {self.title} — {text}"


class Workbench(W.VBox):
    """The whole path in one widget: environment, fine-tune, compare, export and fuse, quantize.

    Options (all optional): ``model``, ``preset``, ``backends``, ``max_steps``, ``data`` (for the
    fine-tune step, see :class:`~widgets.train.TrainPanel`), ``export_preset``, ``fusion_preset``
    (see :class:`~widgets.graph.GraphPanel`), ``quant_preset``, ``timing``, ``n_boot`` (see
    :class:`~widgets.quant.QuantPanel`), ``run_dir`` (the run folder every step writes into;
    default a new folder under ``runs_root``), ``runs_root`` (where runs are listed and created;
    default ``runs/`` or ``$WORKBENCH_RUNS``), ``saved`` (a run folder to open without
    recomputing), ``background`` (buttons run in a background thread; default True).

    The panels are ``wb.doctor``, ``wb.train``, ``wb.compare``, ``wb.graph``, ``wb.quant``;
    ``wb.steps`` lists them in order; :meth:`run_all` runs every step with the current controls.
    """

    # each step's defaults are its panel's own (one place each), under the Workbench's names
    OPTIONS = {
        **{k: TrainPanel.OPTIONS[k] for k in ("model", "preset", "backends", "max_steps", "data")},
        **{k: GraphPanel.OPTIONS[k] for k in ("export_preset", "fusion_preset")},
        "quant_preset": QuantPanel.OPTIONS["preset"],
        **{k: QuantPanel.OPTIONS[k] for k in ("timing", "n_boot")},
        "run_dir": None,
        "runs_root": None,
        "saved": None,
        "background": True,
    }

    def __init__(self, **kwargs: Any) -> None:
        check_kwargs(type(self).__name__, kwargs, list(self.OPTIONS))
        self.options = {**self.OPTIONS, **kwargs}
        self._run_dir: Optional[Path] = Path(self.options["run_dir"]) if self.options["run_dir"] else None
        root = self.options["runs_root"]
        self.runs_root = Path(root) if root is not None else runs.DEFAULT_ROOT
        bg = bool(self.options["background"])
        o = self.options

        self.doctor = DoctorBanner(background=False)
        self.train = TrainPanel(model=o["model"], preset=o["preset"], backends=tuple(o["backends"]), max_steps=o["max_steps"],
                                data=o["data"], run_dir=lambda: self.run_dir, background=bg)
        self.compare = ComparePanel(background=False)
        self.graph = GraphPanel(export_preset=o["export_preset"], fusion_preset=o["fusion_preset"],
                                run_dir=lambda: self.run_dir, background=bg)
        self.quant = QuantPanel(preset=o["quant_preset"], timing=o["timing"], n_boot=o["n_boot"],
                                run_dir=lambda: self.run_dir, background=bg)
        self.steps = [
            Step("doctor", "Environment", self.doctor, lambda: None, lambda: self.doctor.ok),
            Step("fine-tune", "Fine-tune", self.train, lambda: None, lambda: self.train.result is not None),
            Step("compare", "Compare", self.compare,
                 lambda: None if self.train.result is not None else "a training run",
                 lambda: self.compare.result is not None),
            Step("fuse", "Export and fuse", self.graph,
                 lambda: None if self.train.checkpoints() else "a trained checkpoint (fine-tune first, or open a saved run)",
                 lambda: self.graph.result is not None),
            Step("quantize", "Quantize", self.quant,
                 lambda: None if self.quant.options["graph"] is not None else "a fused graph (export and fuse first)",
                 lambda: self.quant.result is not None),
        ]
        self.train.on_result(self._after_train)
        self.graph.on_result(self._after_graph)
        for step in self.steps:  # titles follow the results; the open step stays open (its results are on show)
            step.panel.on_result(lambda _p: self.refresh())
            step.panel.on_busy(lambda _p: self.refresh())  # "running" shows in the step's title

        self.header = W.HTML("")
        self.saved_select = W.Dropdown(options=[], description="saved run", layout=W.Layout(width="60%"))
        self.open_button = W.Button(description="Open", icon="folder-open", tooltip="show a saved run's results without recomputing")
        self.reload_button = W.Button(description="", icon="refresh", tooltip="list the saved runs again", layout=W.Layout(width="40px"))
        self.open_button.on_click(lambda _b: self._open_from_button())
        self.reload_button.on_click(lambda _b: self.list_saved())
        self.error_box = W.HTML("", layout=W.Layout(display="none"))
        self.report_button = W.Button(description="Write report", icon="file-text",
                                      tooltip="write report.html and summary.json of what has been done so far into the run folder")
        self.report_button.on_click(lambda _b: self._report_from_button())
        self.report_link = W.HTML("")
        self.accordion = W.Accordion(children=[s.panel for s in self.steps])
        self.add_class("wb-workbench")
        super().__init__([self.header, W.HBox([self.saved_select, self.open_button, self.reload_button]),
                          W.HBox([self.report_button, self.report_link]), self.error_box,
                          self.accordion])
        self.list_saved()
        if self.options["saved"] is not None:
            self.open_run(self.options["saved"])
        self.refresh(advance=True)

    # ---- the run folder ------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        """The folder this Workbench writes into (created on first use)."""
        if self._run_dir is None:
            self._run_dir = runs.new_run_dir("workbench", self.runs_root)
        return self._run_dir

    # ---- flow between steps --------------------------------------------------------------------
    def _after_train(self, panel: Panel) -> None:
        comparison = panel.result
        self.compare.set_input(comparison)
        # the checkpoint the demo would export comes first (flow.checkpoint_to_export: ORTModule's when it ran in ONNX Runtime)
        self.graph.set_models(flow.ordered_checkpoints(comparison))
        data = comparison.runs[0].config.data if comparison.runs else None
        if data is not None:
            self.graph.set_data(data)
            self.quant.options["data"] = data
        self.refresh()

    def _after_graph(self, panel: Panel) -> None:
        pick = flow.graph_to_quantize(self.graph.export_result, self.graph.result)
        if pick is not None:
            self.quant.set_graph(self.graph.result if pick.kind == "fused" else pick.path, export=self.graph.export_result)
        self.refresh()

    def refresh(self, advance: bool = False) -> None:
        """Update the step titles and which steps may run; with ``advance``, open the first step
        that is ready and not done."""
        for i, step in enumerate(self.steps):
            if step.key in ("fuse",):  # the other panels block themselves until given their input
                step.panel.block(step.missing)
            self.accordion.set_title(i, step.label(i + 1))
        where = f"run folder: {self._run_dir}" if self._run_dir else f"run folder: created under {self.runs_root}/ on the first run"
        self.header.value = (
            '<h2 style="margin:4px 0">ORT Workbench</h2>'
            f'<div style="color:{MUTED_COLOUR}">Steps in order; each opens when its inputs exist. {html.escape(where)}</div>'
        )
        if advance:
            for i, step in enumerate(self.steps):
                if not step.done and not step.missing:
                    self.accordion.selected_index = i
                    break

    # ---- saved runs ----------------------------------------------------------------------------
    def list_saved(self) -> list[Path]:
        """Fill the saved-run list from ``runs_root`` (newest first)."""
        found = [r.path for r in runs.list_runs(self.runs_root)]
        self.saved_select.options = [(f"{p.name}", str(p)) for p in found]
        self.open_button.disabled = not found
        return found

    def open_run(self, run_dir: str | os.PathLike) -> dict[str, Path]:
        """Show every result saved in the run ``run_dir`` belongs to (its root, a stage folder or a
        result file: :func:`workbench.flow.handoffs.open_run`) in its step, without recomputing.

        Returns ``{stage: file}`` for what was opened; raises ``FileNotFoundError`` when the folder
        holds no result (the error is also shown at the top of the Workbench).
        """
        self.error_box.layout.display = "none"
        try:
            run = flow.open_run(run_dir)
            found = run.results()
            if run.comparison() is not None:
                self.train.show(run.comparison())
            if run.fusion() is not None:
                self.graph.show(run.fusion())
            pick = run.graph_to_quantize()
            if pick is not None and self.quant.options["graph"] is None:
                self.quant.set_graph(pick.path, export=run.export())
            elif self.quant.options["graph"] is None and run.quantization() is not None:  # only quantizations saved
                self.quant.set_graph(run.quantization().source_path)
            if run.quantization() is not None:
                self.quant.show(run.quantization())
            if run.search() is not None:
                self.quant.show_search(run.search())
        except Exception as exc:
            self.error_box.value = error_html(exc, f"opening {run_dir}")
            self.error_box.layout.display = None
            raise
        self.refresh(advance=True)
        return found

    def _open_from_button(self) -> None:
        if not self.saved_select.value:
            return
        try:
            self.open_run(self.saved_select.value)
        except Exception:  # noqa: BLE001 - open_run() shows it at the top of the Workbench
            pass

    # ---- the report ------------------------------------------------------------------------------
    def write_report(self) -> Path:
        """Write ``report.html`` and ``summary.json`` (:mod:`workbench.report`) of what the run folder
        holds so far; returns the report's path (also shown beside the button)."""
        from workbench.report import write_run_report

        page, _, summary = write_run_report(self.run_dir, kind="workbench", doctor=self.doctor.result)
        self.report_link.value = (f'<span style="color:{MUTED_COLOUR}">wrote {html.escape(str(page))}: '
                                  f'{html.escape(summary["verdict"]["text"])}</span>')
        return page

    def _report_from_button(self) -> None:
        self.error_box.layout.display = "none"
        try:
            self.write_report()
        except Exception as exc:  # noqa: BLE001 - shown at the top of the Workbench, like open_run's errors
            self.error_box.value = error_html(exc, "writing the report")
            self.error_box.layout.display = None

    # ---- everything at once --------------------------------------------------------------------
    def run_all(self, resume: bool = False) -> dict[str, Any]:
        """Run every step in order with the current controls (synchronously), through the one
        sequencer (:func:`workbench.flow.sequence.run_stages`) with the registry's workbench route:
        each stage is the registry's run, inside its panel (busy state, progress, the result shown);
        stops at the first error, which its panel shows, and raises it. ``resume=True`` keeps the
        steps that already have a result (a saved run opened, a step run by hand) and runs the rest.
        Returns ``{step: result}``, keyed by the stage names (and ``compare``)."""
        panels = {"doctor": self.doctor, "fine-tune": self.train, "export": self.graph, "fuse": self.graph, "quantize": self.quant}
        kept = {"fine-tune": lambda: self.train.result, "export": lambda: self.graph.export_result,
                "fuse": lambda: self.graph.result, "quantize": lambda: self.quant.result}
        done = run_stages(stages_for("workbench", self._job(), resume=kept), log=lambda _line: None, fail_fast=True, resume=resume)
        failed = next((o for o in done.outcomes if o.status == "failed"), None)
        if failed is not None:
            error = panels[failed.name].error
            raise error if error is not None else RuntimeError(f"{failed.name}: {failed.message}")
        return {s.key: s.panel.result for s in self.steps}

    def _job(self) -> Job:
        """The workbench route's configs from the panels' controls; each stage runs in its panel."""
        from workbench.sessions.base import model_folder
        from workbench.quant import BaselineConfig, EvalConfig, machine_preset
        from workbench.train import CompareConfig

        t, q = self.train.values(), self.quant.values()
        train = self.train.config(t)
        train = train.replace(model=model_folder(train.model))  # a Hugging Face Hub id: its folder in the local cache
        export, fusion = self.graph.configs()
        configs = {"doctor": DoctorStep(frozenset()),  # the Doctor panel shows what fails; the steps go on
                   "fine-tune": FineTuneStep(train, CompareConfig(backends=tuple(t["backends"]), isolate=bool(t["isolate"])),
                                             all_must_finish=False),
                   "export": export, "fuse": fusion,
                   "quantize": QuantizeStep(BaselineConfig(timing=self.quant._timing(q)), {q["preset"]: machine_preset(q["preset"])},
                                            EvalConfig(n_boot=int(q["n_boot"])))}
        return Job(self.run_dir, configs, log=lambda _line: None, data=train.data, around=self._in_panel,
                   progress=self.train._on_progress, stop=self.train.session.stop_event)

    def _in_panel(self, name: str, run: Callable[[], Any]) -> Any:
        """Stage ``name``'s run inside its panel's run protocol; the session keeps what the panel shows."""
        if name == "fine-tune":
            self.train._start_live(list(self.train.values()["backends"]))
        panel = {"doctor": self.doctor, "fine-tune": self.train, "export": self.graph, "fuse": self.graph, "quantize": self.quant}[name]
        if name == "export":
            return panel._execute(lambda _values: run(), lambda _r: None, lambda r: f"exported {r.onnx_path}", lambda _r: MUTED_COLOUR,
                                  keep=lambda r: r)
        keep = {"fuse": self.graph.session.open, "quantize": lambda q: self.quant.session.keep(q[1][0])}.get(name)
        return panel._execute(lambda _values: run(), panel._draw, panel._summary, panel._summary_colour, keep=keep)
