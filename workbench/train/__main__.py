"""``python -m workbench.train --config C --backend B --run-dir D``: one training run in this process,
started by :func:`workbench.train.lockstep.run_lockstep` (see :func:`workbench.train.process.child_main`)."""

import sys

from .process import child_main

sys.exit(child_main())
