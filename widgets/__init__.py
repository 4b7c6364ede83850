"""ipywidgets panels over the ``workbench`` library: views only, no computation.

Each panel binds its controls to a session (:mod:`workbench.sessions`: the stage's inputs, results,
caches, servers and run folder, usable without any widget): it reads its controls, calls the
session, and redraws from ``panel.result`` (the session's latest result); see :mod:`widgets.base`
for the shared behaviour.

- :class:`DoctorBanner`: the environment check with fixes;
- :class:`TrainPanel`, :class:`ComparePanel`: fine-tune eager / ORTModule / torch.compile and compare;
- :class:`GraphPanel`: export, validate, fuse, provenance, Netron;
- :class:`QuantPanel`: INT8 presets, per-slice drift, flips, re-quantization, constrained search;
- :class:`OnDevicePanel`: on-device training artifacts, onnxruntime.training.api beside PyTorch eager;
- :class:`Workbench`: all of them in order, as steps.
"""

from .base import Panel, PanelInputError
from .doctor import DoctorBanner
from .graph import GraphPanel
from .ondevice import OnDevicePanel
from .quant import QuantPanel
from .train import ComparePanel, TrainPanel
from .workbench import Workbench

__all__ = ["ComparePanel", "DoctorBanner", "GraphPanel", "OnDevicePanel", "Panel", "PanelInputError", "QuantPanel", "TrainPanel",
           "Workbench"]
