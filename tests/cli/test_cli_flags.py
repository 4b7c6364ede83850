"""The command line's flags come from the config dataclasses (workbench/cli/flags.py).

First the derivation on a toy config (every kind of field, round trip, errors), then the real
parser: every flag of every command sets a real config field or is marked command-line-only,
every field behind a flag says what it means (its metadata), the flags build the configs the commands used to build by
hand, and argparse's errors are one line with exit code 2. Nothing here imports torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from workbench.cli import build_parser, main
from workbench.cli.app import OneLineErrors
from workbench.cli.flags import ConfigFlagError, Flag, add_config_flags, build, cli_only, shown
from workbench.core.options import config_fields_doc, field_help, parse_choice

REPO = Path(__file__).resolve().parents[2]


# ---- the derivation on a toy config -----------------------------------------------------------
class Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


def _h(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class Inner:
    size: int = field(default=3, metadata=_h("inner size"))


@dataclass(frozen=True)
class Toy:
    name: str = field(default="x", metadata=_h("a name"))
    count: int = field(default=1, metadata=_h("how many"))
    sizes: tuple[int, ...] = field(default=(), metadata=_h("sizes"))
    rate: Optional[float] = field(default=None, metadata=_h("a rate (default: none)"))
    color: Color = field(default=Color.RED, metadata=_h("which colour"))
    verbose: bool = field(default=False, metadata=_h("say more"))
    tags: tuple[str, ...] = field(default=(), metadata=_h("labels"))
    colors: tuple[Color, ...] = field(default=(Color.RED,), metadata=_h("colours"))
    shapes: tuple[tuple[int, int], ...] = field(default=((1, 128),), metadata=_h("shapes to time"))
    inner: Inner = field(default_factory=Inner)
    quiet: bool = False  # says nothing about itself: a flag for it needs Flag(help=...)

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"count must be at least 1, got {self.count}")
        object.__setattr__(self, "color", parse_choice(Color, self.color, "color"))
        object.__setattr__(self, "colors", tuple(parse_choice(Color, c, "colors") for c in self.colors))


TOY_FLAGS = ("name", "count", "sizes", "rate", "color", "verbose", "tags", "colors", "shapes", Flag("inner.size", "size"))


def _toy_parser(specs=TOY_FLAGS, base=None) -> argparse.ArgumentParser:
    p = OneLineErrors(prog="toy")
    add_config_flags(p, Toy, specs, base=base)
    cli_only(p, "--json", action="store_true", help="print JSON")
    return p


def test_no_flag_given_is_the_base_unchanged():
    args = _toy_parser().parse_args([])
    assert build(Toy, args) == Toy()
    base = Toy(count=5, verbose=True, inner=Inner(9))
    assert build(Toy, args, base=base) is base


def test_every_kind_of_field_round_trips():
    args = _toy_parser().parse_args(["--name", "y", "--count", "2", "--rate", "0.5", "--color", "BLUE", "--verbose",
                                     "--tags", "a,b", "--tags", "c", "--colors", "blue,red", "--shapes", "1x8,2x16",
                                     "--size", "7", "--sizes", "1,2", "--json"])
    assert build(Toy, args) == Toy(name="y", count=2, rate=0.5, color=Color.BLUE, verbose=True, tags=("a", "b", "c"),
                                   colors=(Color.BLUE, Color.RED), shapes=((1, 8), (2, 16)), inner=Inner(7), sizes=(1, 2))
    assert args.json is True  # command-line-only flags stay beside the config


def test_flags_change_only_what_they_name_on_a_base():
    base = Toy(name="kept", verbose=True, tags=("t",), inner=Inner(4))
    got = build(Toy, _toy_parser().parse_args(["--no-verbose", "--count", "3"]), base=base)
    assert got == dataclasses.replace(base, verbose=False, count=3)
    # defaults under the flags: a flag given wins, a default fills in otherwise
    assert build(Toy, _toy_parser().parse_args([]), count=8).count == 8
    assert build(Toy, _toy_parser().parse_args(["--count", "2"]), count=8).count == 2


def test_list_flags_in_words_without_splitting_and_empty_lists():
    specs = (Flag("tags", nargs="+", split=False), Flag("colors", nargs="*"))
    args = _toy_parser(specs).parse_args(["--tags", "a,b", "c", "--colors"])
    assert build(Toy, args) == Toy(tags=("a,b", "c"))  # --colors with no items changes nothing


def test_one_flag_can_set_several_fields():
    p = OneLineErrors(prog="toy")
    add_config_flags(p, Toy, [Flag("count", "n", also=("inner.size",))])
    assert build(Toy, p.parse_args(["--n", "6"])) == Toy(count=6, inner=Inner(6))


def test_help_shows_the_description_and_the_default_of_the_base(capsys):
    with pytest.raises(SystemExit) as exc:
        _toy_parser(base=Toy(count=4, tags=("p", "q"), inner=Inner(5))).parse_args(["--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for part in ("--count COUNT how many (default: 4)", "--color {red,blue} which colour (default: red)",
                 "--verbose, --no-verbose say more (default: off)", "--tags TAGS labels (default: p,q)",
                 "colours; any of: red, blue (default: red)", "--shapes BATCHxSEQ,... shapes to time (default: 1x128)",
                 "--size SIZE inner size (default: 5)", "a rate (default: none)"):
        assert part in text, part
    assert shown(((1, 128), (8, 64))) == "1x128,8x64" and shown(()) == "none" and shown(None) is None


@pytest.mark.parametrize("argv, expected", [
    (["--count", "many"], "argument --count: invalid int value: 'many'"),
    (["--sizes", "1,two"], "argument --sizes: invalid int value: 'two'"),
    (["--shapes", "1by8"], "argument --shapes: shapes are BATCHxSEQ"),
    (["--verbose", "--no-verbose"], "argument --no-verbose: not allowed with argument --verbose"),
])
def test_bad_values_are_one_line_and_exit_2(argv, expected, capsys):
    with pytest.raises(SystemExit) as exc:
        _toy_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("toy: error: ") and expected in err, err


@pytest.mark.parametrize("argv, expected", [
    (["--count", "0"], "--count must be at least 1, got 0"),
    (["--color", "green"], "--color must be one of ['red', 'blue'], got 'green'"),  # the config's own parse_choice
    (["--colors", "red,green"], "--colors must be one of ['red', 'blue'], got 'green'"),
])
def test_the_config_checks_the_values_itself(argv, expected):
    """argparse takes the text; the config is the one judge of values, and its message names the flag."""
    args = _toy_parser().parse_args(argv)
    with pytest.raises(ValueError) as exc:
        build(Toy, args)
    assert str(exc.value) == expected


def test_declaration_mistakes_are_found_when_the_parser_is_built():
    with pytest.raises(ConfigFlagError, match=r"Toy has no field 'colour'; its fields: \['name'"):
        _toy_parser(("colour",))
    with pytest.raises(ConfigFlagError, match="no description of Toy.quiet"):
        add_config_flags(argparse.ArgumentParser(), Toy, ["quiet"])
    add_config_flags(argparse.ArgumentParser(), Toy, [Flag("quiet", help="say less")])  # a command's own words do
    with pytest.raises(ConfigFlagError, match="needs a help text"):
        cli_only(argparse.ArgumentParser(), "--json", action="store_true")
    with pytest.raises(ConfigFlagError, match="has no flags of Toy"):
        build(Toy, argparse.Namespace())


# ---- the real commands -------------------------------------------------------------------------
def _config_classes() -> dict[str, type]:
    from workbench.audit import AuditConfig
    from workbench.data.load import DataConfig
    from workbench.embed.audit import EmbedAuditConfig
    from workbench.graph import ExportConfig, FusionConfig
    from workbench.ondevice import OnDeviceConfig
    from workbench.workflows.demo import DemoConfig
    from workbench.quant import BaselineConfig, EvalConfig, QuantConfig, SearchConfig, TimingConfig
    from workbench.train import CompareConfig, TrainConfig

    classes = (AuditConfig, CompareConfig, EmbedAuditConfig, DataConfig, ExportConfig, FusionConfig, OnDeviceConfig, DemoConfig,
               QuantConfig, SearchConfig, TimingConfig, TrainConfig, EvalConfig, BaselineConfig)
    return {c.__name__: c for c in classes}


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _resolve(cls: type, path: str) -> None:
    from workbench.cli.config_fields import field_type

    field_type(cls, path)  # raises ConfigFlagError for a field the config does not have


def test_every_flag_sets_a_real_config_field_or_is_marked_command_line_only():
    classes = _config_classes()
    commands = _commands()
    assert set(commands) == {"doctor", "data", "runs", "train", "compare", "export", "fuse", "quantize", "demo",
                             "workshop", "audit", "ondevice", "machine", "run"}
    derived = 0
    for name, parser in commands.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue  # -h, and positionals (the source of fuse/quantize)
            assert action.help, f"{name} {action.option_strings}: no help"
            if getattr(action, "cli_only", False):
                continue
            assert hasattr(action, "config_field"), \
                f"workbench {name} {action.option_strings[0]} is neither derived from a config nor marked cli_only"
            cls_name, paths = action.config_field
            for path in paths:
                _resolve(classes[cls_name], path)
            derived += 1
    assert derived >= 80, derived  # most flags are derived


def _leaf(cls: type, path: str) -> tuple[type, str]:
    from workbench.cli.config_fields import field_type

    leaf_cls, name, _ = field_type(cls, path)
    return leaf_cls, name


def test_every_field_behind_a_flag_says_what_it_means_and_help_shows_it():
    """The text is the field's own (metadata["help"]); --help shows it unless the command words it itself."""
    classes = _config_classes()
    shown_from_field = 0
    for name, parser in _commands().items():
        for action in parser._actions:
            if not hasattr(action, "config_field"):
                continue
            cls_name, paths = action.config_field
            for path in paths:
                leaf_cls, leaf = _leaf(classes[cls_name], path)
                assert field_help(leaf_cls, leaf), f"workbench {name}: {leaf_cls.__name__}.{leaf} has no metadata help"
            leaf_cls, leaf = _leaf(classes[cls_name], paths[0])
            shown_from_field += action.help.startswith(field_help(leaf_cls, leaf).replace("%", "%%"))
    assert shown_from_field >= 80, shown_from_field


