"""Ctrl-C on a command: one line saying it stopped, exit code 130, no traceback, the run folder's lock
released (the next writer neither waits nor takes a lock over) and nothing half-written left behind.

The real CLI in a subprocess, stopped at a point the test controls (``WORKBENCH_PAUSE_AT``), on the
tiny classifier saved as a checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from helpers.pause import wait_paused

PY = sys.executable


def _start(args, env):
    return subprocess.Popen([PY, "-m", "workbench.cli", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **env})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupt")
    code = ("import sys\nfrom workbench.models.load import load_model\nm = load_model('tiny')\n"
            "m.model.save_pretrained(sys.argv[1]); m.tokenizer.save_pretrained(sys.argv[1])\n")
    subprocess.run([PY, "-c", code, str(root / "tiny")], check=True, capture_output=True)
    rows = [f"{'great' if i % 2 else 'bad'} film number {i},{i % 2}" for i in range(40)]
    (root / "ids.csv").write_text("text,label\n" + "\n".join(rows) + "\n")
    return root


@pytest.mark.slow  # a long run for make test-fast: the audit's start-up twice
def test_ctrl_c_stops_an_audit_in_one_line_and_releases_its_folder(tiny, tmp_path):
    out = tmp_path / "audit"
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    args = ["audit", "--model", tiny / "tiny", "--data", tiny / "ids.csv", "--quick", "--out", out]
    first = _start(args, {"WORKBENCH_PAUSE_AT": f"locked={fifo}"})
    try:
        assert wait_paused(fifo, first) == first.pid  # it holds the folder's lock
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "stopped (Ctrl-C)" in lines[0], err
    assert not out.exists() or not any(p for p in out.iterdir() if p.name != ".workbench.lock")  # nothing half-written

    again = subprocess.run([PY, "-m", "workbench.cli", *map(str, args)], capture_output=True, text=True, timeout=600)
    assert again.returncode in (0, 3), again.stderr[-2000:]
    assert "took over the lock" not in again.stderr  # the stopped run let go of it
    assert (out / "summary.json").exists() and (out / "report.html").exists()
