"""The stage registry: every stage's name, title, config type, run function, inputs and outputs in
one table; the route each front runs through it; and the one builder of a front's list of stages.

    from workbench.workflows.stages import STAGES, ROUTES, stages_for
    STAGES["quantize"].config           # QuantConfig
    ROUTES["audit"].stages              # ("doctor", "data", "export", "fuse", "quantize", "evaluate", ..., "ship", "report")
    stages = stages_for("demo", {"doctor": do_doctor, "data": do_data, ...})   # [Stage, ...] for run_stages

A **route** is the ordered registry names one front runs (the demo, the audit, the coverage run, the
notebook ``Workbench``, the graph panel's export and fuse). What a front's list says besides its
bodies comes from here: the names and their order, what each stage ``needs`` (the registry's
``inputs`` that the route runs, or the nearest stages in the route they come from; a route declares
its own where its stage takes something else), why a stage is skipped when a need is missing, and
which stages run even after a stop (the report). A front supplies only the body of each stage
(its glue: logging, figures, headlines) and, where it has them, resume loaders.

The registry's names are the ones every front records (``demo.json``, ``audit.json``,
``summary.json``, the logs). Plans (``workbench run plan.yaml``) are
:mod:`workbench.workflows.plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from ..data.load import DataConfig
from ..flow.sequence import Stage, run_stages
from ..graph import ExportConfig, FusionConfig
from ..quant import EvalConfig, QuantConfig, SearchConfig
from ..runs import layout
from ..train import TrainConfig


def _doctor(*args, **kw):
    from ..doctor.checks import run_doctor

    return run_doctor(*args, **kw)


def _load_data(*args, **kw):
    from ..data.load import load_data

    return load_data(*args, **kw)


def _train(*args, **kw):
    from ..train import run_comparison

    return run_comparison(*args, **kw)


def _export(*args, **kw):
    from ..graph import run_export

    return run_export(*args, **kw)


def _fuse(*args, **kw):
    from ..graph import run_fusion

    return run_fusion(*args, **kw)


def _quantize(*args, **kw):
    from ..quant import run_quantization

    return run_quantization(*args, **kw)


def _search(*args, **kw):
    from ..quant import run_search

    return run_search(*args, **kw)


def _evaluate(*args, **kw):
    from ..quant import evaluate_slices

    return evaluate_slices(*args, **kw)


def _build(*args, **kw):
    from .tiny import build_tiny

    return build_tiny(*args, **kw)


def _ship(*args, **kw):
    from ..quant.ship import ship_search

    return ship_search(*args, **kw)


def _report(*args, **kw):
    from ..report import write_run_report

    return write_run_report(*args, **kw)


@dataclass(frozen=True)
class StageSpec:
    """One stage: ``run(input, config, out)``; ``inputs`` are the stages whose results it reads,
    ``outputs`` the run-layout names it writes; ``skip_reason`` says why it is skipped when an input
    is missing (empty: the sequencer's "needs the <stage> result"); ``finally_`` stages run whatever
    happened before them, stopped or not (the report)."""

    name: str
    title: str
    config: Optional[type]
    run: Callable[..., Any]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    skip_reason: str = ""
    finally_: bool = False


STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec("doctor", "check the environment", None, _doctor, (), (layout.DOCTOR_FILE,)),
    StageSpec("data", "load the data and its slices", DataConfig, _load_data, (), (layout.DATA_FILE,)),
    StageSpec("fine-tune", "fine-tune with each backend", TrainConfig, _train, ("data",), (layout.TRAIN_DIR,)),
    StageSpec("export", "export to ONNX and validate", ExportConfig, _export, ("data", "fine-tune"), (layout.EXPORT_DIR,),
              skip_reason="no backend finished training with a checkpoint to export"),
    StageSpec("fuse", "fuse with the transformer optimizer", FusionConfig, _fuse, ("export",), (layout.FUSION_DIR,),
              skip_reason="needs the exported graph"),
    StageSpec("quantize", "quantize to INT8 and compare slices", QuantConfig, _quantize, ("data", "export"),
              (layout.QUANTIZE_DIR,), skip_reason="needs the exported graph"),
    StageSpec("search", "search for nodes to keep in FP32", SearchConfig, _search, ("data", "export"), (layout.SEARCH_DIR,),
              skip_reason="needs the exported graph"),
    StageSpec("evaluate", "compare FP32 and INT8 slice by slice", EvalConfig, _evaluate, ("data", "quantize"),
              skip_reason="no quantized variant"),
    StageSpec("ship", "write the chosen graph, its tokenizer, settings and predict.py into chosen/", None, _ship, ("search",),
              (layout.CHOSEN_DIR,), skip_reason="no search result: nothing was chosen"),
    StageSpec("build", "build a tiny model of one architecture (the coverage run)", None, _build, (), ()),
    StageSpec("report", "write report.html and summary.json", None, _report, (), (layout.REPORT_FILE, layout.SUMMARY_FILE),
              finally_=True),
)}

@dataclass(frozen=True)
class Route:
    """The stages one front runs, in order. ``needs`` and ``skip_reasons`` are where the front's
    stage takes other results than the registry's ``inputs`` say (or says why otherwise);
    ``optional`` stages the front may leave out (``stages_for(..., leave_out=...)``)."""

    name: str
    title: str
    stages: tuple[str, ...]
    needs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    skip_reasons: Mapping[str, str] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()

    def needs_of(self, name: str, running: Iterable[str]) -> tuple[str, ...]:
        """What stage ``name`` takes among the stages ``running`` before it: the route's own
        declaration, else the registry's inputs, an input the route does not run standing for the
        stages that input itself takes (the Workbench's graph step needs the fine-tune step)."""
        before = list(running)
        if name in self.needs:
            return tuple(n for n in self.needs[name] if n in before)
        found: list[str] = []
        todo = list(STAGES[name].inputs)
        while todo:
            n = todo.pop(0)
            if n in before and n not in found:
                found.append(n)
            elif n not in self.stages:
                todo += STAGES[n].inputs
        return tuple(found)

    def skip_reason(self, name: str) -> str:
        return self.skip_reasons.get(name, STAGES[name].skip_reason)


_GRAPH_FAILED = "needs an exported graph that passed validation"
ROUTES: dict[str, Route] = {r.name: r for r in (
    Route("demo", "the walkthrough (workbench demo, workbench run PLAN)",
          ("doctor", "data", "fine-tune", "export", "fuse", "quantize", "search", "report"), optional=frozenset({"search"})),
    Route("audit", "the audit of a user's classifier (workbench audit)",
          ("doctor", "data", "export", "fuse", "quantize", "evaluate", "search", "ship", "report"),
          needs={"export": ("doctor", "data"), "evaluate": ("quantize",), "search": ("quantize",), "ship": ("search",)},
          skip_reasons={"export": "the environment check or the data step failed", "fuse": _GRAPH_FAILED,
                        "quantize": _GRAPH_FAILED}),
    Route("coverage", "one architecture through every stage (the coverage matrix)",
          ("build", "fine-tune", "export", "fuse", "quantize"), optional=frozenset({"fine-tune"}),
          needs={"fine-tune": ("build",), "export": ("build",), "quantize": ("export", "fuse")}),
    Route("workbench", "the notebook Workbench's Run all (its graph step exports and fuses)",
          ("doctor", "fine-tune", "fuse", "quantize"), needs={"quantize": ("fuse",)},
          skip_reasons={"fuse": "", "quantize": ""}),
    Route("export-and-fuse", "the graph panel: export a checkpoint, fuse the export", ("export", "fuse"),
          skip_reasons={"fuse": ""}),
)}

# each front's stages, in order
DEMO_STAGES = ROUTES["demo"].stages
AUDIT_STAGES = ROUTES["audit"].stages
COVERAGE_STAGES = ROUTES["coverage"].stages
WORKBENCH_STAGES = ROUTES["workbench"].stages
EXPORT_AND_FUSE = ROUTES["export-and-fuse"].stages


def stages_for(route: str | Route, bodies: Mapping[str, Callable[[Any], Any]], *,
               resume: Optional[Mapping[str, Callable[[], Any]]] = None, leave_out: Iterable[str] = ()) -> list[Stage]:
    """The list of :class:`~workbench.flow.sequence.Stage` a front gives ``run_stages``: the
    route's stages in order (less ``leave_out``, each one of its ``optional``), each running
    ``bodies[name]`` (``body(record) -> result``), with the registry's needs, skip reasons and
    ``finally_``; ``resume[name]`` loads a stage's saved result. A body or loader for a stage the
    route does not have, or a stage it runs without a body, is a ``ValueError`` naming it."""
    r = ROUTES[route] if isinstance(route, str) else route
    resume = dict(resume or {})
    dropped = set(leave_out)
    if dropped - r.optional:
        raise ValueError(f"the {r.name} route cannot leave out {sorted(dropped - r.optional)}; "
                         f"optional: {sorted(r.optional) or 'none'}")
    running = [n for n in r.stages if n not in dropped]
    extra = sorted((set(bodies) | set(resume)) - set(r.stages))
    missing = [n for n in running if n not in bodies]
    if extra:
        raise ValueError(f"the {r.name} route has no stage {extra[0]!r}; its stages: {', '.join(r.stages)}")
    if missing:
        raise ValueError(f"the {r.name} route runs {missing[0]!r} but no body was given for it")
    return [Stage(n, bodies[n], needs=r.needs_of(n, running[:i]), resume=resume.get(n),
                  finally_=STAGES[n].finally_, skip_reason=r.skip_reason(n))
            for i, n in enumerate(running)]


def export_and_fuse(model: Any, export_cfg: ExportConfig, fusion_cfg: FusionConfig, run_dir, *, data: Any = None,
                    on_stage: Optional[Callable[[int, int, str, str], None]] = None) -> tuple[Any, Any]:
    """Export ``model`` (a checkpoint folder or a built-in name) into ``run_dir/export`` and fuse the
    export into ``run_dir/fusion``: the ``export-and-fuse`` route through the one sequencer, what
    the graph panel runs. The first failure is raised as it is. Returns ``(ExportResult, FusionReport)``."""
    from ..graph import run_export, run_fusion

    run = Path(run_dir)
    done = run_stages(stages_for("export-and-fuse", {
        "export": lambda st: run_export(model, export_cfg, run / layout.EXPORT_DIR, data=data),
        "fuse": lambda st: run_fusion(st.inputs["export"], fusion_cfg, run / layout.FUSION_DIR),
    }), log=lambda _line: None, on_stage=on_stage, fatal=(Exception,))
    return done.results["export"], done.results["fuse"]
