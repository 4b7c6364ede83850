"""Parsing the values a user types, once: enum choices and ``BATCHxSEQ`` shapes.

Every config's ``__post_init__`` and every command's flag goes through these, so a wrong value
gets the same kind of message everywhere: the name, the value given and what is allowed.
"""

from __future__ import annotations

import enum
from typing import Any, Sequence, TypeVar, Union

E = TypeVar("E", bound=enum.Enum)


def parse_choice(cls: type[E], value: Any, name: str, error: type[Exception] = ValueError, hint: str = "") -> E:
    """``value`` as a member of the enum ``cls`` (members pass through; strings match the
    values case-insensitively); otherwise ``error`` naming ``name``, the value and the choices."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        pass
    try:
        return cls(str(value).lower())
    except ValueError:
        allowed = [m.value for m in cls]
        raise error(f"{name} must be one of {allowed}, got {value!r}" + (f"; {hint}" if hint else "")) from None


Shape = tuple[int, int]


def parse_shapes(shapes: Union[str, Sequence[Sequence[int]]], error: type[Exception] = ValueError) -> tuple[Shape, ...]:
    """``"1x128,32x128"`` or ``[(1, 128), (32, 128)]`` as validated ``((batch, sequence), ...)``:
    batch >= 1, sequence >= 2, at least one shape."""
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
    """``argparse`` type: a whole number of at least ``low`` (the flag's name comes from argparse)."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number of at least {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be a whole number of at least {low}, got {text!r}")
        return value

    parse.__name__ = f"int>={low}"
    return parse
