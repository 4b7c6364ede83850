"""``--config FILE``: a command's config fields read from a YAML or JSON file; flags on the command line win::

    # quant.yaml: workbench quantize runs/demo --preset static-minmax --config quant.yaml --repeats 5
    per_channel: true
    samples: 64
    op_types: [MatMul]
    shapes: 1x128,8x128     # or [[1, 128], [8, 128]]
    repeats: 10             # --repeats 5 on the command line wins

A key is a field's name (``max_steps``) or its flag's name (``steps``, ``max-length``); a field several of the
command's configs hold (``seed``, ``device``) is given to each; a nested config is a mapping (``train: {max_steps: 2}``).
The configs check the values, as a flag's; a bad file or key is one line (exit code 2) before the command does anything."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import json
import typing
from pathlib import Path
from typing import Any, Mapping

from .config_fields import field_type, registry_key

# where the parsed file is kept on the parsed arguments: {config class name: {field path: value}}
VALUES = "_config_file_values"
CLASSES = "_config_classes"


class ConfigFileError(ValueError):
    """A ``--config`` file that cannot be used: one line naming the file, the key and the fix."""


def add_config_file_flag(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` on ``parser``, once however many configs the command has; marked command-line-only."""
    if any("--config" in a.option_strings for a in parser._actions):
        return
    action = parser.add_argument("--config", dest="config_file", metavar="FILE",
                                 help="YAML or JSON file of config fields (field or flag names, e.g. 'samples: 64'); "
                                      "flags given here win")
    action.cli_only = True


def register_class(parser: argparse.ArgumentParser, cls: type) -> None:
    classes = dict(parser.get_default(CLASSES) or {})
    classes[cls.__name__] = cls
    parser.set_defaults(**{CLASSES: classes})


def read_config_file(path: str | Path) -> dict:
    """The parsed file: YAML (``.yaml``/``.yml``) or JSON; an empty file is an empty mapping."""
    path = Path(path)
    kind = "YAML" if path.suffix.lower() in (".yaml", ".yml") else "JSON" if path.suffix.lower() == ".json" else None
    if kind is None:
        raise ConfigFileError(f"--config {path}: give a .yaml, .yml or .json file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigFileError(f"--config {path}: cannot read it ({exc.strerror or exc}); give an existing {kind} file") from None
    try:
        if kind == "YAML":
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text) if text.strip() else None
    except Exception as exc:  # noqa: BLE001 - yaml's and json's errors both become the one line
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigFileError(f"--config {path}: not valid {kind} ({first}); fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"--config {path}: the file is a mapping of config field to value (e.g. 'samples: 64'); "
                              f"got a {type(data).__name__}")
    return data


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"train": {"max_steps": 2}} -> {"train.max_steps": 2}; keys with ``-`` read as ``_``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = prefix + str(key).replace("-", "_")
        if isinstance(value, dict):
            out.update(_flat(value, name + "."))
        else:
            out[name] = value
    return out


def _targets(key: str, classes: Mapping[str, type], flag_paths: Mapping[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """(config class name, field path) pairs ``key`` sets: a field of a config (dotted into nested ones) or a flag's name."""
    found = list(flag_paths.get(key, []))
    for name, cls in classes.items():
        try:
            field_type(cls, key)
        except TypeError:  # ConfigFlagError: not a field of this config
            continue
        if (name, key) not in found:
            found.append((name, key))
    return found


def _converted(value: Any, t: Any, where: str) -> Any:
    """A YAML/JSON value as the field's annotation ``t`` wants it: lists become tuples, a comma string a
    list; a scalar of the wrong kind is refused here (the configs judge the rest)."""
    from ..core.options import parse_shapes

    if value is None:
        return None
    if typing.get_origin(t) is tuple:
        args = typing.get_args(t)
        if args and typing.get_origin(args[0]) is tuple:  # shapes: ((batch, seq), ...)
            try:
                return parse_shapes(value if isinstance(value, str) else [tuple(v) for v in value], error=ConfigFileError)
            except (ConfigFileError, TypeError) as exc:
                raise ConfigFileError(f"{where}: {exc}") from None
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        if not isinstance(value, list):
            raise ConfigFileError(f"{where}: a list (or a comma-separated string), got {value!r}")
        return tuple(value)
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return value
    if t is bool and not isinstance(value, bool):
        raise ConfigFileError(f"{where}: true or false, got {value!r}")
    if t is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigFileError(f"{where}: a whole number, got {value!r}")
    if t is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ConfigFileError(f"{where}: a number, got {value!r}")
    if t is str:
        if isinstance(value, (bool, list, dict)):
            raise ConfigFileError(f"{where}: a text value, got {value!r}")
        return str(value)
    return value


def config_file_values(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """{config class name: {field path: value}} from ``args.config_file``, read and checked once and kept on ``args``."""
    cached = getattr(args, VALUES, None)
    if cached is not None:
        return cached
    path = getattr(args, "config_file", None)
    out: dict[str, dict[str, Any]] = {}
    if path:
        classes: Mapping[str, type] = getattr(args, CLASSES, None) or {}
        flag_paths: dict[str, list[tuple[str, str]]] = {}
        for name in classes:
            for dest, paths in getattr(args, registry_key(classes[name]), None) or []:
                flag_paths.setdefault(dest, []).extend((name, p) for p in paths)
        for key, value in _flat(read_config_file(path)).items():
            targets = _targets(key, classes, flag_paths)
            if not targets:
                known = {f.name for cls in classes.values() for f in dataclasses.fields(cls) if f.init} | set(flag_paths)
                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigFileError(f"--config {path}: unknown key {key!r}; {hint}the keys are the fields of "
                                      f"{', '.join(classes)} (see `workbench {getattr(args, 'command', 'COMMAND')} --help`)")
            for cls_name, field_path in targets:
                _, leaf, t = field_type(classes[cls_name], field_path)
                out.setdefault(cls_name, {})[field_path] = _converted(value, t, f"--config {path}: {key}")
    setattr(args, VALUES, out)
    return out
