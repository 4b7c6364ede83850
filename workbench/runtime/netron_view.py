"""Netron, the graph viewer, served from a background thread on 127.0.0.1: the iframe works when the browser runs
on the kernel's machine (or through a tunnelled port); elsewhere open the file in https://netron.app.
"""

from __future__ import annotations

import html
import logging
import os
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

HOST = "127.0.0.1"


class NetronError(RuntimeError):
    """Netron could not serve a graph; the message says why and what to do."""


def _free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class NetronServer:
    """One Netron server for one graph at a time (``start(path)`` again switches graphs; ``port=0``: a free one)."""

    def __init__(self, host: str = HOST, port: int = 0, start_timeout: float = 10.0):
        if host not in ("127.0.0.1", "localhost"):
            raise NetronError(f"Netron is only served on this machine (127.0.0.1), got host {host!r}")
        if not 0 <= port < 65536:
            raise NetronError(f"port must be 0 (pick a free one) or 1..65535, got {port}")
        self.host, self.port, self.start_timeout = host, port, start_timeout
        self.address: Optional[tuple[str, int]] = None
        self.path: Optional[Path] = None

    @property
    def url(self) -> Optional[str]:
        return f"http://{self.address[0]}:{self.address[1]}" if self.address else None

    @property
    def running(self) -> bool:
        if self.address is None:
            return False
        try:
            import netron
        except ImportError:
            return False
        return bool(netron.status(self.address))

    def start(self, path: str | os.PathLike) -> str:
        try:
            import netron
        except ImportError as exc:
            raise NetronError("Netron is not installed: run `make setup` (or `pip install netron`); "
                              "the rest of the workbench works without it") from exc
        path = Path(path)
        if not path.is_file():
            raise NetronError(f"no graph to show at {path}: export or fuse a model first")
        if self.address is not None:
            self.stop()
        port = self.port or _free_port(self.host)
        # netron.serve configures the root logger when it has no handler; keep the user's logging as it is.
        root, guard = logging.getLogger(), logging.NullHandler()
        root.addHandler(guard)
        try:
            address = netron.serve(str(path), None, address=(self.host, port), browse=False)
        except OSError as exc:
            raise NetronError(f"Netron could not listen on {self.host}:{port}: {exc}. "
                              "Another program may hold the port: use port=0 to pick a free one") from exc
        except Exception as exc:
            raise NetronError(f"Netron failed to start for {path}: {type(exc).__name__}: {exc}") from exc
        finally:
            root.removeHandler(guard)
        self.address, self.path = (str(address[0]), int(address[1])), path
        self._wait_until_serving()
        return self.url  # type: ignore[return-value]

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = exc
            time.sleep(0.05)
        url = self.url
        self.stop()
        raise NetronError(f"Netron started but did not answer at {url} within {self.start_timeout:.0f} s ({last}); "
                          "open the .onnx file in https://netron.app instead")

    def stop(self) -> None:
        if self.address is None:
            return
        try:
            import netron

            netron.stop(self.address)
            deadline = time.monotonic() + 3.0
            while netron.status(self.address) and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            self.address, self.path = None, None

    def __enter__(self) -> "NetronServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self) -> None:  # a forgotten server must not outlive its owner
        try:
            self.stop()
        except Exception:  # interpreter shutdown: modules may already be gone
            pass


def iframe_html(url: str, height: int = 640, title: str = "Netron graph viewer") -> str:
    if not str(url).startswith(("http://127.0.0.1:", "http://localhost:")):
        raise NetronError(f"expected a Netron URL on 127.0.0.1, got {url!r}")
    if height < 100:
        raise NetronError(f"height must be at least 100 pixels, got {height}")
    return (f'<iframe src="{html.escape(url, quote=True)}" title="{html.escape(title, quote=True)}" '
            f'width="100%" height="{int(height)}" style="border: 1px solid #ddd; border-radius: 4px;" '
            'loading="lazy"></iframe>')


def unavailable_html(message: str) -> str:
    return ('<div style="padding: 8px 12px; border-left: 4px solid #d9822b; background: #fff8f0;">'
            f'<b>Graph viewer unavailable.</b> {html.escape(str(message))}</div>')
