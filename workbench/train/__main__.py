"""``python -m workbench.train``: one training run in this process (:func:`workbench.train.process.child_main`)."""

import sys

from .process import child_main

sys.exit(child_main())
