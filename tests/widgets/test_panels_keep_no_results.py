"""Panels bind controls to their session and keep no results: every result object is the session's,
and the panel's own attributes (and traits) hold none."""

from __future__ import annotations

from typing import Any

from widgets import DoctorBanner, GraphPanel, QuantPanel
from workbench.doctor.checks import Check, DoctorReport
from workbench.embed.audit import EmbedQuantRun
from workbench.graph import ExportResult, FusionReport
from workbench.ondevice import OnDeviceResult
from workbench.quant import QuantResult, SearchResult
from workbench.train import Comparison

RESULTS = (QuantResult, SearchResult, FusionReport, ExportResult, DoctorReport, Comparison, OnDeviceResult, EmbedQuantRun)


def results_held(obj: Any) -> list[str]:
    """The attributes of ``obj`` (its instance dict and traits, one level into containers) that hold a result."""
    found = []
    own = {**vars(obj), **getattr(obj, "_trait_values", {})}
    for name, value in own.items():
        if name == "session":
            continue
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple, set)) else [value]
        if any(isinstance(v, RESULTS) for v in items):
            found.append(name)
    return found


def test_results_held_finds_a_result_kept_on_a_panel(quant_tiny_dynamic) -> None:
    panel = QuantPanel(n_boot=100)
    panel.kept = {"x": quant_tiny_dynamic}
    assert results_held(panel) == ["kept"]


def test_the_quant_panel_reads_its_results_from_the_session(quant_tiny_dynamic) -> None:
    panel = QuantPanel(saved=quant_tiny_dynamic.out_dir, n_boot=100)
    assert panel.result is panel.session.result and panel.result.name == quant_tiny_dynamic.name
    assert panel.results is panel.session.results and panel.options["graph"] == panel.session.graph
    assert results_held(panel) == []


def test_the_graph_panel_reads_its_report_export_and_netron_from_the_session(fused_tiny) -> None:
    panel = GraphPanel(saved=fused_tiny)
    try:
        assert panel.result is panel.session.result is fused_tiny
        assert panel.export_result is panel.session.export_result is not None
        assert panel.netron is panel.session.netron
        assert results_held(panel) == []
    finally:
        panel.close()


def test_the_doctor_banner_and_option_writes_reach_the_session(quick_data) -> None:
    report = DoctorReport([Check("python", True, "3")])
    banner = DoctorBanner(report=report)
    assert banner.result is banner.session.result is report and banner.ok and results_held(banner) == []
    panel = QuantPanel(n_boot=100)
    panel.options["data"] = quick_data  # as the Workbench hands the training data on
    assert panel.session.data is quick_data
