"""The training sessions: fine-tune with several backends (:class:`TrainSession`); compare finished runs again
with another baseline or tolerance (:class:`CompareSession`)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Optional, Union

from ..flow import handoffs as flow
from ..runs import layout
from ..train import CompareConfig, Comparison, Progress, TrainConfig, compare, load_comparison, run_comparison
from .base import InputError, Session, as_saved, model_folder

ComparisonLike = Union[Comparison, str, os.PathLike]


def as_comparison(value: ComparisonLike) -> Comparison:
    return as_saved(value, Comparison, load_comparison, "comparison", layout.COMPARE_FILE, "comparison")


class TrainSession(Session):
    """``result``: the :class:`~workbench.train.Comparison`; runs go to ``<run_dir>/train``."""

    LABEL = "train"

    def train(self, cfg: TrainConfig, compare_cfg: CompareConfig,
              on_step: Optional[Callable[[Progress], None]] = None) -> Comparison:
        """Train each of ``compare_cfg.backends`` into the run's ``train/``; ``on_step`` defaults to the session's progress callback."""
        if not isinstance(cfg, TrainConfig):
            raise TypeError(f"cfg must be a workbench.train.TrainConfig, got {type(cfg).__name__}")
        if not compare_cfg.backends:
            raise InputError("backends is empty: select at least one of eager, ortmodule, compile (ctrl/cmd-click for several)")
        cfg = dataclasses.replace(cfg, model=model_folder(cfg.model))
        self.start()
        with self.writing() as run_dir:
            result = run_comparison(cfg, compare_cfg, run_dir / layout.TRAIN_DIR, progress=on_step or self._report_step,
                                    stop=self.stop_event)
        return self.keep(result)

    def _report_step(self, p: Progress) -> None:
        self.report(p.step, p.total_steps, p.eta_s, f"{getattr(p.backend, 'value', p.backend)}: {p.phase}")

    def open(self, saved: ComparisonLike) -> Comparison:
        return self.keep(as_comparison(saved))

    def checkpoints(self) -> dict[str, str]:
        """Finished runs' checkpoint folders by backend, the export stage's pick first."""
        return flow.ordered_checkpoints(self.result) if self.result is not None else {}


class CompareSession(Session):
    """The comparison of finished runs: ``input`` is the comparison as trained, ``result`` the one
    recomputed with the chosen baseline and tolerance (nothing is retrained)."""

    INPUTS = ()
    LABEL = "compare"

    def __init__(self, *, comparison: Any = None, run_dir: Any = None, progress=None) -> None:
        super().__init__(run_dir=run_dir, progress=progress)
        self.input: Optional[Comparison] = None
        if comparison is not None:
            self.set_input(comparison)

    def set_input(self, comparison: ComparisonLike) -> Comparison:
        self.input = as_comparison(comparison)
        return self.keep(self.input)

    def compare(self, baseline: str, tolerance: Optional[float] = None) -> Comparison:
        """The runs compared again against ``baseline`` with ``tolerance`` (None: the default for the config)."""
        if self.input is None:
            raise InputError("no runs to compare: train first (TrainPanel) or pass comparison= a saved compare.json")
        result = compare(self.input.runs, tolerance=tolerance, baseline=baseline)
        return self.keep(dataclasses.replace(result, run_dir=self.input.run_dir))
