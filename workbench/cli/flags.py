"""Command-line flags derived from a config dataclass, and the config built back from them. An enum's value stays
text for the config to check (``parse_choice``), so a wrong one gets the config's one-line message and exit code 2;
flags that set no config field are added with :func:`cli_only`, so the tests can account for every flag."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ..core.options import field_help, shapes_arg
from .config_fields import ConfigFlagError, config_value, field_default, field_type, registry_key
from .config_file import add_config_file_flag, config_file_values, register_class


@dataclass(frozen=True)
class Flag:
    """A config field (dotted for a nested config) as a flag: ``name`` without dashes, ``also`` further fields set to the
    same value, ``split=False`` keeps commas inside items."""

    field: str
    name: Optional[str] = None
    help: Optional[str] = None
    also: tuple[str, ...] = ()
    choices: Optional[Sequence[Any]] = None
    nargs: Optional[str] = None
    split: bool = True
    negatable: bool = True
    required: bool = False
    metavar: Optional[str] = None

    @property
    def option(self) -> str:
        return "--" + (self.name or self.field.rsplit(".", 1)[-1].replace("_", "-"))


FlagSpec = Union[str, Flag]


# ---- parsing values ------------------------------------------------------------------------------
def _is_enum(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, enum.Enum)


def _scalar(t: Any) -> Optional[Callable[[str], Any]]:
    """The converter for one value of type ``t`` (None: not a scalar); an enum's stays text (module doc)."""
    if _is_enum(t):
        return str
    if t in (int, float, str):
        return t
    return None


def shown(value: Any) -> Optional[str]:
    """How a default reads in ``--help`` (None: nothing worth showing)."""
    if value is None or value == "":
        return None
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        if not value:
            return "none"
        if all(isinstance(v, tuple) for v in value):
            return ",".join("x".join(str(x) for x in v) for v in value)  # (batch, sequence) shapes
        return ",".join(shown(v) or "" for v in value)
    return str(value)


class OnOff(argparse.BooleanOptionalAction):
    """``--name`` / ``--no-name`` for one yes/no setting (None when neither is given); both is an error."""

    def __call__(self, parser, namespace, values, option_string=None):
        value = not option_string.startswith("--no-")
        seen = f"_given_{self.dest}"
        previous = getattr(namespace, seen, None)
        if previous is not None and previous[1] != value:
            raise argparse.ArgumentError(None, f"argument {option_string}: not allowed with argument {previous[0]}")
        setattr(namespace, seen, (option_string, value))
        setattr(namespace, self.dest, value)


class Items(argparse.Action):
    """A list flag: comma-separated and/or several words (``nargs``), repeatable; items converted one by one."""

    def __init__(self, option_strings, dest, convert=str, split=True, **kw):
        self.convert, self.split = convert, split
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        items = []
        for token in values if isinstance(values, list) else [values]:
            for part in token.split(",") if self.split else [token]:
                if part.strip():
                    try:
                        items.append(self.convert(part.strip()))
                    except argparse.ArgumentTypeError as exc:
                        raise argparse.ArgumentError(self, str(exc)) from None
                    except ValueError:
                        kind = getattr(self.convert, "__name__", "")
                        raise argparse.ArgumentError(self, f"invalid {kind} value: {part.strip()!r}") from None
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), *items])


# ---- adding the flags, building the config ------------------------------------------------------
def _kind(spec: Flag, leaf_cls: type, name: str, t: Any) -> tuple[dict[str, Any], str]:
    where = f"{leaf_cls.__name__}.{name}"
    if t is bool:
        return ({"action": OnOff} if spec.negatable else {"action": "store_const", "const": True}), ""
    if typing.get_origin(t) is tuple:
        args = typing.get_args(t)
        if len(args) == 2 and args[1] is Ellipsis and typing.get_origin(args[0]) is tuple:  # shapes: ((batch, seq), ...)
            return {"type": shapes_arg, "metavar": "BATCHxSEQ,..."}, ""
        if len(args) == 2 and args[1] is Ellipsis:  # tuple[X, ...]: a list flag
            convert = _scalar(args[0])
            if convert is None:
                raise ConfigFlagError(f"{where} is a tuple of {args[0]}, which no flag carries")
            note = f"; any of: {', '.join(m.value for m in args[0])}" if _is_enum(args[0]) else ""
            return {"action": Items, "convert": convert, "split": spec.split, "metavar": spec.metavar,
                    "nargs": spec.nargs}, note
    convert = _scalar(t)
    if convert is None:
        raise ConfigFlagError(f"{where} has type {t}, which no flag carries")
    metavar = spec.metavar or ("{" + ",".join(m.value for m in t) + "}" if _is_enum(t) else None)
    return {"type": convert, "choices": spec.choices, "metavar": metavar}, ""


