"""Each stage's one run function, ``run(config, record, job) -> result``; a job's ``task`` picks the model-kind ones."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from ..flow import handoffs as flow
from ..flow.sequence import StageRecord
from ..runs import layout

Log = Callable[[str], None]
Hook = Callable[[StageRecord, Any], None]


@dataclass(frozen=True)
class Task:
    """The functions one kind of model runs its stages with; ``stages[name]`` replaces stage ``name``'s whole body."""

    export: Callable[..., Any]
    prepare_baseline: Callable[..., Any]
    quantize: Callable[..., Any]
    search: Callable[..., Any]
    judge: Callable[..., Any]
    stages: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


def _classifier() -> Task:
    from ..graph import run_export
    from ..quant import prepare_baseline, run_quantization, run_search
    from ..quant.search import search_results

    return Task(run_export, prepare_baseline, run_quantization, run_search, search_results)


def _embedding() -> Task:
    from ..embed import stages
    from ..embed.export import run_embed_export
    from ..embed.search import EmbedSearchBaseline, judge_audit_variants
    from ..embed.variants import build_variants
    from ..quant import run_search

    own = {n: getattr(stages, n) for n in ("export", "quantize", "evaluate", "search", "report")}
    return Task(run_embed_export, EmbedSearchBaseline, build_variants, run_search, judge_audit_variants, own)


TASKS: dict[str, Callable[[], Task]] = {"classifier": _classifier, "embedding": _embedding}


def by_task(body: Callable[..., Any]) -> Callable[..., Any]:
    """The stage ``body`` runs, unless the job's task runs that stage its own way (``Task.stages``)."""
    @functools.wraps(body)
    def run(cfg: Any, st: StageRecord, job: "Job") -> Any:
        return job.functions().stages.get(body.__name__, body)(cfg, st, job)

    return run


@dataclass
class Job:
    """One run of a route. ``model`` and ``data``: the front's, when no stage before gives them (a DataConfig is
    loaded when first needed); ``around(name, run)`` wraps each stage (the Workbench: inside its panel);
    ``report``: the report inputs the front knows, which hooks may add to."""

    run_dir: Path
    configs: Mapping[str, Any]
    log: Log = print
    hooks: Mapping[str, Hook] = field(default_factory=dict)
    around: Optional[Callable[[str, Callable[[], Any]], Any]] = None
    model: Any = None
    data: Any = None
    progress: Any = None
    stop: Any = None
    task: str = "classifier"
    report: dict = field(default_factory=dict)

    def functions(self) -> Task:
        if self.task not in TASKS:
            raise ValueError(f"no task {self.task!r}; tasks: {', '.join(TASKS)}")
        return TASKS[self.task]()

    def dataset(self, st: StageRecord) -> Any:
        from ..data.load import DataConfig, load_data

        if "data" in st.inputs:
            return st.inputs["data"]
        if isinstance(self.data, DataConfig):
            self.data = load_data(self.data)
        return self.data


@dataclass(frozen=True)
class DoctorStep:
    """The environment check: ``needs`` the checks that must pass (None: every one)."""

    needs: Optional[frozenset[str]] = None


@dataclass(frozen=True)
class FineTuneStep:
    train: Any  # TrainConfig
    compare: Any  # CompareConfig
    #: a backend that does not finish fails the stage (the coverage run records it instead)
    all_must_finish: bool = True


@dataclass(frozen=True)
class QuantizeStep:
    """``presets``: ``{folder name: QuantConfig}``; ``length_rows``: rows whose token lengths set the timing shapes."""

    baseline: Any  # BaselineConfig
    presets: Mapping[str, Any] = field(default_factory=dict)
    evaluation: Any = None  # EvalConfig
    slices: Any = None
    length_rows: Any = None


def doctor(cfg: Optional[DoctorStep], st: StageRecord, job: Job):
    from .. import runs
    from ..doctor.checks import run_doctor

    report = st.partial = run_doctor()
    runs.atomic_write_text(job.run_dir / layout.DOCTOR_FILE, report.as_text() + "\n")
    st.result_path = str(job.run_dir / layout.DOCTOR_FILE)
    needs = (cfg or DoctorStep()).needs
    missing = [c for c in report.failures if needs is None or c.name in needs]
    for c in report.failures:
        if c not in missing:
            job.log(f"      note: {c.name}: {c.value} (not needed here)")
    if missing:
        job.log(report.as_text())
        raise RuntimeError("the environment is incomplete: " + "; ".join(f"{c.name}: {c.value}; {c.fix}" for c in missing))
    return report


