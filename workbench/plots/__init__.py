"""Figure builders: result in, ``plotly.graph_objects.Figure`` out. Nothing else in the project draws.

One module per stage (``plots.train``, ``plots.graph``, ``plots.quant``); import from there.
"""
