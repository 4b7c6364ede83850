"""GraphSession without a widget: export and fuse the tiny model into its run folder, reopen the
saved report with its export, and serve a variant with Netron on 127.0.0.1 until it is closed."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

from workbench.graph import ExportConfig, FusionConfig, FusionReport
from workbench.sessions.base import InputError
from workbench.sessions.graph import GraphSession


@pytest.fixture(scope="module")
def graph_session(tmp_path_factory, quick_data):
    steps = []
    session = GraphSession(data=quick_data, run_dir=tmp_path_factory.mktemp("graph-session"),
                           progress=lambda done, total, eta, detail: steps.append((done, total, detail)))
    session.export_and_fuse("tiny", ExportConfig.quick(), FusionConfig.quick(measure_latency=False))
    session.steps = steps
    yield session
    session.close()


def test_export_and_fuse_keeps_the_report_and_its_export(graph_session: GraphSession) -> None:
    report, export = graph_session.result, graph_session.export_result
    assert isinstance(report, FusionReport) and graph_session.history == [report]
    assert Path(report.source_path) == Path(export.onnx_path) and export.validation.passed
    run = Path(graph_session.run_dir)
    assert (run / "export" / "export.json").is_file() and (run / "fusion" / "fusion.json").is_file()
    assert [s[:2] for s in graph_session.steps] == [(0, 2), (1, 2), (1, 2), (2, 2)], "export then fuse, reported as they ran"


def test_a_saved_report_is_opened_with_its_export(graph_session: GraphSession) -> None:
    opened = GraphSession()
    report = opened.open(Path(graph_session.run_dir) / "fusion")
    assert report.fused_path == graph_session.result.fused_path
    assert opened.export_result.onnx_path == graph_session.export_result.onnx_path


def test_netron_serves_on_127_0_0_1_until_closed(graph_session: GraphSession, listening) -> None:
    pytest.importorskip("netron")
    before = listening(os.getpid())
    url = graph_session.show_netron("transformer")
    port = graph_session.netron.address[1]
    assert listening(os.getpid()) - before == {("127.0.0.1", port)}
    assert url == f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(url, timeout=10) as page:
        assert page.status == 200
    assert graph_session.netron.path == graph_session.graph_path("transformer")
    graph_session.close()
    assert not graph_session.netron.running and ("127.0.0.1", port) not in listening(os.getpid())


def test_an_empty_model_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    session = GraphSession(run_dir=tmp_path / "run")
    with pytest.raises(InputError, match="model is empty"):
        session.export_and_fuse("  ", ExportConfig.quick(), FusionConfig.quick())
    assert not (tmp_path / "run").exists() and session.result is None
    with pytest.raises(InputError, match="export and fuse first"):
        session.show_netron()
