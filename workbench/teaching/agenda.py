"""The workshop's hour on 2-core laptops: which notebooks, with which settings, in what order.

One list, read by the workshop page (docs/workshop.md, kept in step by a test) and by
``scripts/agenda_times.py``, which times each notebook with these settings in JupyterLab. The settings
change a notebook's ``parameters`` cell: the learner types them there before running it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Slot:
    """One part of the hour: a notebook (or ``None`` for talk only), its minutes and settings."""

    minutes: int
    notebook: str | None
    title: str
    parameters: dict[str, Any] = field(default_factory=dict)  # beside the committed ones; empty: as committed
    why: str = ""


AGENDA: tuple[Slot, ...] = (
    Slot(5, None, "Welcome: JupyterLab open (make lab), what the hour shows"),
    Slot(15, "00_tour", "The whole path in one widget; exercise: INT8 size ratio",
         {"MAX_STEPS": 60},
         "half the demo recipe's 120 steps: training is most of the tour's time, and 60 steps still show the "
         "loss curves of both backends on top of each other"),
    Slot(12, "02_eager_vs_ortmodule", "Eager against ORTModule, taking turns; exercise: the faster backend",
         {"MAX_STEPS": 60},
         "ISOLATE (as committed) runs the backends in turns, step by step, so JupyterLab's and the browser's "
         "load falls on both alike"),
    Slot(8, "03_export_and_fusion", "Export, validation and fusion; exercise: fused operators per layer"),
    Slot(15, "04_quantization_drift", "INT8 slice by slice, the worst nodes kept in FP32; exercise: within "
         "budget and faster", {},
         "as committed: 1,000 test reviews, so that every slice has the 50 examples it needs to be judged"),
    Slot(5, None, "Wrap-up: 05 (your own model) to take home; 01, 06 and 07 for the quick ones"),
)

HOUR_MINUTES = 60
