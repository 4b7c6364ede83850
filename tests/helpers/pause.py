"""Waiting for a CLI subprocess to reach a ``WORKBENCH_PAUSE_AT`` point (workbench.runs.atomic.pause_at)."""

from __future__ import annotations

import os
import time


def wait_paused(fifo, proc, timeout=240):
    """The PID the paused process wrote into the FIFO (blocks until it reaches the point)."""
    import select

    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        end = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise AssertionError(f"the writer ended (exit {proc.returncode}) before the pause: {proc.stderr.read()[-2000:]}")
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                buf += os.read(fd, 64)
                if buf.endswith(b"\n"):
                    return int(buf.strip())
        raise AssertionError("the writer never reached the pause point")
    finally:
        os.close(fd)
