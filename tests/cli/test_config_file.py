"""``--config FILE`` (workbench/cli/config_file.py): every command with config flags reads its config
fields from a YAML or JSON file, flags on the command line win, and a bad file is one line naming the
file, the key and the fix, with exit code 2, before the command does anything. Nothing here runs a stage."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from workbench.cli import build_parser, main
from workbench.cli.flags import build
from workbench.cli.quant import _quant_config
from workbench.quant import QuantConfig, TimingConfig


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_every_command_with_config_flags_takes_config():
    commands = _commands()
    with_fields = {name for name, p in commands.items() if any(hasattr(a, "config_field") for a in p._actions)}
    assert {"data", "train", "export", "fuse", "quantize", "demo", "audit", "ondevice"} <= with_fields
    for name in with_fields:
        assert any("--config" in a.option_strings for a in commands[name]._actions), name


def test_the_file_gives_the_fields_and_flags_win(tmp_path: Path):
    f = _write(tmp_path / "q.yaml", "per_channel: true\nsamples: 64\nop_types: [MatMul]\nshapes: 1x128,8x128\n"
                                    "repeats: 10\nexclude: [a, b]\n")
    args = build_parser().parse_args(["quantize", "src", "--preset", "static-minmax", "--config", str(f), "--repeats", "5"])
    assert _quant_config(args) == QuantConfig.preset("static-minmax", per_channel=True, calibration={"samples": 64}, op_types=("MatMul",),
                                                     nodes_to_exclude=("a", "b"))
    timing = build(TimingConfig, args, base=TimingConfig())
    assert timing.shapes == ((1, 128), (8, 128)) and timing.repeats == 5  # the flag beat the file's 10


def test_json_flag_names_and_nested_configs(tmp_path: Path):
    from workbench.workflows.demo import DemoConfig

    f = _write(tmp_path / "demo.json", json.dumps({"train": {"max_steps": 3}, "search": False, "backends": "eager"}))
    args = build_parser().parse_args(["demo", "--config", str(f)])
    cfg = build(DemoConfig, args, base=DemoConfig.quick())
    assert cfg.train.max_steps == 3 and cfg.search is False and cfg.backends == ("eager",)
    f2 = _write(tmp_path / "steps.yaml", "steps: 4\n")  # the flag's name (--steps) reads too
    assert build(DemoConfig, build_parser().parse_args(["demo", "--config", str(f2)]), base=DemoConfig.quick()).train.max_steps == 4


@pytest.mark.parametrize("text, name, expected", [
    ("sampels: 64\n", "typo.yaml", "unknown key 'sampels'; did you mean 'samples'?"),
    ("samples: [64\n", "broken.yaml", "not valid YAML"),
    ("- samples\n", "list.yaml", "the file is a mapping of config field to value"),
    ("samples: many\n", "kind.yaml", "samples: a whole number, got 'many'"),
    ("shapes: 1by128\n", "shapes.yaml", "shapes: shapes are BATCHxSEQ"),
    ("{\"samples\": 64,}", "bad.json", "not valid JSON"),
    ("samples: 64\n", "quant.toml", "give a .yaml, .yml or .json file"),
])
def test_a_bad_file_is_one_line_naming_it_and_exit_2(tmp_path: Path, capsys, text, name, expected):
    f = _write(tmp_path / name, text)
    code = main(["quantize", str(tmp_path / "no-such-run"), "--config", str(f)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--config {f}:" in err and expected in err, err
    assert not (tmp_path / "no-such-run").exists()


def test_a_missing_file_and_a_value_the_config_refuses(tmp_path: Path, capsys):
    assert main(["quantize", "src", "--config", str(tmp_path / "absent.yaml")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    f = _write(tmp_path / "zero.yaml", "samples: 0\n")
    assert main(["quantize", str(tmp_path), "--config", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"workbench: error: --config {f}: samples must be a positive integer, got 0", err