def data(cfg, st: StageRecord, job: Job):
    """The data: ``cfg`` a DataConfig to load, else the front's data (the audit's file, read and checked)."""
    if cfg is not None:
        job.data = cfg
    return job.dataset(st)


def fine_tune(cfg: FineTuneStep, st: StageRecord, job: Job):
    from ..train import comparison_table, load_check, run_comparison, save_verdicts, verdict_lines, verdicts_for

    t = cfg.train
    job.log(f"   {t.model}, {t.max_steps or t.epochs} {'steps' if t.max_steps else 'epochs'} of {t.examples_per_step}, "
            f"backends {', '.join(b.value for b in cfg.compare.backends)}")
    profile, before = load_check()
    comparison = run_comparison(cfg.train, cfg.compare, job.run_dir / layout.TRAIN_DIR, progress=job.progress, stop=job.stop)
    st.result_path = str(job.run_dir / layout.COMPARE)
    job.log(comparison_table(comparison))
    verdicts = verdicts_for(comparison, profile=profile, load=load_check(profile, before)[1])
    save_verdicts(verdicts, job.run_dir / layout.TRAIN_DIR)
    st.headline = {f"verdict ({v.backend})": v.text for v in verdicts.verdicts}
    for v in verdicts.verdicts:
        for line in verdict_lines(v):
            job.log(f"   {line}")
    not_ok = [f"{r.backend.value} {r.status.value}: {r.reason}" for r in comparison.runs if r.status.value != "ok"]
    if not_ok and cfg.all_must_finish:  # a failed stage; export still takes a backend that finished (flow's rule)
        if flow.checkpoint_to_export(comparison) is not None:
            st.partial = comparison
        raise RuntimeError("; ".join(not_ok))
    return comparison


@by_task
def export(cfg, st: StageRecord, job: Job):
    """The model built before (coverage), the checkpoint flow picks from the fine-tuning, or the front's model."""
    model = st.inputs.get("build", job.model)
    if "build" not in st.inputs and "fine-tune" in st.inputs:
        pick = flow.checkpoint_to_export(st.inputs["fine-tune"])
        if pick is None:
            raise RuntimeError("no backend finished training with a checkpoint to export")
        job.log(f"   {pick.note}")
        model = pick.path
    result = job.functions().export(str(model), cfg, job.run_dir / layout.EXPORT_DIR, data=job.dataset(st))
    st.result_path = str(job.run_dir / layout.EXPORT)
    job.log(f"   {result.onnx_path}: {result.node_count} nodes, {result.size_mib:.1f} MiB; {result.validation.message}")
    return result


def fuse(cfg, st: StageRecord, job: Job):
    from ..graph import run_fusion

    fusion = run_fusion(st.inputs["export"], cfg, job.run_dir / layout.FUSION_DIR)
    st.result_path = str(job.run_dir / layout.FUSION)
    job.log("   fused: " + (", ".join(f"{k} {n}" for k, n in fusion.fused_op_counts.items()) or "nothing fused"))
    for d in fusion.diagnoses:
        job.log(f"   missing fusion: {d.text}")
    return fusion


@by_task
def quantize(cfg: QuantizeStep, st: StageRecord, job: Job):
    """``(baseline, [QuantResult, ...])``, or None when no preset was quantized."""
    from ..quant.config import machine_defaults

    task, log, export = job.functions(), job.log, st.inputs["export"]
    pick = flow.graph_to_quantize(export, st.inputs.get("fuse"))
    log(f"   FP32 graph: {pick.note}")
    base_cfg = cfg.baseline
    if cfg.length_rows is not None:
        from ..data.token_lengths import length_stats, with_data_shapes

        lengths = length_stats(cfg.length_rows, export.load_tokenizer(), base_cfg.max_length)
        timing = dataclasses.replace(base_cfg.timing, shapes=with_data_shapes(base_cfg.timing.shapes, lengths))
        base_cfg = dataclasses.replace(base_cfg, timing=timing)
        log(f"   the data's token lengths: {lengths.text()}; timed at " + ", ".join(f"{b}x{s}" for b, s in timing.shapes)
            + " (batch 1 at the median and 95th percentile)")
    base = task.prepare_baseline(pick.path, job.dataset(st), job.run_dir / layout.BASELINE, base_cfg,
                                 export=export, slices=cfg.slices)
    for what in (base.scoring_work, base.fp32_scoring):
        if what is not None:
            log(f"   {what.text()}")
    log(f"   INT8 weights on this CPU: {machine_defaults().why}")  # the presets follow it (each variant's notes say so)
    results: list = []
    st.partial = (base, results)  # later stages take what was quantized before a failure
    for name, q in cfg.presets.items():
        res = task.quantize(base, q, job.run_dir / layout.quantize_dir(name), evaluation=cfg.evaluation)
        results.append(res)
        log(f"   {name}: accuracy {res.accuracy:.3f} ({100 * res.accuracy_delta:+.1f} points), largest slice drop "
            f"{100 * res.report.max_slice_drop():.1f} points, {res.speedup:.2f}x FP32 speed, {res.size_mib:.1f} MiB "
            f"(FP32 {res.fp32_size_mib:.1f}), {len(res.report.flips)} flipped predictions")
        if res.scoring is not None:
            log(f"   {name} scoring: {res.scoring.text()}")
    st.result_path = str(job.run_dir / layout.QUANTIZE_DIR)
    return (base, results) if results else None


