"""Sessions: each stage's work held in plain Python, one module per notebook panel; a panel in ``widgets/``
binds its controls to one, a script or a test uses it without any widget. The modules are imported when
named (``from workbench.sessions.quant import QuantSession``): each pulls in only its stage.
"""
