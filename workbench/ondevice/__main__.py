"""``python -m workbench.ondevice --side ort|eager --work DIR``: one side's steps in a fresh process
(what :func:`workbench.ondevice.memory.measure_isolated` starts to measure its peak memory)."""

import sys

from .memory import child_main

if __name__ == "__main__":
    sys.exit(child_main())
