"""The stage registry: every stage in one table (:data:`STAGES`), each front's route through it (:data:`ROUTES`), and
:func:`stages_for`, the one builder of a front's stage list (ARCHITECTURE.md, "Stages").

Its names are the ones every front records; a front adds hooks and resume loaders, never a body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from ..data.load import DataConfig
from ..flow.sequence import Stage, StageRecord, run_stages
from ..graph import ExportConfig, FusionConfig
from ..quant import SearchConfig
from ..runs import layout
from . import steps
from .steps import DoctorStep, FineTuneStep, Job, QuantizeStep


@dataclass(frozen=True)
class StageSpec:
    """One stage: ``inputs`` are the stages whose results it reads, ``outputs`` the run-layout names it writes."""

    name: str
    title: str
    config: Optional[type]
    run: Callable[..., Any]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    skip_reason: str = ""
    finally_: bool = False


STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec("doctor", "check the environment", DoctorStep, steps.doctor, (), (layout.DOCTOR_FILE,)),
    StageSpec("data", "load the data and its slices", DataConfig, steps.data, (), (layout.DATA_FILE,)),
    StageSpec("fine-tune", "fine-tune with each backend", FineTuneStep, steps.fine_tune, ("data",), (layout.TRAIN_DIR,)),
    StageSpec("export", "export to ONNX and validate", ExportConfig, steps.export, ("data", "fine-tune"), (layout.EXPORT_DIR,),
              skip_reason="no backend finished training with a checkpoint to export"),
    StageSpec("fuse", "fuse with the transformer optimizer", FusionConfig, steps.fuse, ("export",), (layout.FUSION_DIR,),
              skip_reason="needs the exported graph"),
    StageSpec("quantize", "quantize to INT8 and compare slices", QuantizeStep, steps.quantize, ("data", "export"),
              (layout.QUANTIZE_DIR,), skip_reason="needs the exported graph"),
    StageSpec("search", "search for nodes to keep in FP32", SearchConfig, steps.search, ("data", "export"), (layout.SEARCH_DIR,),
              skip_reason="needs the exported graph"),
    StageSpec("evaluate", "compare FP32 and INT8 slice by slice", bool, steps.evaluate, ("data", "quantize"),
              skip_reason="no quantized variant"),
    StageSpec("ship", "write the chosen graph, its tokenizer, settings and predict.py into chosen/", None, steps.ship, ("search",),
              (layout.CHOSEN_DIR,), skip_reason="no search result: nothing was chosen"),
    StageSpec("build", "build a tiny model of one architecture (the coverage run)", dict, steps.build, (), ()),
    StageSpec("report", "write report.html and summary.json", dict, steps.report, (), (layout.REPORT_FILE, layout.SUMMARY_FILE),
              finally_=True),
)}

@dataclass(frozen=True)
class Route:
    """The stages one front runs, in order; ``needs`` and ``skip_reasons`` override the registry's for this front."""

    name: str
    title: str
    stages: tuple[str, ...]
    needs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    skip_reasons: Mapping[str, str] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()

    def needs_of(self, name: str, running: Iterable[str]) -> tuple[str, ...]:
        """What ``name`` takes among ``running``: the route's own ``needs``, else the registry's inputs, where an input
        the route does not run stands for that input's own (the Workbench's graph step needs the fine-tune step)."""
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
    Route("embed-audit", "the audit of a sentence-transformers folder (workbench audit on an embedding model)",
          ("export", "quantize", "evaluate", "search", "report"), optional=frozenset({"report"}),
          needs={"quantize": ("export",), "evaluate": ("export", "quantize"), "search": ("export", "quantize")},
          skip_reasons={"quantize": _GRAPH_FAILED, "evaluate": "no quantized variant", "search": "no quantized variant"}),
    Route("coverage", "one architecture through every stage (the coverage matrix)",
          ("build", "fine-tune", "export", "fuse", "quantize"), optional=frozenset({"fine-tune"}),
          needs={"fine-tune": ("build",), "export": ("build",), "quantize": ("export", "fuse")}),
    Route("workbench", "the notebook Workbench's Run all (its graph step exports and fuses)",
          ("doctor", "fine-tune", "export", "fuse", "quantize"), needs={"quantize": ("fuse",)},
          skip_reasons={"export": "", "fuse": "", "quantize": ""}),
    Route("export-and-fuse", "the graph panel: export a checkpoint, fuse the export", ("export", "fuse"),
          skip_reasons={"fuse": ""}),
)}

# each front's stages, in order
DEMO_STAGES = ROUTES["demo"].stages
AUDIT_STAGES = ROUTES["audit"].stages
COVERAGE_STAGES = ROUTES["coverage"].stages
WORKBENCH_STAGES = ROUTES["workbench"].stages
EXPORT_AND_FUSE = ROUTES["export-and-fuse"].stages


def stages_for(route: str | Route, job: Job, *, resume: Optional[Mapping[str, Callable[[], Any]]] = None,
               leave_out: Iterable[str] = ()) -> list[Stage]:
    """The route's stages for ``run_stages``, each the registry's run then ``job.hooks[name]``; ``leave_out`` only
    ``optional`` ones. A config, hook or loader for a stage the route does not have is a ``ValueError`` naming it."""
    r = ROUTES[route] if isinstance(route, str) else route
    resume = dict(resume or {})
    dropped = set(leave_out)
    if dropped - r.optional:
        raise ValueError(f"the {r.name} route cannot leave out {sorted(dropped - r.optional)}; "
                         f"optional: {sorted(r.optional) or 'none'}")
    running = [n for n in r.stages if n not in dropped]
    extra = sorted((set(job.configs) | set(job.hooks) | set(resume)) - set(r.stages))
    if extra:
        raise ValueError(f"the {r.name} route has no stage {extra[0]!r}; its stages: {', '.join(r.stages)}")
    return [Stage(n, lambda rec, n=n: run_stage(n, rec, job), needs=r.needs_of(n, running[:i]), resume=resume.get(n),
                  finally_=STAGES[n].finally_, skip_reason=r.skip_reason(n))
            for i, n in enumerate(running)]


def run_stage(name: str, record: StageRecord, job: Job) -> Any:
    def run() -> Any:
        return STAGES[name].run(job.configs.get(name), record, job)

    result = job.around(name, run) if job.around is not None else run()
    if name in job.hooks:
        job.hooks[name](record, result)
    return result


def export_and_fuse(model: Any, export_cfg: ExportConfig, fusion_cfg: FusionConfig, run_dir, *, data: Any = None,
                    on_stage: Optional[Callable[[int, int, str, str], None]] = None) -> tuple[Any, Any]:
    """The graph panel's ``export-and-fuse`` route: ``(ExportResult, FusionReport)``; the first failure is raised as is."""
    job = Job(Path(run_dir), {"export": export_cfg, "fuse": fusion_cfg}, log=lambda _line: None, model=model, data=data)
    done = run_stages(stages_for("export-and-fuse", job), log=job.log, on_stage=on_stage, fatal=(Exception,))
    return done.results["export"], done.results["fuse"]