@by_task
def evaluate(include_small_slices: bool, st: StageRecord, job: Job):
    for r in st.inputs["quantize"][1]:
        w = next((d for d in r.report.worst_slices(include_small=bool(include_small_slices)) if d.n), None)
        if w is not None:
            job.log(f"   {r.name}: worst slice {w.slice} (n={w.n}) {100 * w.delta:+.1f} points "
                    f"[{100 * w.ci_low:+.1f}, {100 * w.ci_high:+.1f}]")
    return True


@by_task
def search(cfg, st: StageRecord, job: Job):
    """No candidates: judge the variants already quantized; else quantize them on the baseline (or flow's graph)."""
    task, out = job.functions(), job.run_dir / layout.SEARCH_DIR
    baseline, variants = st.inputs.get("quantize") or (None, [])
    if cfg.candidates == ():
        found = task.judge(variants, cfg, out)
    else:
        graph = baseline if baseline is not None else flow.graph_to_quantize(st.inputs["export"], st.inputs.get("fuse")).path
        found = task.search(graph, cfg, out, data=job.dataset(st), export=st.inputs["export"], previous=variants,
                            progress=lambda i, n, what: job.log(f"   candidate {i}/{n}: {what}"))
    st.result_path = str(job.run_dir / layout.SEARCH)
    st.headline = {"best": found.message}
    job.log(f"   {found.message}")
    return found


def ship(cfg, st: StageRecord, job: Job):
    """The graph the verdict keeps into chosen/, with its tokenizer, labels, settings and predict.py."""
    from ..quant.ship import ship_search

    shipped = ship_search(st.inputs["search"], job.run_dir / layout.CHOSEN_DIR, unfused=job.run_dir / layout.EXPORTED_GRAPH)
    job.log(f"   {shipped.text}")
    return shipped


def build(cfg: Mapping[str, Any], st: StageRecord, job: Job):
    """A tiny model of one architecture (the coverage run): ``cfg`` is build_tiny's arguments."""
    from .tiny import build_tiny

    return build_tiny(cfg["model_type"], job.run_dir / "model", seed=cfg.get("seed", 0))


@by_task
def report(cfg: Optional[Mapping[str, Any]], st: StageRecord, job: Job):
    """report.html and summary.json of every result so far; ``cfg`` and ``job.report``: the front's report inputs."""
    from ..report import ReportInputs, write_report

    done = st.inputs
    stages = [{"name": o.name, "status": o.status, "seconds": o.seconds, "message": o.message} for o in st.before]
    inputs = ReportInputs(**{
        "run_dir": job.run_dir, "doctor": done.get("doctor"), "export": done.get("export"), "fusion": done.get("fuse"),
        "comparison": done.get("fine-tune"), "quant": (done.get("quantize") or (None, []))[1], "search": done.get("search"),
        "stages": stages + [{"name": "report", "status": "ok", "seconds": 0.0, "message": ""}], **dict(cfg or {}), **job.report})
    rpath, spath, summary = write_report(inputs, job.run_dir)
    st.result_path = str(rpath)
    st.headline = {"verdict": summary["verdict"]["text"]}
    job.log(f"   wrote {rpath} and {spath.name}\n   verdict: {summary['verdict']['text']}")
    return rpath, spath, summary
