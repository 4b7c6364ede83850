"""The accuracy-constrained search: the fastest (or smallest) variant within budget overall *and* on every slice
big enough to judge, else FP32. A :class:`ScoredBaseline` (an embedding model's) judges in its own metric and budget."""

from __future__ import annotations

import os
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence, Union, runtime_checkable

from .. import runs
from ..runs import layout
from .baseline import BASELINE_DIR, BASELINE_FILE, Baseline, BaselineConfig, fp32_latency, prepare_baseline
from .budget import (DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE, DEFAULT_MIN_SPEEDUP, BudgetCheck, Objective,
                     check_budget, check_budget_value, check_min_speedup, parse_objective)
from .config import QuantConfig, QuantizeError, TimingConfig
from .evaluate import EvalConfig, SliceReport
from .run import QuantResult, report_for, run_quantization
from .choice import SearchCandidate, SearchResult, SearchTerms, choice_message, fp32_candidate, int8_candidate, select_candidate

from ..runs.layout import SEARCH_FILE  # noqa: E402, F401  (the run layout names every file)


def default_candidates() -> list[QuantConfig]:
    """A small, varied set: dynamic INT8 four ways, the best static recipe and static Entropy."""
    return ([QuantConfig.preset(n) for n in ("dynamic", "dynamic-per-channel", "dynamic-fp32-embeddings", "dynamic-reduce-range")]
            + [QuantConfig.preset(n, calibration={"samples": 64}) for n in ("static", "static-entropy")])


@dataclass(frozen=True)
class SearchConfig:
    """Candidate labels are unique; the speed guard judges a speed-up interval's lower end, so a noisy win does not count."""

    candidates: Optional[tuple[QuantConfig, ...]] = field(default=None, metadata={"help": (
        "search: the configurations to quantize with (default: the built-in candidate list)")})
    budget_overall: float = field(default=DEFAULT_BUDGET_OVERALL, metadata={"help": (
        "search: accuracy drop allowed overall (0.01 = 1 point)")})
    budget_per_slice: float = field(default=DEFAULT_BUDGET_PER_SLICE, metadata={"help": (
        "search: accuracy drop allowed on every slice big enough to judge")})
    objective: Objective = field(default=Objective.LATENCY, metadata={"help": (
        "search: pick the fastest (latency) or the smallest (size) candidate within budget")})
    include_small_slices: bool = field(default=False, metadata={"help": "search: hold slices under 50 examples to the budget too"})
    strict: bool = field(default=False, metadata={"help": (
        "search: judge the worse end of the 95% interval instead of the point estimate")})
    include_fp32: bool = field(default=True, metadata={"help": (
        "search: the FP32 graph is a candidate (the answer when no INT8 variant fits)")})
    min_speedup: float = field(default=DEFAULT_MIN_SPEEDUP, metadata={"help": (
        "search: speed guard, the least speed-up over FP32 (lower end of its interval) a variant needs; 0 = off")})
    evaluation: EvalConfig = field(default_factory=EvalConfig, metadata={"help": (
        "search: the bootstrap of every candidate's slice report")})
    baseline: Optional[BaselineConfig] = field(default=None, metadata={"help": (
        "search: how the FP32 graph is scored and every candidate timed (default: a given baseline's own)")})

    def __post_init__(self) -> None:
        object.__setattr__(self, "objective", parse_objective(self.objective))
        object.__setattr__(self, "min_speedup", check_min_speedup(self.min_speedup))
        for name in ("budget_overall", "budget_per_slice"):
            object.__setattr__(self, name, check_budget_value(name, getattr(self, name)))
        cands = tuple(default_candidates()) if self.candidates is None else tuple(self.candidates)
        bad = [type(c).__name__ for c in cands if not isinstance(c, QuantConfig)]
        if bad:
            raise QuantizeError(f"candidates must be QuantConfigs (e.g. QuantConfig.preset('dynamic')), got {bad}")
        labels = [c.label for c in cands]
        dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
        if dupes:
            raise QuantizeError(f"candidate names must be unique, repeated: {dupes}; give them name=...")
        object.__setattr__(self, "candidates", cands)
        if not cands and not self.include_fp32:
            raise QuantizeError("nothing to search: give at least one candidate or include_fp32=True")
        for name, cls in (("evaluation", EvalConfig), ("baseline", BaselineConfig)):
            if not isinstance(getattr(self, name), cls) and (name == "evaluation" or self.baseline is not None):
                raise QuantizeError(f"{name} must be given as {cls.__name__}(...), got {type(getattr(self, name)).__name__}")

    def judge(self, reports: Sequence[SliceReport]) -> BudgetCheck:
        """A candidate's slice reports (the evaluation split's first) against the budgets."""
        return check_budget(reports, self.budget_overall, self.budget_per_slice, self.include_small_slices, self.strict)


