"""A config dataclass as the command line reads it: a field's annotation and default, by dotted path into nested configs."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union


class ConfigFlagError(TypeError):
    """A command declares a flag the config cannot have (a programming error, found when the parser is built)."""


def field_default(cls: type, name: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            return None
    raise ConfigFlagError(f"{cls.__name__} has no field {name!r}")


def field_type(cls: type, path: str) -> tuple[type, str, Any]:
    """(the dataclass holding the last part of ``path``, its name, its annotation without Optional)."""
    head, _, rest = path.partition(".")
    if not dataclasses.is_dataclass(cls) or head not in {f.name for f in dataclasses.fields(cls)}:
        fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
        raise ConfigFlagError(f"{cls.__name__} has no field {head!r}; its fields: {fields}")
    t = typing.get_type_hints(cls)[head]
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if typing.get_origin(t) in (Union, types.UnionType) and len(args) == 1:  # Optional[X]: X
        t = args[0]
    if rest:
        return field_type(t, rest)
    return cls, head, t


def config_value(cls: type, base: Any, path: str) -> Any:
    """The value of ``path`` in ``base`` (or in the class's defaults when there is no base)."""
    head, _, rest = path.partition(".")
    value = getattr(base, head) if base is not None else field_default(cls, head)
    if not rest:
        return value
    _, _, sub = field_type(cls, head)
    return config_value(sub, value, rest)


def registry_key(cls: type) -> str:
    return f"_config_flags_{cls.__name__}"