def test_quantize_help_reads_the_fields_own_words(capsys):
    from workbench.quant import CalibrationConfig, QuantConfig

    with pytest.raises(SystemExit):
        main(["quantize", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"--per-channel, --no-per-channel {field_help(QuantConfig, 'per_channel')} (default: off)" in text
    assert f"--samples SAMPLES {field_help(CalibrationConfig, 'samples')} (default: 128)" in text  # a nested config's field


def test_config_fields_doc_lists_every_field_with_its_default():
    docs = {d.name: d for d in config_fields_doc(Toy)}
    assert list(docs)[:3] == ["name", "count", "sizes"] and docs["count"].help == "how many"
    assert docs["color"].default == "red" and docs["quiet"].help == ""
    assert "quiet" not in {d.name for d in config_fields_doc(Toy, documented_only=True)}
    with pytest.raises(KeyError, match="Toy has no field 'colour'"):
        field_help(Toy, "colour")


def test_the_flags_the_readme_shows_still_exist():
    """Every `workbench COMMAND --flag` written in the README, notebooks/README.md and the documentation pages."""
    pages = [REPO / "README.md", REPO / "notebooks" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    readme = "\n".join(p.read_text() for p in pages)
    commands = _commands()
    import re

    for line in re.findall(r"workbench ([a-z]+)([^`\n]*)", readme):
        command, rest = line
        if command not in commands:
            continue
        options = {s for a in commands[command]._actions for s in a.option_strings}
        for flag in re.findall(r"(--[a-z][a-z0-9-]*)", rest):
            assert flag in options, f"the docs: workbench {command} {flag} is not a flag any more"


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_train_flags_build_the_preset_changed_by_the_flags():
    from workbench.cli import train_config
    from workbench.train import Schedule, TrainConfig

    assert train_config(_parse("train")) == TrainConfig.quick()
    assert train_config(_parse("compare", "--preset", "demo")) == TrainConfig.demo()
    cfg = train_config(_parse("train", "--preset", "bench", "--steps", "5", "--data", "x.csv", "--max-train", "100",
                               "--dropout", "--schedule", "COSINE", "--no-save-graphs", "--memory-optimizer-level", "1"))
    bench = TrainConfig.bench()
    assert cfg == bench.replace(max_steps=5, dropout=True, schedule=Schedule.COSINE, save_graphs=False, memory_optimizer_level=1,
                                data=dataclasses.replace(bench.data, source="x.csv", max_train=100))
    assert cfg.data.max_eval == 64  # the preset's other data settings are kept


def test_graph_and_quant_flags_build_their_configs():
    from workbench.cli.quant import _quant_config
    from workbench.graph import Attention, ExportConfig, FusionConfig, Variant
    from workbench.quant import QuantConfig, TimingConfig

    a = _parse("export", "--attn", "sdpa", "--split", "test", "--opset", "14")
    assert build(ExportConfig, a, base=ExportConfig.quick()) == ExportConfig.quick(
        attn_implementation=Attention.SDPA, validation_split="test", opset=14)
    f = build(FusionConfig, _parse("fuse", "src", "--variants", "transformer", "--shapes", "1x8", "--latency"),
              base=FusionConfig.inspect_only())
    assert f.variants == (Variant.UNOPTIMIZED, Variant.TRANSFORMER) and f.shapes == ((1, 8),)
    assert f.measure_latency and f.time_pytorch  # --latency turns both on, --no-latency both off
    f = build(FusionConfig, _parse("fuse", "src", "--no-latency"), base=FusionConfig.default())
    assert not f.measure_latency and not f.time_pytorch
    assert f.fusion == "timed"  # the timed choice unless asked otherwise
    assert build(FusionConfig, _parse("fuse", "src", "--fusion", "full"), base=FusionConfig.quick()) == FusionConfig.quick(fusion="full")
    a = _parse("quantize", "src", "--preset", "static-minmax", "--per-channel", "--op-types", "MatMul", "--exclude", "n1", "n2",
               "--quick", "--shapes", "1x8", "--repeats", "2")
    assert _quant_config(a) == dataclasses.replace(QuantConfig.preset("static-minmax"), per_channel=True, op_types=("MatMul",),
                                                   nodes_to_exclude=("n1", "n2"))
    assert build(TimingConfig, a, base=TimingConfig.quick()) == TimingConfig.quick(shapes=((1, 8),), repeats=2)
    assert _quant_config(_parse("quantize", "src", "--exclude")) == QuantConfig.preset("dynamic")


def test_demo_audit_ondevice_data_flags_build_their_configs():
    from workbench.audit import AuditConfig
    from workbench.data.load import DataConfig
    from workbench.ondevice import OnDeviceConfig, Trainable
    from workbench.workflows.demo import DemoConfig

    d = build(DemoConfig, _parse("demo", "--quick", "--steps", "6", "--backends", "eager", "--no-search"), base=DemoConfig.quick())
    assert d == DemoConfig.quick(train=DemoConfig.quick().train.replace(max_steps=6), backends=("eager",), search=False)
    a = _parse("audit", "--model", "m", "--data", "d", "--quick", "--presets", "dynamic,static-minmax", "--slice-column", "a",
               "b", "--slice-column", "c", "--include-small")
    assert a.model == "m"  # the audit's input, not a config field
    assert build(AuditConfig, a, n_boot=200) == AuditConfig(data="d", quick=True, presets=("dynamic", "static-minmax"),
                                                           slice_columns=("a", "b", "c"), include_small_slices=True, n_boot=200)
    assert build(AuditConfig, _parse("audit", "--model", "m", "--data", "d", "--n-boot", "150"), n_boot=200).n_boot == 150
    o = build(OnDeviceConfig, _parse("ondevice", "--model", "minilm", "--trainable", "LAST", "--last-n", "2", "--no-memory"),
              base=OnDeviceConfig.default())
    assert o == OnDeviceConfig.default(trainable=Trainable.LAST, last_n_layers=2, measure_memory=False)
    assert build(OnDeviceConfig, _parse("ondevice"), base=OnDeviceConfig.quick()) == OnDeviceConfig.quick()
    assert build(DataConfig, _parse("data", "--slice-columns", "a", "b", "--seed", "3")) == DataConfig(slice_columns=("a", "b"), seed=3)


@pytest.mark.parametrize("argv, expected", [
    (["train", "--spinning", "--no-spinning"], "not allowed with argument --spinning"),
    (["audit", "--data", "d.csv"], "the following arguments are required: --model"),
    (["export", "--opset", "seventeen"], "invalid int value: 'seventeen'"),
    (["fuse", "x", "--shapes", "1y8"], "shapes are BATCHxSEQ separated by commas"),
    (["fuse", "x", "--fusion", "fastest"], "argument --fusion: invalid choice: 'fastest' (choose from"),
    (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
])
def test_argparse_errors_are_one_line_with_exit_code_2(argv, expected, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert expected in err and "error" in err and "--help" in err


@pytest.mark.parametrize("argv, expected", [
    (["train", "--schedule", "sideways"], "schedule must be one of ['constant', 'linear', 'cosine'], got 'sideways'"),
    (["train", "--max-train", "0"], "--max-train must be a positive number of examples, got 0; leave it unset to keep them all"),
    (["fuse", "{src}", "--variants", "ort_max"],
     "variant must be one of ['unoptimized', 'ort_basic', 'ort_extended', 'ort_all', 'transformer', 'transformer_fp16'], got 'ort_max'"),
    (["quantize", "{src}", "--calibration", "guess"], "calibration must be one of ['minmax', 'entropy', 'percentile']"),
    (["demo", "--backends", ",", "--steps", "0"], "--steps must be a positive integer, got 0; leave it unset to train for the epochs"),
    (["fuse", "{src}", "--threads", "0"], "--threads must be a positive number, got 0; leave it unset"),
])
def test_bad_settings_are_the_configs_one_line_with_exit_code_2(argv, expected, tmp_path, capsys):
    """Values argparse cannot judge (an enum's, a range) go to the config, whose message is printed with the
    fields it names given as their flags (max_train -> --max-train)."""
    src = tmp_path / "model.onnx"
    src.write_bytes(b"")  # never read: the config is refused first
    code = main([a.replace("{src}", str(src)) for a in argv] + ["--run-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("workbench: error: ") and expected in err, err
    assert "None" not in err  # Python's word for "not given" is no flag value a user can type
    assert not (tmp_path / "out").exists()


def test_every_command_has_help_and_the_module_runs_from_any_folder(tmp_path, capsys):
    for name in _commands():
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0 and f"usage: workbench {name}" in capsys.readouterr().out
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "--help"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 0 and "quantize" in proc.stdout and "ondevice" in proc.stdout, proc.stderr
    # the console script entry point names the same function
    assert 'workbench = "workbench.cli:main"' in (REPO / "pyproject.toml").read_text()
