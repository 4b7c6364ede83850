"""Result dataclasses to JSON-ready dicts and back, guided by their type hints."""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

T = TypeVar("T")


class OutdatedKey(ValueError):
    """A saved file with a key an earlier version wrote, which the class now keeps elsewhere (its ``MOVED_KEYS``)."""


def to_dict(obj: Any) -> Any:
    """Non-finite floats become ``None`` (strict JSON)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    # numpy scalars and 0-d arrays
    item = getattr(obj, "item", None)
    if callable(item):
        return to_dict(item())
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON: {obj!r}")


def from_dict(tp: type[T], data: Any) -> T:
    if tp is Any:
        return data
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        last_error: Exception | None = None
        for arg in non_none:
            try:
                return from_dict(arg, data)
            except OutdatedKey:
                raise
            except (TypeError, ValueError, KeyError) as exc:
                last_error = exc
        raise TypeError(f"value {data!r} matches none of {tp}") from last_error
    if origin in (list, typing.List):
        (item,) = args or (Any,)
        return [from_dict(item, v) for v in data]
    if origin in (tuple, typing.Tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_dict(args[0], v) for v in data)
        if args:
            return tuple(from_dict(a, v) for a, v in zip(args, data))
        return tuple(data)
    if origin in (dict, typing.Dict):
        key_t, val_t = args or (Any, Any)
        return {from_dict(key_t, k): from_dict(val_t, v) for k, v in data.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {tp.__name__}, got {type(data).__name__}")
        moved = getattr(tp, "MOVED_KEYS", {})  # keys an earlier version saved where the class has none now
        old = next((k for k, v in data.items() if k in moved and not isinstance(v, dict)), None)
        if old is not None:
            raise OutdatedKey(f"its key {old!r} ({tp.__name__}, written by an earlier version) is {moved[old]} now")
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: from_dict(hints[f.name], data[f.name]) for f in dataclasses.fields(tp) if f.init and f.name in data})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if tp is Path:
        return Path(data)
    if tp is float:
        return float("nan") if data is None else float(data)
    if tp in (int, str, bool):
        if data is None:
            raise TypeError(f"expected {tp.__name__}, got null")
        return tp(data)
    return data
