"""Sessions: each stage's work held in plain Python (inputs, results and their history, caches,
servers on 127.0.0.1, the run folder, the stop event and the progress callback). A notebook panel in
``widgets/`` binds its controls to one; a script or a test uses it without any widget.

``base.py``      :class:`Session` (what every session holds), :class:`InputError`
``doctor.py``    :class:`DoctorSession`: the environment checks
``train.py``     :class:`TrainSession`, :class:`CompareSession`: fine-tune with several backends, compare
``graph.py``     :class:`GraphSession`: export, fuse, Netron
``quant.py``     :class:`QuantSession`: INT8 presets, re-quantization, the constrained search
``ondevice.py``  :class:`OnDeviceSession`: on-device training and its web page
``embed.py``     :class:`EmbedSession`: an embedding model quantized and scored on retrieval

The modules are imported when named (``from workbench.sessions.quant import QuantSession``): each
pulls in only its own stage.
"""

from .base import InputError, Session

__all__ = ["InputError", "Session"]
