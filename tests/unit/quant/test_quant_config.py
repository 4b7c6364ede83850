"""QuantConfig documents itself: each field's help and the methods it applies to are metadata; the
calibration and validation settings are configs of their own; the presets are one table; a file saved with
the flat keys of an earlier version is refused in one line; the INT8 presets can follow the CPU."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Optional

import pytest

from workbench.core.options import config_fields_doc, field_help
from workbench.quant import (PRESET_TABLE, PRESETS, CalibrationConfig, QuantConfig, QuantizeError, QuantMode, TimingConfig,
                             ValidationConfig, applies_to, machine_defaults)
from workbench.quant.config import ALL_METHODS, machine_note


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


def test_calibration_and_validation_are_given_only_as_their_own_configs():
    cfg = QuantConfig(mode="static", calibration=CalibrationConfig(method="entropy", samples=64, batch_size=16, percentile=99.9),
                      validation=ValidationConfig(tolerance=0.5, min_label_agreement=0.8))
    assert cfg.calibration.samples == 64 and cfg.validation.tolerance == 0.5
    for old in ("samples", "calibration_batch_size", "histogram_bins", "percentile", "tolerance", "min_label_agreement"):
        assert not hasattr(cfg, old), old
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'"):
            QuantConfig(**{old: 1})
    with pytest.raises(QuantizeError) as exc:
        QuantConfig(mode="static", calibration="entropy")
    text = str(exc.value)
    assert "\n" not in text and text.startswith("calibration must be a CalibrationConfig") and "'entropy'" in text


def test_presets_are_one_table_and_overrides_name_nested_fields_as_dicts():
    assert PRESETS == tuple(n for n in PRESET_TABLE if n != "weight-only-int8")
    for name, (text, fields) in PRESET_TABLE.items():
        assert text and "\n" not in text, name
        if name in PRESETS:
            assert isinstance(QuantConfig.preset(name), QuantConfig), name
    assert QuantConfig.preset("dynamic") == QuantConfig()
    best = QuantConfig.preset("static")
    assert (best.mode, best.per_channel, best.matmul_const_b_only, best.exclude_worst) == (QuantMode.STATIC, True, True, 6)
    # a dict changes only the fields it names: the preset's entropy method stays
    entropy = QuantConfig.preset("static-entropy", calibration={"samples": 64}, validation={"tolerance": 0.7})
    assert entropy.calibration == CalibrationConfig(method="entropy", samples=64) and entropy.validation.tolerance == 0.7
    # a config replaces the whole: its own defaults
    assert QuantConfig.preset("static-entropy", calibration=CalibrationConfig(samples=64)).calibration.method.value == "minmax"
    assert QuantConfig.preset("weight-only-int4-acc4").accuracy_level == 4
    assert QuantConfig.preset("dynamic", name="mine").label == "mine"  # the field "name", beside the preset's name
    for kw, match in [({"samples": 64}, "QuantConfig has no field 'samples'; give it as calibration={'samples': ...}"),
                      ({"tolerance": 1.0}, "give it as validation={'tolerance': ...}"),
                      ({"bits": 4}, "QuantConfig has no field 'bits'; its fields: ['mode'"),
                      ({"calibration": {"method": "kl"}}, "preset 'static-entropy': calibration must be one of")]:
        with pytest.raises(QuantizeError, match=re.escape(match)) as exc:
            QuantConfig.preset("static-entropy", **kw)
        assert "\n" not in str(exc.value)
    with pytest.raises(QuantizeError, match="no quantization preset 'dynamic_int8'; presets: "):
        QuantConfig.preset("dynamic_int8")


@pytest.mark.parametrize("old, value, new", [("samples", 64, "calibration.samples"), ("calibration", "entropy", "calibration.method"),
                                             ("tolerance", 0.7, "validation.tolerance")])
def test_a_quantize_json_with_an_earlier_versions_flat_keys_is_refused_in_one_line(tmp_path, old, value, new):
    """No compatibility layer: the file, the old key, where it is now and what to do, in one line."""
    from workbench import runs
    from workbench.runs.results import CorruptResult

    @dataclasses.dataclass(frozen=True)
    class Saved:
        config: Optional[QuantConfig]

    path = tmp_path / "run" / "quantize" / "dynamic" / "quantize.json"
    path.parent.mkdir(parents=True)
    runs.save_result(Saved(QuantConfig.preset("static-minmax")), path)
    assert runs.load_result(Saved, path) == Saved(QuantConfig.preset("static-minmax"))
    data = json.loads(path.read_text())
    data["config"].pop("calibration" if old == "calibration" else "mode")
    data["config"][old] = value
    path.write_text(json.dumps(data))
    with pytest.raises(CorruptResult) as exc:
        runs.load_result(Saved, path)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(f"{path}: its key {old!r} (QuantConfig, written by an earlier version) is {new} now")
    assert "workbench quantize" in text and "again to write it afresh, or rename the key in the file" in text


def test_machine_defaults_follow_the_cpu_flags_and_the_presets_take_them():
    avx2 = machine_defaults({"avx2": True, "avx512f": False, "avx512_vnni": False, "avx_vnni": False, "amx": False})
    vnni = machine_defaults({"avx2": True, "avx512f": True, "avx512_vnni": True})
    arm = machine_defaults({})
    # on AVX2 without VNNI 8-bit weights too: 7-bit ones were measured to lose more there; the reason names the preset to try
    assert not avx2.reduce_range and "AVX2 but no VNNI" in avx2.why and "dynamic-reduce-range" in avx2.why
    assert not vnni.reduce_range and "avx512_vnni" in vnni.why and not arm.reduce_range and "no AVX2 or VNNI" in arm.why
    assert machine_defaults().reduce_range in (True, False)  # this CPU's flags, read by the machine profile's reader
    for d in (avx2, vnni, arm):
        assert "\n" not in d.why and d.why.count(". ") == 0  # one sentence
    # the u8s8 INT8 presets take the machine's choice; the fixed presets, u8u8 and weight-only do not change
    seven = dataclasses.replace(avx2, reduce_range=True)  # a machine whose default were 7-bit weights
    assert QuantConfig.preset("dynamic", machine=seven).reduce_range and QuantConfig.preset("static", machine=seven).reduce_range
    assert not QuantConfig.preset("dynamic", machine=avx2).reduce_range
    assert QuantConfig.preset("dynamic") == QuantConfig() and not QuantConfig.preset("dynamic", machine=vnni).reduce_range
    assert QuantConfig.preset("dynamic-reduce-range", machine=vnni).reduce_range
    assert not QuantConfig.preset("dynamic-uint8", machine=seven).reduce_range
    assert not QuantConfig.preset("dynamic", machine=seven, reduce_range=False).reduce_range
    assert QuantConfig.preset("weight-only-int4", machine=avx2) == QuantConfig.preset("weight-only-int4")
    # the result's note says which choice was taken and why
    seventh = QuantConfig.preset("dynamic", machine=seven)
    assert machine_note(seventh, seven) == f"reduce_range=True (as this machine's default: {seven.why})"
    assert machine_note(QuantConfig.preset("dynamic"), seven) == f"reduce_range=False (not this machine's default: {seven.why})"
    assert machine_note(QuantConfig.preset("dynamic"), avx2) == f"reduce_range=False (as this machine's default: {avx2.why})"
    assert machine_note(QuantConfig.preset("weight-only-int4"), avx2) is None
    assert machine_note(QuantConfig.preset("dynamic-uint8"), avx2) is None
