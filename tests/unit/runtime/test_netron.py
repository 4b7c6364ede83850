"""Netron serves a graph on 127.0.0.1, stops cleanly, and fails with a message the view can show."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from workbench.runtime.netron_view import NetronError, NetronServer, iframe_html, unavailable_html


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, resp.read()


def test_netron_serves_the_graph_on_localhost_and_stops(exported_tiny, listening):
    import os

    before = listening(os.getpid())
    with NetronServer() as server:
        url = server.start(exported_tiny.onnx_path)
        assert url.startswith("http://127.0.0.1:")
        # the socket itself, as the operating system sees it, is bound to the loopback address only
        opened = listening(os.getpid()) - before
        assert opened == {("127.0.0.1", server.address[1])}, opened
        assert server.running
        status, body = _get(url)
        assert status == 200 and f'content="/data/{exported_tiny.onnx_path.name}"'.encode() in body
        # the graph itself is served to the page
        status, data = _get(url + "/data/" + exported_tiny.onnx_path.name)
        assert status == 200 and data == exported_tiny.onnx_path.read_bytes()
        port = server.address[1]
    assert not server.running and server.url is None
    with pytest.raises((urllib.error.URLError, OSError)):
        _get(url)
    with socket.socket() as s:  # nobody listens on the port any more (TIME_WAIT connections aside)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(1)


def test_switching_graphs_serves_the_new_one(exported_tiny, fused_tiny):
    server = NetronServer()
    try:
        server.start(exported_tiny.onnx_path)
        url = server.start(fused_tiny.fused_path)
        assert server.path == fused_tiny.fused_path and server.running
        _, page = _get(url)
        assert f'content="/data/{fused_tiny.fused_path.name}"'.encode() in page  # the page opens the fused graph
    finally:
        server.stop()
    server.stop()  # idempotent
    assert not server.running


def test_clear_errors_when_netron_cannot_start(tmp_path, exported_tiny):
    with pytest.raises(NetronError, match="no graph to show at"):
        NetronServer().start(tmp_path / "missing.onnx")
    with pytest.raises(NetronError, match="only served on this machine"):
        NetronServer(host="0.0.0.0")
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        taken = blocker.getsockname()[1]
        with pytest.raises(NetronError, match=f"could not listen on 127.0.0.1:{taken}.*port=0"):
            NetronServer(port=taken).start(exported_tiny.onnx_path)


def test_html_snippets():
    snippet = iframe_html("http://127.0.0.1:8081", height=500)
    assert snippet.startswith("<iframe") and 'src="http://127.0.0.1:8081"' in snippet and 'height="500"' in snippet
    with pytest.raises(NetronError, match="127.0.0.1"):
        iframe_html("http://example.com")
    msg = unavailable_html("port <busy>")
    assert "unavailable" in msg and "&lt;busy&gt;" in msg
