"""Figure builders, one module per stage: result in, ``plotly.graph_objects.Figure`` out. Nothing else draws."""
