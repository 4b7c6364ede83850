"""Parsing typed values once (a wrong value gets the same message everywhere), and each config field's
``metadata={"help": ...}``, which ``--help``, the panels and the docs all show."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple, Sequence, TypeVar, Union

E = TypeVar("E", bound=enum.Enum)


def parse_choice(cls: type[E], value: Any, name: str, error: type[Exception] = ValueError, hint: str = "") -> E:
    """Strings match case-insensitively."""
    if isinstance(value, cls):
        return value
    for v in (value, str(value).lower()):
        try:
            return cls(v)
        except ValueError:
            pass
    allowed = [m.value for m in cls]
    raise error(f"{name} must be one of {allowed}, got {value!r}" + (f"; {hint}" if hint else ""))


Shape = tuple[int, int]


def parse_shapes(shapes: Union[str, Sequence[Sequence[int]]], error: type[Exception] = ValueError) -> tuple[Shape, ...]:
    """``"1x128,32x128"`` or ``[(1, 128), (32, 128)]`` as validated ``((batch, sequence), ...)``."""
    if isinstance(shapes, str):
        pairs = []
        for part in shapes.split(","):
            if not part.strip():
                continue
            try:
                b, s = part.lower().strip().split("x")
                pairs.append((int(b), int(s)))
            except ValueError:
                raise error(f"shapes are BATCHxSEQ separated by commas, e.g. 1x128,32x128; got {part.strip()!r}") from None
        shapes = pairs
    out = []
    for shape in shapes:
        if len(tuple(shape)) != 2:
            raise error(f"each shape must be a (batch, sequence) pair, got {shape!r}")
        b, s = (int(v) for v in shape)
        if b < 1 or s < 2:
            raise error(f"each shape needs batch >= 1 and sequence >= 2, got {b}x{s}")
        out.append((b, s))
    if not out:
        raise error("give at least one (batch, sequence) shape to time, e.g. 1x128")
    return tuple(out)


def shapes_arg(text: str) -> tuple[Shape, ...]:
    """``argparse`` type for ``--shapes BATCHxSEQ,...``."""
    import argparse

    return parse_shapes(text, error=argparse.ArgumentTypeError)


def int_at_least(low: int):
    """``argparse`` type: a whole number of at least ``low``."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be a whole number of at least {low}, got {text!r}")
        return value

    parse.__name__ = f"int>={low}"
    return parse


# ---- what each config field means -------------------------------------------------------------
HELP = "help"  # the metadata key of a field's one-line description


class FieldDoc(NamedTuple):
    name: str
    default: str
    help: str


def _field(config_cls: type, name: str) -> dataclasses.Field:
    if not dataclasses.is_dataclass(config_cls):
        raise TypeError(f"{config_cls!r} is not a config dataclass")
    for f in dataclasses.fields(config_cls):
        if f.name == name:
            return f
    raise KeyError(f"{config_cls.__name__} has no field {name!r}; its fields: {[f.name for f in dataclasses.fields(config_cls)]}")


def field_help(config_cls: type, name: str) -> str:
    return str(_field(config_cls, name).metadata.get(HELP, ""))


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "(required)"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, (str, enum.Enum)) for v in value):
        return ", ".join(str(getattr(v, "value", v)) for v in value)  # as the flag takes it: a comma list
    if dataclasses.is_dataclass(value):  # a nested config: documented under its own name
        return f"{type(value).__name__}(...)"
    return repr(value)


def config_fields_doc(config_cls: type, *, documented_only: bool = False) -> list[FieldDoc]:
    out = [FieldDoc(f.name, _default_text(f), str(f.metadata.get(HELP, ""))) for f in dataclasses.fields(config_cls)
           if f.init]
    return [d for d in out if d.help] if documented_only else out
