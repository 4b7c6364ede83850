"""The panels' option defaults are the configs' own, and their tooltips the configs' field help."""

from __future__ import annotations

import dataclasses

import pytest

from widgets import GraphPanel, OnDevicePanel, QuantPanel, TrainPanel
from widgets.base import config_default
from widgets.embed import EmbedQuantPanel
from workbench.core.options import field_help
from workbench.embed.audit import EmbedAuditConfig
from workbench.data.load import DataConfig
from workbench.graph import ExportConfig
from workbench.ondevice import OnDeviceConfig
from workbench.quant import DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE, EvalConfig, QuantConfig, SearchConfig
from workbench.train import CompareConfig, TrainConfig


def test_defaults_come_from_the_configs() -> None:
    export = ExportConfig()
    assert GraphPanel.OPTIONS["opset"] == export.opset
    assert GraphPanel.OPTIONS["attn_implementation"] == export.attn_implementation.value
    embed = EmbedAuditConfig()
    assert {k: EmbedQuantPanel.OPTIONS[k] for k in ("n_boot", "min_ndcg_ratio", "max_slice_drop", "exclude_worst")} == \
        {"n_boot": embed.n_boot, "min_ndcg_ratio": embed.min_ndcg_ratio, "max_slice_drop": embed.max_slice_drop,
         "exclude_worst": embed.exclude_worst}
    assert (QuantPanel.OPTIONS["budget_overall"], QuantPanel.OPTIONS["budget_per_slice"]) == (DEFAULT_BUDGET_OVERALL,
                                                                                              DEFAULT_BUDGET_PER_SLICE)


def test_config_default_reads_defaults_and_factories() -> None:
    @dataclasses.dataclass
    class Cfg:
        a: int = 3
        b: list = dataclasses.field(default_factory=lambda: [1])

    assert (config_default(Cfg, "a"), config_default(Cfg, "b")) == (3, [1])
    with pytest.raises(AttributeError, match="Cfg has no field 'c'"):
        config_default(Cfg, "c")


def test_tooltips_are_the_configs_help() -> None:
    graph = GraphPanel()
    try:
        assert graph.controls["opset"].tooltip == field_help(ExportConfig, "opset") != ""
    finally:
        graph.close()
    ondevice = OnDevicePanel()
    assert ondevice.controls["lr"].tooltip == field_help(OnDeviceConfig, "lr") != ""


def _tooltips(panel_cls: type) -> dict[str, str]:
    panel = panel_cls()
    try:
        return {name: getattr(widget, "tooltip", None) for name, widget in panel.controls.items()}
    finally:
        panel.close()


@pytest.mark.parametrize(("panel_cls", "expected"), [
    (QuantPanel, {"n_boot": (EvalConfig, "n_boot"), "worst_k": (QuantConfig, "exclude_worst"),
                  "budget_overall": (SearchConfig, "budget_overall"), "budget_per_slice": (SearchConfig, "budget_per_slice"),
                  "candidates": (SearchConfig, "candidates")}),
    (TrainPanel, {"model": (TrainConfig, "model"), "max_steps": (TrainConfig, "max_steps"), "data": (DataConfig, "source"),
                  "backends": (CompareConfig, "backends"), "isolate": (CompareConfig, "isolate")}),
    (EmbedQuantPanel, {"presets": (EmbedAuditConfig, "presets"), "queries": (EmbedAuditConfig, "builtin_queries"),
                       "max_queries": (EmbedAuditConfig, "max_queries"), "max_docs": (EmbedAuditConfig, "max_docs"),
                       "n_boot": (EmbedAuditConfig, "n_boot"), "min_ndcg_ratio": (EmbedAuditConfig, "min_ndcg_ratio"),
                       "max_slice_drop": (EmbedAuditConfig, "max_slice_drop"),
                       "exclude_worst": (EmbedAuditConfig, "exclude_worst"), "time_speed": (EmbedAuditConfig, "time_speed")}),
], ids=["quant", "train", "embed"])
def test_controls_for_config_fields_show_the_field_help(panel_cls: type, expected: dict[str, tuple[type, str]]) -> None:
    tips = _tooltips(panel_cls)
    want = {control: field_help(cls, name) for control, (cls, name) in expected.items()}
    assert all(want.values()), f"a field without help: {want}"
    assert {control: tips[control] for control in expected} == want
