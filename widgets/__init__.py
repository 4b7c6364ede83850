"""ipywidgets panels over the ``workbench`` library: views only, no computation.

Each panel reads its controls, calls one ``workbench`` function, keeps the result on
``panel.result`` and redraws; see :mod:`widgets.base` for the shared behaviour.
"""

from .base import Panel, PanelInputError
from .doctor import DoctorBanner

__all__ = ["DoctorBanner", "Panel", "PanelInputError"]
