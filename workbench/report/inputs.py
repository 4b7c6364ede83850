"""What a report is written from (:class:`ReportInputs`), given directly or read from a run folder."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..quant import DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE, DEFAULT_MIN_SPEEDUP


@dataclass(frozen=True)
class ReportInputs:
    """Every field optional: a section whose result is missing says so. Frozen: writing a report never changes its
    inputs. ``quant``: QuantResults; ``stages``: ``{name, status, seconds, message}``."""

    kind: str = "workbench"
    title: str = "ORT Workbench report"
    run_dir: Optional[Path] = None
    budget_overall: float = DEFAULT_BUDGET_OVERALL
    budget_per_slice: float = DEFAULT_BUDGET_PER_SLICE
    include_small_slices: bool = False
    min_speedup: float = DEFAULT_MIN_SPEEDUP  # the speed guard the search and the verdict apply
    machine: Any = None  # the MachineProfile the speeds were judged against (default: this machine's, cached)
    doctor: Any = None
    data: dict = field(default_factory=dict)
    model: Optional[dict] = None
    comparison: Any = None
    export: Any = None
    fusion: Any = None
    quant: list = field(default_factory=list)
    search: Any = None
    stages: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    batch_dependence: list = field(default_factory=list)  # {variant, n, batch_a, batch_b, differ}
    config: dict = field(default_factory=dict)

    def searched(self):
        from ..quant.search import SearchConfig, search_results

        if self.search is not None or not self.quant:
            return self.search
        return search_results(self.quant, SearchConfig(candidates=(), budget_overall=self.budget_overall,
                                                       budget_per_slice=self.budget_per_slice, min_speedup=self.min_speedup,
                                                       include_small_slices=self.include_small_slices))


# ---- a run folder (the demo's, the Workbench's) ------------------------------------------------
def inputs_from_run(run_dir: str | os.PathLike, kind: str = "workbench", doctor=None, **overrides) -> ReportInputs:
    """``doctor`` defaults to a fresh environment check."""
    from ..doctor.checks import run_doctor
    from ..flow.handoffs import Run

    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"no run folder at {root}: pass a folder written by the Workbench, `workbench demo` or the CLI")
    run = Run(root, root)  # the run's newest result of each stage, read the way every front reads them
    quant = run.quantizations()
    search = run.search()
    budgets = {}
    if search is not None:
        budgets = {"budget_overall": search.budget_overall, "budget_per_slice": search.budget_per_slice,
                   "include_small_slices": search.include_small_slices, "min_speedup": search.min_speedup}
    inp = ReportInputs(
        kind=kind, title=f"ORT Workbench {kind} report: {root.name}", run_dir=root,
        doctor=doctor if doctor is not None else run_doctor(),
        comparison=run.comparison(), export=run.export(), fusion=run.fusion(),
        quant=quant, search=search, **budgets,
    )
    for k in overrides:
        if not hasattr(inp, k):
            raise TypeError(f"unknown report input {k!r}; inputs: {[f.name for f in dataclasses.fields(ReportInputs)]}")
    return dataclasses.replace(inp, **overrides)
