"""Configs document themselves: each field's help is its own metadata, read by
workbench.core.options.field_help / config_fields_doc (the command line, the docs and the panels)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from workbench.core.options import config_fields_doc, field_help


def _stage_configs() -> list[type]:
    from workbench.audit import AuditConfig
    from workbench.data.load import DataConfig
    from workbench.graph import ExportConfig
    from workbench.ondevice import OnDeviceConfig
    from workbench.quant import CalibrationConfig, QuantConfig, TimingConfig, ValidationConfig
    from workbench.train import TrainConfig

    return [DataConfig, TrainConfig, ExportConfig, QuantConfig, CalibrationConfig, ValidationConfig, TimingConfig,
            AuditConfig, OnDeviceConfig]


@pytest.mark.parametrize("cls", _stage_configs(), ids=lambda c: c.__name__)
def test_every_field_of_the_stage_configs_says_what_it_means(cls):
    missing = [d.name for d in config_fields_doc(cls) if not d.help]
    assert not missing, f"{cls.__name__}: {missing} have no metadata help"
    assert all("\n" not in d.help and d.help == d.help.strip() for d in config_fields_doc(cls))


@dataclass(frozen=True)
class Sample:
    size: int = field(default=3, metadata={"help": "how big", "unit": "cm"})
    name: str = "x"


def test_field_help_reads_the_metadata_and_names_a_missing_field():
    assert field_help(Sample, "size") == "how big" and field_help(Sample, "name") == ""
    assert [(d.name, d.default, d.help) for d in config_fields_doc(Sample)] == [("size", "3", "how big"), ("name", "'x'", "")]
    with pytest.raises(KeyError, match=r"Sample has no field 'sise'; its fields: \['size', 'name'\]"):
        field_help(Sample, "sise")
    with pytest.raises(TypeError, match="not a config dataclass"):
        field_help(int, "real")


def test_a_list_default_reads_as_the_comma_list_its_flag_takes():
    import enum

    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    @dataclass(frozen=True)
    class Lists:
        colors: tuple = (Color.RED, Color.BLUE)
        names: tuple = ("a", "b")
        shapes: tuple = ((1, 32),)

    assert [d.default for d in config_fields_doc(Lists)] == ["red, blue", "a, b", "((1, 32),)"]
