"""The panels' option defaults are the configs' own, and their tooltips the configs' field help."""

from __future__ import annotations

import dataclasses

import pytest

from widgets import GraphPanel, OnDevicePanel, QuantPanel
from widgets.base import config_default
from widgets.embed import EmbedQuantPanel
from workbench.core.options import field_help
from workbench.embed.audit import EmbedAuditConfig
from workbench.graph import ExportConfig
from workbench.ondevice import OnDeviceConfig
from workbench.quant import DEFAULT_BUDGET_OVERALL, DEFAULT_BUDGET_PER_SLICE


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