@runtime_checkable
class ScoredBaseline(Protocol):
    """A baseline that quantizes, scores and judges each candidate in its own metric (an embedding model's); no ``previous``."""

    metric: str
    notes: list[str]

    def budgets(self) -> tuple[float, float]: ...

    def terms(self) -> SearchTerms: ...

    def fp32_search_candidate(self, name: str, config: "SearchConfig") -> SearchCandidate: ...

    def search_candidates(self, name: str, cfg: QuantConfig, out_dir: Path, config: "SearchConfig") -> list[SearchCandidate]: ...

def reusable_result(previous: Sequence[QuantResult], cfg: QuantConfig, base: Baseline, timing: TimingConfig,
                    n_boot: int, seed: int) -> Optional[QuantResult]:
    """An earlier result of ``cfg`` on the same FP32 graph, baseline, timing, n_boot and seed, its graph still on disk."""
    base_file = (Path(base.out_dir) / BASELINE_FILE).resolve()
    for r in previous:
        if (r.config == cfg and Path(r.baseline_path).resolve() == base_file
                and Path(r.source_path).resolve() == Path(base.fp32_path).resolve()
                and r.timing == timing and r.report.n_boot == n_boot and r.report.seed == seed
                and Path(r.quantized_path).is_file()):
            return r
    return None


def run_search(
    source: Union[Baseline, str, os.PathLike, Any, Mapping[str, Any]],
    config: Optional[SearchConfig] = None,
    out_dir: str | os.PathLike | None = None,
    *,
    data=None,
    tokenizer=None,
    export=None,
    slices=None,
    predicates: Optional[Mapping[str, Callable[[dict], bool]]] = None,
    previous: Sequence[QuantResult] = (),
    progress: Optional[Callable[[int, int, str], None]] = None,
) -> SearchResult:
    """Search ``config.candidates`` on one FP32 graph or several ({name: graph}); writes ``search.json`` and a folder per
    candidate. A graph is a :class:`Baseline` or what :func:`prepare_baseline` takes (prepared from ``data`` and the
    keywords in ``<out_dir>/<name>/baseline``); a candidate found in ``previous`` is reused, not quantized again."""
    config = config if config is not None else SearchConfig()
    if not isinstance(config, SearchConfig):
        raise QuantizeError(f"config must be a SearchConfig, got {type(config).__name__}")
    graphs, scored = _graphs(source)
    previous = list(previous)
    bad = [type(r).__name__ for r in previous if not isinstance(r, QuantResult)]
    if bad:
        raise QuantizeError(f"previous must be QuantResults (from run_quantization or load_quant_result), got {bad}")
    configs = list(config.candidates)
    ev = config.evaluation
    out = Path(out_dir) if out_dir is not None else runs.default_out(layout.SEARCH_DIR)
    out.mkdir(parents=True, exist_ok=True)
    total = len(graphs) * (len(configs) + (1 if config.include_fp32 else 0))
    done = 0
    found: list[SearchCandidate] = []

    def step(what: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, what)

    for gname, graph in graphs.items():
        gdir = out / gname
        if isinstance(graph, ScoredBaseline):
            _search_scored(gname, graph, gdir, configs, config, found, step)
            continue
        if isinstance(graph, Baseline):
            base = graph
        else:
            bcfg = config.baseline or BaselineConfig()
            bcfg = dataclasses.replace(bcfg, calibration_samples=max([bcfg.calibration_samples,
                                                                     *(c.calibration.samples for c in configs)]))
            base = prepare_baseline(graph, data, gdir / BASELINE_DIR, bcfg, tokenizer=tokenizer, export=export, slices=slices,
                                    predicates=predicates)
        timing = config.baseline.timing if config.baseline is not None else base.timing
        first = len(found)
        for cfg in configs:
            res = reusable_result(previous, cfg, base, timing, ev.n_boot, ev.seed)
            reused = res is not None
            if res is None:
                res = run_quantization(base, cfg, gdir / cfg.label, evaluation=dataclasses.replace(ev, node_error_samples=0),
                                       timing=None if timing == base.timing else timing)
            found.append(int8_candidate(f"{gname}/{cfg.label}", gname, res, config.judge(res.reports), config.min_speedup,
                                        reused=reused))
            step(f"{gname}/{cfg.label}" + (f" (reused {res.out_dir})" if reused else ""))
        if config.include_fp32:  # after the variants: its latency is the FP32 side of the first one's interleaved rounds
            found.insert(first, _fp32_candidate(gname, base, config, timing, ev))
            step(f"{gname}/fp32")
    s = scored[0] if scored else None  # a ScoredBaseline's search speaks its own metric, terms and budgets
    result = choose(found, config, out, s.terms(), s.budgets(), s.metric, s.notes) if s else choose(found, config, out)
    runs.save_result(result, out / SEARCH_FILE)
    return result


