"""ipywidgets panels over the ``workbench`` library: views only, no computation."""
