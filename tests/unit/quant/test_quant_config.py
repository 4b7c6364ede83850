"""QuantConfig documents itself: each field's help and the methods it applies to are metadata; the
calibration and validation settings are configs of their own; every preset name is a class method of
that name; the keywords and saved files from before the split still read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from workbench.core import serial
from workbench.core.options import config_fields_doc, field_help
from workbench.quant import (PRESETS, CalibrationConfig, QuantConfig, QuantizeError, QuantMode, TimingConfig,
                             ValidationConfig, applies_to)
from workbench.quant.config import ALL_METHODS


def test_every_field_says_what_it_means_and_which_methods_it_applies_to():
    for cls in (QuantConfig, CalibrationConfig, ValidationConfig):
        for doc in config_fields_doc(cls):
            assert doc.help, f"{cls.__name__}.{doc.name} has no help"
    for f in dataclasses.fields(QuantConfig):
        assert set(applies_to(f.name)) <= set(ALL_METHODS) and applies_to(f.name), f.name
    assert applies_to("activation_type") == ("static",) and applies_to("block_size") == ("weight-only",)
    assert applies_to("per_channel") == ("dynamic", "static") and applies_to("mode") == ALL_METHODS
    assert field_help(CalibrationConfig, "samples") == "static calibration texts"
    assert "repeats" in {d.name for d in config_fields_doc(TimingConfig, documented_only=True)}


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(QuantConfig) if f.name not in ("mode", "name")])
def test_a_field_set_for_a_method_it_does_not_apply_to_is_one_line_naming_it(name):
    """The refusal follows the metadata: a non-default value under each method the field does not list."""
    changed = {"weight_type": "quint8", "activation_type": "qint8", "per_channel": True, "reduce_range": True,
               "op_types": ("MatMul",), "nodes_to_exclude": ("n",), "quant_format": "qoperator", "activation_symmetric": True,
               "matmul_const_b_only": True, "exclude_worst": 1, "weight_bits": 3, "block_size": 64, "accuracy_level": 4,
               "weight_symmetric": True, "calibration": CalibrationConfig(samples=64),
               "validation": ValidationConfig(tolerance=0.5)}[name]
    for mode in ALL_METHODS:
        if mode in applies_to(name):
            continue
        with pytest.raises(QuantizeError) as exc:
            QuantConfig(mode=mode, **{name: changed})
        text = str(exc.value)
        assert "\n" not in text and f"{name} applies to {' and '.join(applies_to(name))} quantization only" in text, text
        assert f"this is {mode} quantization" in text and f"leave {name} at its default" in text


def test_calibration_and_validation_are_their_own_configs_and_the_old_keywords_still_work():
    cfg = QuantConfig(mode="static", calibration="entropy", samples=64, calibration_batch_size=16, percentile=99.9,
                      tolerance=0.5, min_label_agreement=0.8)
    assert cfg.calibration == CalibrationConfig(method="entropy", samples=64, batch_size=16, percentile=99.9)
    assert cfg.validation == ValidationConfig(tolerance=0.5, min_label_agreement=0.8)
    assert (cfg.samples, cfg.calibration_batch_size, cfg.tolerance, cfg.min_label_agreement) == (64, 16, 0.5, 0.8)
    assert dataclasses.replace(cfg, samples=32).calibration == dataclasses.replace(cfg.calibration, samples=32)
    assert QuantConfig.preset("static", samples=32).calibration.samples == 32
    assert QuantConfig(mode="static", calibration=CalibrationConfig(samples=16)).samples == 16
    with pytest.raises(TypeError, match="unexpected keyword argument 'sample'"):
        QuantConfig(sample=3)


def test_a_config_saved_before_the_split_reads_back_the_same():
    cfg = QuantConfig.static_qdq("percentile", samples=64, tolerance=0.7)
    now = serial.to_dict(cfg)
    assert serial.from_dict(QuantConfig, json.loads(json.dumps(now))) == cfg
    before = {k: v for k, v in now.items() if k not in ("calibration", "validation")}
    before.update(calibration="percentile", samples=64, calibration_batch_size=8, histogram_bins=0, percentile=99.999,
                  tolerance=0.7, min_label_agreement=0.9)  # the flat keys quantize.json had
    assert serial.from_dict(QuantConfig, before) == cfg


def test_every_preset_name_is_the_class_method_of_that_name():
    presets = QuantConfig.presets()
    assert tuple(presets) == PRESETS
    for name, cfg in presets.items():
        assert getattr(QuantConfig, name.replace("-", "_"))() == cfg == QuantConfig.preset(name), name
    assert QuantConfig.static().mode is QuantMode.STATIC and QuantConfig.static() == QuantConfig.static_best()
    assert QuantConfig.dynamic() == QuantConfig.dynamic_int8() and QuantConfig.static_entropy().calibration.method.value == "entropy"
    assert QuantConfig.weight_only_int4_acc4().accuracy_level == 4
