"""`make lab` serves JupyterLab on 127.0.0.1 only: the listening sockets of the server, as the
operating system reports them, are all on the loopback address."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _make_lab_command(port: int) -> list[str]:
    """The `lab` recipe of the Makefile, with $(PY) and $(PORT) filled in."""
    text = (REPO / "Makefile").read_text()
    recipe = re.search(r"^lab:.*\n\t(.+)$", text, re.MULTILINE)
    assert recipe, "the Makefile has no `lab` target"
    line = recipe.group(1).replace("$(PY)", shlex.quote(sys.executable)).replace("$(PORT)", str(port))
    assert "$(" not in line, f"unexpanded variable in the lab recipe: {line}"
    return shlex.split(line)


@pytest.mark.timeout(240)
def test_make_lab_listens_on_loopback_only(tmp_path, listening):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = _make_lab_command(port)
    assert "--ip=127.0.0.1" in cmd
    if os.geteuid() == 0:  # CI containers run as root; Jupyter refuses root without this flag
        cmd.append("--allow-root")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               IPYTHONDIR=str(home / ".ipython"), JUPYTER_PLATFORM_DIRS="1")
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # wait for the server's socket (pytest-timeout bounds this; a server that exits fails at once)
        while not any(port == p for _, p in listening(proc.pid)):
            assert proc.poll() is None, f"JupyterLab exited with {proc.returncode}: {(tmp_path / 'lab.log').read_text()[-2000:]}"
            time.sleep(0.2)
        sockets = listening(proc.pid)
        assert ("127.0.0.1", port) in sockets
        assert {ip for ip, _ in sockets} == {"127.0.0.1"}, f"JupyterLab listens beyond the loopback address: {sockets}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