def choose(found: list[SearchCandidate], config: SearchConfig, out: Path = Path("."), terms: Optional[SearchTerms] = None,
           budgets: Optional[tuple[float, float]] = None, metric: str = "accuracy", notes: Sequence[str] = ()) -> SearchResult:
    """The best of candidates already judged and the message, in ``terms`` and ``budgets`` (default: accuracy's)."""
    best = select_candidate(found, config.objective)
    budgets = budgets or (config.budget_overall, config.budget_per_slice)
    terms = terms or SearchTerms.accuracy(config.budget_overall, config.budget_per_slice)
    message = choice_message(found, best, terms, config.min_speedup, notes)
    return SearchResult(found, best.name if best else None, budgets[0], budgets[1], config.objective.value,
                        config.include_small_slices, config.strict, Path(out).resolve(), message, config.min_speedup, metric)


def _graphs(source) -> tuple[dict[str, Any], list[ScoredBaseline]]:
    """{name: graph} and those of them that are :class:`ScoredBaseline`s (all or none)."""
    graphs = dict(source) if isinstance(source, Mapping) else {"model": source}
    if not graphs:
        raise QuantizeError("give at least one FP32 graph (or baseline) to search over")
    scored = [g for g in graphs.values() if isinstance(g, ScoredBaseline)]
    if scored and len(scored) < len(graphs):
        raise QuantizeError(f"the search scores in one metric at a time: give only classifier graphs or only {scored[0].metric} "
                            "baselines, got both")
    return graphs, scored


def _search_scored(gname: str, graph: ScoredBaseline, gdir: Path, configs: Sequence[QuantConfig], config: SearchConfig,
                   found: list[SearchCandidate], step: Callable[[str], None]) -> None:
    """A :class:`ScoredBaseline`'s candidates: its FP32 graph, then what it tried for each configuration."""
    if config.include_fp32:
        found.append(graph.fp32_search_candidate(f"{gname}/fp32", config))
        step(f"{gname}/fp32")
    for cfg in configs:
        tried = graph.search_candidates(f"{gname}/{cfg.label}", cfg, gdir / cfg.label, config)
        found.extend(tried)
        step(", ".join(c.name for c in tried))


def _fp32_candidate(gname: str, base: Baseline, config: SearchConfig, timing: TimingConfig, ev: EvalConfig) -> SearchCandidate:
    """The FP32 graph as a candidate, scored against itself, its latency from the first variant's rounds."""
    reps = [report_for(e, e.fp32_logits(), base, "fp32", ev) for e in base.eval_sets]
    return fp32_candidate(f"{gname}/fp32", gname, base.fp32_path, base.fp32_size_mib, reps[0].overall.reference.accuracy,
                          config.judge(reps), fp32_latency(base, timing)[0])


def search_results(results: Sequence[QuantResult], config: SearchConfig, out_dir: str | os.PathLike | None = None) -> SearchResult:
    """The search over variants already quantized, scored and timed, FP32 a candidate too; saved in ``out_dir`` when given."""
    found = []
    if results and config.include_fp32:
        r0 = results[0]
        found.append(fp32_candidate(f"{r0.graph_kind}/fp32", r0.graph_kind, r0.source_path, r0.fp32_size_mib,
                                    r0.report.overall.reference.accuracy, None, r0.fp32_latency[0] if r0.fp32_latency else None))
    for r in results:
        found.append(int8_candidate(r.name, r.graph_kind, r, config.judge(r.reports), config.min_speedup))
    result = choose(found, config, Path(out_dir) if out_dir is not None else Path("."))
    if out_dir is not None:
        runs.save_result(result, Path(out_dir) / SEARCH_FILE)
    return result


def load_search(path: str | os.PathLike) -> SearchResult:
    return runs.load_result(SearchResult, path, SEARCH_FILE)
