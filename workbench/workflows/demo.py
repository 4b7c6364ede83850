"""The walkthrough, headless (``workbench demo``): every stage on the built-in model and data, into one run folder.

    doctor -> fine-tune (eager / ORTModule / torch.compile) -> export -> fuse -> quantize + slices -> search

Each stage writes its result and figures as soon as it finishes, so a later failure never loses them; a failed
stage is recorded and the stages not needing its output still run; ``demo.json`` and ``summary.md`` tell the story.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..core.options import field_help
from .. import runs
from ..runs import layout
from ..graph import ExportConfig
from ..graph import FusionConfig
from ..quant import (DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE, DEFAULT_MIN_SPEEDUP, DEFAULT_N_BOOT, PRESETS, BaselineConfig,
                     EvalConfig, SearchConfig, TimingConfig, machine_preset)
from ..flow.sequence import StageOutcome, run_stages
from ..train import DEFAULT_BACKENDS, Backend, CompareConfig, TrainConfig
from .stages import stages_for
from .steps import FineTuneStep, Job, QuantizeStep

Log = Callable[[str], None]


@dataclass(frozen=True)
class DemoConfig:
    """What the walkthrough runs. ``quant_presets`` are names from :data:`workbench.quant.PRESETS`."""

    train: TrainConfig = field(default_factory=TrainConfig.demo, metadata={"help": "how each backend fine-tunes the model"})
    backends: tuple[str, ...] = field(default=tuple(b.value for b in DEFAULT_BACKENDS), metadata={"help": (
        "comma-separated subset of eager,ortmodule,compile")})
    isolate: bool = field(default=True, metadata={"help": (
        "train each backend in its own process (honest per-backend peak memory)")})
    export: ExportConfig = field(default_factory=ExportConfig, metadata={"help": "how the fine-tuned model is exported to ONNX"})
    fusion: FusionConfig = field(default_factory=FusionConfig, metadata={"help": "which graph variants are built and how they are timed"})
    quant_presets: tuple[str, ...] = field(default=("dynamic", "dynamic-per-channel", "static"), metadata={"help": (
        "quantization presets to build (names from workbench.quant.PRESETS)")})
    search: bool = field(default=True, metadata={"help": "the accuracy-constrained quantization search (--no-search skips it)"})
    # the search's own fields, so their help is SearchConfig's
    budget_overall: float = field(default=DEFAULT_BUDGET_OVERALL, metadata={"help": field_help(SearchConfig, "budget_overall")})
    budget_per_slice: float = field(default=DEFAULT_BUDGET_PER_SLICE, metadata={"help": field_help(SearchConfig, "budget_per_slice")})
    min_speedup: float = field(default=DEFAULT_MIN_SPEEDUP, metadata={"help": field_help(SearchConfig, "min_speedup")})
    timing: TimingConfig = field(default_factory=TimingConfig, metadata={"help": "how the graphs are timed"})
    n_boot: int = field(default=DEFAULT_N_BOOT, metadata={"help": "bootstrap replicates of the slice reports"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "backends", tuple(self.backends))
        object.__setattr__(self, "quant_presets", tuple(self.quant_presets))
        bad = [p for p in self.quant_presets if p not in PRESETS]
        if bad:
            raise ValueError(f"unknown quantization preset(s) {bad}; presets: {sorted(PRESETS)}")
        valid = [b.value for b in Backend]
        if not self.backends:
            raise ValueError(f"backends must name at least one of {', '.join(valid)}")
        unknown = [b for b in self.backends if str(b) not in valid]
        if unknown:
            raise ValueError(f"backends must each be one of {', '.join(valid)}; {', '.join(map(str, unknown))} is not "
                             f"(given: {','.join(map(str, self.backends))}): e.g. eager,ortmodule")
        self.search_config()  # the budgets, the speed guard and n_boot: refused by the search's own rules, before anything runs

    def search_config(self) -> SearchConfig:
        return SearchConfig(budget_overall=self.budget_overall, budget_per_slice=self.budget_per_slice, min_speedup=self.min_speedup,
                            evaluation=EvalConfig(n_boot=self.n_boot), baseline=BaselineConfig(timing=self.timing))

    @classmethod
    def default(cls, **kw) -> "DemoConfig":
        """MiniLM, 120 steps of 16 reviews per backend (``TrainConfig.demo``), every stage; whole validation and test splits."""
        return cls(**kw)

    @classmethod
    def quick(cls, **kw) -> "DemoConfig":
        """The tiny model on a few hundred reviews, eager and ORTModule only: a smoke run in about a minute."""
        return cls(**{
            "train": TrainConfig.quick(),
            "backends": ("eager", "ortmodule"),
            "isolate": False,
            "export": ExportConfig.quick(),
            "fusion": FusionConfig.quick(),
            "quant_presets": ("dynamic",),
            "search": False,
            "timing": TimingConfig.quick(),
            "n_boot": 200,
            **kw,
        })


@dataclass(frozen=True)
class DemoResult:
    run_dir: str
    stages: list[StageOutcome]
    config: DemoConfig

    @property
    def ok(self) -> bool:
        return all(s.status == "ok" for s in self.stages)

    def stage(self, name: str) -> StageOutcome:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage {name!r}; stages: {[s.name for s in self.stages]}")


def write_figure(fig, path: Path) -> str:
    """Write a plotly figure as standalone HTML (plotly.js once, beside it: works offline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    html = fig.to_html(include_plotlyjs="directory", full_html=True)
    runs.atomic_write_text(path, html)
    js = path.parent / "plotly.min.js"
    if not js.exists():
        from plotly.offline import get_plotlyjs

        runs.atomic_write_text(js, get_plotlyjs())
    return str(path)


def run_demo(
    cfg: Optional[DemoConfig] = None,
    run_dir: Optional[str | Path] = None,
    log: Log = print,
    progress=None,
    stop=None,
    on_stage=None,
) -> DemoResult:
    """Run the registry's demo route into ``run_dir`` (default: a new folder under ``runs/``).

    ``progress`` gets training ``Progress`` updates; ``stop`` (a ``threading.Event``) ends training between steps and
    the walkthrough between stages, the report still written; ``on_stage(i, n, name, status)`` follows the stages.
    """
    cfg = cfg or DemoConfig()
    run = Path(run_dir) if run_dir is not None else runs.new_run_dir("demo")
    run.mkdir(parents=True, exist_ok=True)
    log(f"run folder: {run}")
    report = {"kind": "demo", "title": f"ORT Workbench demo report: {run.name}", "budget_overall": cfg.budget_overall,
              "budget_per_slice": cfg.budget_per_slice, "min_speedup": cfg.min_speedup}
    job = Job(run, demo_configs(cfg), log=log, hooks=DemoHooks(cfg, run, report, log).hooks(), progress=progress,
              stop=stop, report=report)
    sequence = run_stages(stages_for("demo", job, leave_out=() if cfg.search else ("search",)), log=log, on_stage=on_stage, stop=stop)
    return _finish(run, cfg, list(sequence.outcomes), log)


def demo_configs(cfg: DemoConfig) -> dict:
    compare = CompareConfig(backends=tuple(cfg.backends), isolate=cfg.isolate)
    presets = {n: machine_preset(n) for n in cfg.quant_presets}
    configs = {"data": cfg.train.data, "fine-tune": FineTuneStep(cfg.train, compare), "export": cfg.export, "fuse": cfg.fusion,
               "quantize": QuantizeStep(BaselineConfig(timing=cfg.timing), presets, EvalConfig(n_boot=cfg.n_boot))}
    if cfg.search:
        configs["search"] = cfg.search_config()
    return configs


class DemoHooks:
    """What the demo adds after its stages: the doctor's text, the data's facts (into ``report``), headlines, figures."""

    def __init__(self, cfg: DemoConfig, run: Path, report: dict, log: Log = print) -> None:
        self.run, self.source, self.presets, self.report, self.log = run, cfg.train.data.source, cfg.quant_presets, report, log
        self.figs = run / layout.FIGURES_DIR

    def draw(self, st, result, figures: dict[str, Callable]) -> None:
        st.figures += [write_figure(plot(result), self.figs / f"{stem}.html") for stem, plot in figures.items()]

    def hooks(self) -> dict[str, Callable]:
        return {"doctor": self.doctor, "data": self.data, "fine-tune": self.fine_tune, "export": self.export,
                "fuse": self.fuse, "quantize": self.quantize, "search": self.search}

    def doctor(self, st, report) -> None:
        self.log(report.as_text())

    def data(self, st, data) -> None:
        from ..data.load import summarize_data

        summary = summarize_data(data, self.source)
        self.report["data"] = {"source": summary.source, "split_sizes": summary.split_sizes, "class_names": summary.classes}
        runs.save_result(summary, self.run / layout.DATA_FILE)
        st.result_path = str(self.run / layout.DATA_FILE)
        st.headline = {"splits": ", ".join(f"{k} {v}" for k, v in summary.split_sizes.items()), "classes": ", ".join(summary.classes)}
        self.log(f"   {summary.source}: {st.headline['splits']}; classes {summary.classes}")

    def fine_tune(self, st, comparison) -> None:
        from ..plots import train as train_plots

        self.draw(st, comparison, {"train_loss_curves": train_plots.loss_curves, "train_step_times": train_plots.step_time_distribution,
                                   "train_throughput_memory": train_plots.throughput_memory_bars})
        st.headline = {**_train_headline(comparison), **st.headline}

    def export(self, st, export) -> None:
        v = export.validation
        st.headline = {"checkpoint": export.model_source, "nodes": str(export.node_count),
                       "validation": f"{'passed' if v.passed else 'FAILED'}: max |dlogit| {v.max_abs_diff:.2e}, labels agree "
                                     f"{v.label_agreement:.1%}"}

    def fuse(self, st, fusion) -> None:
        from ..plots import graph as graph_plots

        self.draw(st, fusion, {"graph_op_counts": graph_plots.op_counts, "graph_fused_ops": graph_plots.fused_ops,
                               "graph_latency": graph_plots.latency, "graph_size": graph_plots.size_on_disk})
        if fusion.fused_op_counts:
            self.draw(st, fusion, {"graph_fused_node": graph_plots.fused_node_drawing})
        st.headline = {"fused": ", ".join(f"{k} {v}" for k, v in sorted(fusion.fused_op_counts.items())) or "nothing fused"}

    def quantize(self, st, quantized) -> None:
        from ..plots import quant as quant_plots

        if quantized is None:
            return
        baseline, results = quantized
        acc, n_test = fp32_test_accuracy(baseline)
        st.headline["fp32 test accuracy"] = f"{acc:.3f} on {n_test} test reviews (the fine-tuned model, FP32 graph)"
        self.log(f"   fine-tuned model (FP32 graph): test accuracy {acc:.3f} on {n_test} held-out test reviews")
        for name, res in zip(self.presets, results):
            self.draw(st, res, {f"quant_{name}_slice_drift": quant_plots.drift_bars,
                                f"quant_{name}_confidence": quant_plots.confidence_scatter,
                                f"quant_{name}_threshold": quant_plots.threshold_curves})
            if res.node_errors:
                self.draw(st, res, {f"quant_{name}_node_errors": quant_plots.node_errors})
            st.headline[name] = f"acc {res.accuracy:.3f} ({100 * res.accuracy_delta:+.1f} pts), {res.speedup:.2f}x, {res.size_mib:.1f} MiB"

    def search(self, st, found) -> None:
        from ..plots import quant as quant_plots

        self.draw(st, found, {"quant_search": quant_plots.tradeoff})


def fp32_test_accuracy(baseline) -> tuple[float, int]:
    """Accuracy of the FP32 graph on the baseline's test set (never seen in training), and its size."""
    import numpy as np

    test = baseline.eval_set("test")
    labels = np.array([int(e["label"]) for e in test.load_examples()])
    preds = test.fp32_logits().argmax(-1)
    return float((preds == labels).mean()), int(len(labels))


def _train_headline(c) -> dict[str, str]:
    out = {}
    for r in c.runs:
        line = f"{r.status.value}"
        if r.steps:
            line += f", median step {1000 * r.median_step_s:.0f} ms, {r.samples_per_s:.1f} samples/s, start-up {r.startup_s:.1f} s"
        if r.backend.value == "ortmodule":
            line += f", ran in ONNX Runtime: {'yes' if r.executed_in_onnxruntime else 'NO'}"
        out[r.backend.value] = line
    for r in c.ratios:  # both speed figures, and why they differ (compare.SPEED_BASIS); the settings both ran
        out[f"{r.backend.value} vs {r.baseline.value}"] = (
            f"{r.speed_text()} steady state "
            f"({'steps timed in turns, median of per-step ratios' if r.interleaved else 'median step after start-up'}), "
            f"{r.throughput_with_startup:.2f}x with start-up (every step, export/compilation included); both with "
            f"{r.baseline_settings}" + ("" if r.like_for_like else f"; NOT like for like: they differ in {', '.join(r.differs_in)}"))
    return out


def _finish(run: Path, cfg: DemoConfig, outcomes: list[StageOutcome], log: Log) -> DemoResult:
    result = DemoResult(str(run), outcomes, cfg)
    runs.save_result(result, run / layout.DEMO_FILE)
    runs.atomic_write_text(run / layout.DEMO_SUMMARY, summary_markdown(result))
    failed = [s.name for s in outcomes if s.status != "ok"]
    log(f"\nwrote {run / layout.DEMO_SUMMARY}" + (f"; not ok: {', '.join(failed)}" if failed else "; every stage ok"))
    return result


def summary_markdown(result: DemoResult) -> str:
    lines = [f"# ORT Workbench walkthrough: {Path(result.run_dir).name}", "",
             "| stage | status | seconds | result |", "| --- | --- | --- | --- |"]
    for s in result.stages:
        inside = s.result_path and Path(s.result_path).is_relative_to(result.run_dir)
        where = Path(s.result_path).relative_to(result.run_dir) if inside else (s.result_path or "")
        lines.append(f"| {s.name} | {s.status}{': ' + s.message if s.message else ''} | {s.seconds:.1f} | {where} |")
    for s in result.stages:
        if s.headline or s.figures:
            lines += ["", f"## {s.name}", ""]
            lines += [f"- **{k}**: {v}" for k, v in s.headline.items()]
            lines += [f"- figure: [{Path(f).name}]({Path(f).relative_to(result.run_dir)})" for f in s.figures]
    return "\n".join(lines) + "\n"
