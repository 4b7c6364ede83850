"""Sessions: each stage's work held in plain Python (inputs, results and their history, caches, servers on
127.0.0.1, the run folder, the stop event and the progress callback), one module per notebook panel. A panel
in ``widgets/`` binds its controls to one; a script or a test uses it without any widget. The modules are
imported when named (``from workbench.sessions.quant import QuantSession``): each pulls in only its stage.
"""

from .base import InputError, Session

__all__ = ["InputError", "Session"]
