"""Helpers for the browser tests: a JupyterLab server on 127.0.0.1 (no token) in a temporary HOME
with temporary settings, and parameter injection into a notebook copy.

Checked here: ``playwright install`` cannot download a browser, so the
system chromium is driven with ``executable_path``; the news toast is switched off in the user
settings; the kernel is ready when the status bar says "(ipykernel) | Idle".
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
CHROMIUM = Path(os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SERVER_START_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_parameters(notebook: Path, values: dict[str, Any]) -> None:
    """Add a cell after the one tagged ``parameters`` that sets ``values`` (papermill's convention)."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    index = next(
        (i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])), None
    )
    assert index is not None, f"{notebook.name} has no cell tagged 'parameters'"
    source = "# parameters injected by the browser test\n" + "\n".join(f"{k} = {v!r}" for k, v in values.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(index + 1, cell)
    nbformat.write(nb, notebook)


class LabServer:
    """A JupyterLab process on 127.0.0.1 serving ``root``; stopped by :meth:`stop` (its own pid only)."""

    def __init__(self, root: Path, home: Path, log_path: Path, env_extra: dict[str, str]):
        self.root, self.home, self.log_path = root, home, log_path
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = home / "lab-user-settings"
        notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True, exist_ok=True)
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        # PYTEST_CURRENT_TEST would reach the kernels and make ipykernel switch off its
        # file-descriptor capture: keep the kernels as a user's JupyterLab starts them.
        inherited = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        env = {
            **inherited,
            # the repository first: a stale editable install could resolve `widgets` as a namespace package
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), inherited.get("PYTHONPATH", "")) if p),
            "HOME": str(home),
            "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "IPYTHONDIR": str(home / ".ipython"),
            "JUPYTER_PLATFORM_DIRS": "1",
            **env_extra,
        }
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "jupyter", "lab",
                "--ip=127.0.0.1", f"--port={self.port}", "--no-browser", "--allow-root",
                "--IdentityProvider.token=", "--ServerApp.password=",
                f"--ServerApp.root_dir={root}",
                f"--LabApp.user_settings_dir={settings}",
                f"--LabApp.workspaces_dir={home / 'workspaces'}",
                "--ServerApp.disable_check_xsrf=True",
            ],
            cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}; log: {self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.25)  # polling a server that is starting, not waiting for a UI element
        raise RuntimeError(f"JupyterLab did not answer within {SERVER_START_TIMEOUT_S} s; log: {self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
