"""``python -m workbench.ondevice --side ort|eager --work DIR``: one side's steps in a fresh process."""

import sys

from .memory import child_main

if __name__ == "__main__":
    sys.exit(child_main())
