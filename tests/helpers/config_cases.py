"""Going through every field of a config: each one has a case (a value refused, with the words of its one-line
reason, or a reason it has none), so a field added without one fails its test."""

from __future__ import annotations

import dataclasses

import pytest


def assert_every_field_has_a_case(config_class, *cases) -> None:
    fields = {f.name for f in dataclasses.fields(config_class)}
    covered = set().union(*(set(c) for c in cases))
    assert fields == covered, f"without a case: {sorted(fields - covered)}; no such field: {sorted(covered - fields)}"


def assert_refused(make, error, words: str) -> None:
    """``make()`` raises ``error`` in one line holding ``words``."""
    with pytest.raises(error) as exc:
        make()
    assert words in str(exc.value) and "\n" not in str(exc.value), str(exc.value)