def add_config_flags(parser: argparse.ArgumentParser, cls: type, specs: Sequence[FlagSpec], *, base: Any = None,
                     group: Any = None) -> list[argparse.Action]:
    """Add one flag per spec and register them for :func:`build`; ``base``: the config whose values are the defaults shown."""
    target = group if group is not None else parser
    added, entries = [], []
    for spec in specs:
        spec = Flag(spec) if isinstance(spec, str) else spec
        leaf_cls, name, t = field_type(cls, spec.field)
        for other in spec.also:
            field_type(cls, other)
        kw, note = _kind(spec, leaf_cls, name, t)
        text = spec.help if spec.help is not None else field_help(leaf_cls, name)
        if not text:
            raise ConfigFlagError(f"no description of {leaf_cls.__name__}.{name} for {spec.option}: give the field "
                                  f'metadata={{"help": ...}} or give Flag(help=...)')
        text += note
        default = shown(config_value(cls, base, spec.field))
        if default is not None:
            text += f" (default: {default})"
        kw.update(help=text.replace("%", "%%"), required=spec.required or None)
        action = target.add_argument(spec.option, **{k: v for k, v in kw.items() if v is not None})
        action.config_field = (cls.__name__, (spec.field, *spec.also))
        added.append(action)
        entries.append((action.dest, (spec.field, *spec.also)))
    key = registry_key(cls)
    parser.set_defaults(**{key: [*(parser.get_default(key) or []), *entries]})
    add_config_file_flag(parser)
    register_class(parser, cls)
    return added


def cli_only(target: Any, *names: str, **kw) -> argparse.Action:
    """Add a flag that sets no config field, marked so the tests can tell it from a derived one."""
    if not kw.get("help"):
        raise ConfigFlagError(f"command-line-only flag {names} needs a help text")
    action = target.add_argument(*names, **kw)
    action.cli_only = True
    return action


def given(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``cls`` set by the ``--config`` file and the flags (which win), by dotted path."""
    return {**config_file_values(args).get(cls.__name__, {}), **on_command_line(cls, args)}


def on_command_line(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``cls`` set by flags on the command line, by dotted path."""
    entries = getattr(args, registry_key(cls), None)
    if entries is None:
        raise ConfigFlagError(f"this command has no flags of {cls.__name__} (add_config_flags was not called)")
    out: dict[str, Any] = {}
    for dest, paths in entries:
        value = getattr(args, dest, None)
        if isinstance(value, list):
            value = tuple(value)
            if not value:  # a list flag given without items changes nothing
                continue
        if value is None:
            continue
        for path in paths:
            out[path] = value
    return out


def _apply(cls: type, base: Any, changes: Mapping[str, Any]) -> Any:
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, value in changes.items():
        head, _, rest = path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            direct[head] = value
    for head, sub in nested.items():
        inner = getattr(base, head) if base is not None else field_default(cls, head)
        direct[head] = _apply(type(inner), inner, sub)
    if base is None:
        return cls(**direct)
    return dataclasses.replace(base, **direct) if direct else base


def build(cls: type, args: argparse.Namespace, base: Any = None, **defaults: Any) -> Any:
    """``cls`` from ``base`` (a preset; None: the defaults) changed by ``defaults``, then the ``--config`` file, then the flags;
    a config's own error comes back in the command line's terms (``max_length`` -> ``--max-length``)."""
    from_file = config_file_values(args).get(cls.__name__, {})
    try:
        return _apply(cls, base, {**defaults, **given(cls, args)})
    except (ValueError, RuntimeError) as exc:  # a config's own error class (ExportError, OnDeviceError: RuntimeError)
        flags = on_command_line(cls, args)
        by_file = [p.split(".")[-1] for p in from_file if p not in flags]
        if any(re.search(rf"(?<![-\w]){re.escape(leaf)}(?!\w)", str(exc)) for leaf in by_file):
            text = f"--config {args.config_file}: {str(exc)}"  # a value the file gave: named as the file names it
        else:
            text = in_flag_terms(str(exc), getattr(args, registry_key(cls), None) or [])
        if text == str(exc):
            raise
        try:
            renamed = type(exc)(text)
        except Exception:  # noqa: BLE001  an error class with other arguments keeps its own words
            raise exc from None
        raise renamed from exc


def in_flag_terms(message: str, entries) -> str:
    """``message`` with each config field set by a flag named as that flag (``entries``: (dest, field
    paths) as add_config_flags registers them). Names with an underscore are replaced wherever they
    stand; one-word names (``lr``, ``steps``) only where they start the message or precede ``must``/``=``."""
    for dest, paths in entries:
        option = "--" + dest.replace("_", "-")
        for path in paths:
            leaf = path.split(".")[-1]
            if "_" in leaf:
                message = re.sub(rf"(?<![-\w]){re.escape(leaf)}(?!\w)", option, message)
            else:
                message = re.sub(rf"(^|(?<=\s)){re.escape(leaf)}(?=\s+must\b|=)", option, message)
    return message
