"""Slices: named subsets (a predicate over one example dict) every later stage reports on; the ``"golden"``
collection's hand-written examples form an extra evaluation set.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
NEGATION_WORDS = frozenset(
    """not no never nothing nobody none nowhere neither nor cannot without
    isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't shouldn't
    hasn't haven't hadn't ain't n't""".split()
)
CONTRAST_WORDS = frozenset("but however although though yet nevertheless nonetheless despite whereas".split())
# Word-count buckets: (name, lowest, highest) inclusive.
LENGTH_BUCKETS = (("short", 0, 10), ("medium", 11, 25), ("long", 26, 10**9))
RARE_MAX_COUNT = 0  # a word seen at most this many times in the reference texts is rare
RARE_MIN_WORDS = 2  # ... and an example needs this many rare words to be in the slice

Example = dict


def words(text: str) -> list[str]:
    """Lower-cased word tokens; "don't" stays one token."""
    return WORD_RE.findall(text.lower().replace("\u2019", "'"))


def has_negation(text: str) -> bool:
    return any(t in NEGATION_WORDS or t.endswith("n't") for t in words(text))


def has_contrast(text: str) -> bool:
    return any(t in CONTRAST_WORDS for t in words(text))


def length_bucket(text: str) -> str:
    n = len(words(text))
    for name, lo, hi in LENGTH_BUCKETS:
        if lo <= n <= hi:
            return name
    raise AssertionError("length buckets cover every length")


@dataclass(frozen=True)
class Slice:
    name: str
    description: str
    predicate: Callable[[Example], bool] = field(compare=False, repr=False)
    group: str = "builtin"

    def contains(self, example: Example) -> bool:
        return bool(self.predicate(example))


@dataclass(frozen=True)
class SliceSet:
    name: str
    slices: tuple[Slice, ...]

    def __post_init__(self) -> None:
        names = [s.name for s in self.slices]
        dupes = [n for n, c in Counter(names).items() if c > 1]
        if dupes:
            raise ValueError(f"slice names must be unique in a SliceSet, repeated: {dupes}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.slices]

    def __getitem__(self, name: str) -> Slice:
        for s in self.slices:
            if s.name == name:
                return s
        raise KeyError(f"no slice {name!r}; slices here: {self.names}")

    def __iter__(self):
        return iter(self.slices)

    def __len__(self) -> int:
        return len(self.slices)

    def extend(self, extra: Iterable[Slice], name: Optional[str] = None) -> "SliceSet":
        return SliceSet(name or self.name, self.slices + tuple(extra))

    def membership(self, examples: Sequence[Example] | Any) -> dict[str, np.ndarray]:
        """For each slice, a boolean mask over ``examples`` (dicts or a datasets.Dataset)."""
        rows = _rows(examples)
        return {s.name: np.fromiter((s.contains(r) for r in rows), dtype=bool, count=len(rows)) for s in self.slices}


def _rows(examples) -> list[Example]:
    if hasattr(examples, "to_list"):  # datasets.Dataset
        return examples.to_list()
    return list(examples)


def negation_slice() -> Slice:
    return Slice("negation", "contains a negation word (not, no, never, n't, ...)", lambda e: has_negation(e["text"]))


def contrast_slice() -> Slice:
    return Slice("contrast", "contains a contrast word (but, however, although, ...)", lambda e: has_contrast(e["text"]))


def length_slices() -> list[Slice]:
    return [
        Slice(
            f"length:{name}",
            f"{lo}-{hi} words" if hi < 10**9 else f"more than {lo - 1} words",
            (lambda n: lambda e: length_bucket(e["text"]) == n)(name),
        )
        for name, lo, hi in LENGTH_BUCKETS
    ]


def punctuation_slices() -> list[Slice]:
    return [
        Slice("exclamation", "contains '!'", lambda e: "!" in e["text"]),
        Slice("question", "contains '?'", lambda e: "?" in e["text"]),
    ]


def rare_words_slice(reference_texts: Iterable[str], max_count: int = RARE_MAX_COUNT, min_words: int = RARE_MIN_WORDS) -> Slice:
    """Examples with at least ``min_words`` words seen at most ``max_count`` times in ``reference_texts``
    (the training split). One unseen word is common (names, titles); two mark unusual vocabulary."""
    counts = Counter(w for t in reference_texts for w in words(t))

    def pred(e: Example) -> bool:
        return sum(counts.get(w, 0) <= max_count for w in words(e["text"])) >= min_words

    seen = "never seen" if max_count == 0 else f"seen at most {max_count}x"
    return Slice("rare_words", f"{min_words}+ words {seen} in training", pred)


def class_slices(class_names: Sequence[str]) -> list[Slice]:
    return [
        Slice(f"class:{name}", f"true label is {name!r}", (lambda i: lambda e: e["label"] == i)(i), group="class")
        for i, name in enumerate(class_names)
    ]


def column_slices(examples, columns: Sequence[str], max_values: int = 20) -> list[Slice]:
    """One slice per value of each user column (``col=value``); a boolean column gives one slice. More
    than ``max_values`` distinct values are refused: a slice per value would be too small to say anything."""
    rows = _rows(examples)
    out: list[Slice] = []
    for col in columns:
        if rows and col not in rows[0]:
            raise KeyError(f"slice column {col!r} not in the data; columns: {sorted(rows[0])}")
        values = sorted({r[col] for r in rows if r[col] is not None}, key=str)
        if set(values) <= {True, False}:
            out.append(Slice(col, f"user column {col} is true", (lambda c: lambda e: bool(e.get(c)))(col), group="user"))
            continue
        if len(values) > max_values:
            raise ValueError(
                f"slice column {col!r} has {len(values)} distinct values (max {max_values}); "
                "bucket it first or pass a predicate slice instead"
            )
        for v in values:
            out.append(Slice(f"{col}={v}", f"user column {col} equals {v!r}", (lambda c, v: lambda e: e.get(c) == v)(col, v), group="user"))
    return out


def predicate_slice(name: str, predicate: Callable[[Example], bool], description: str = "") -> Slice:
    """A user-defined slice from any function of one example."""
    if not callable(predicate):
        raise TypeError(f"predicate for slice {name!r} must be callable, got {type(predicate).__name__}")
    return Slice(name, description or f"user predicate {name}", predicate, group="user")


def builtin_slices(class_names: Sequence[str], reference_texts: Iterable[str] = ()) -> SliceSet:
    """The default collection: negation, contrast, length buckets, punctuation, rare words, classes."""
    return SliceSet(
        "default",
        (
            negation_slice(),
            contrast_slice(),
            *length_slices(),
            *punctuation_slices(),
            rare_words_slice(reference_texts),
            *class_slices(class_names),
        ),
    )


def golden_slices(class_names: Sequence[str], reference_texts: Iterable[str] = ()) -> SliceSet:
    """The edge-case collection: where models (and quantized models) usually break first."""
    neg, con = negation_slice(), contrast_slice()
    positive = class_names[-1]
    return SliceSet(
        "golden",
        (
            neg,
            con,
            Slice(
                f"negation&class:{positive}",
                f"negated but {positive} (e.g. 'not bad')",
                lambda e: has_negation(e["text"]) and e["label"] == len(class_names) - 1,
            ),
            Slice("negation&contrast", "negation and a contrast word", lambda e: has_negation(e["text"]) and has_contrast(e["text"])),
            length_slices()[-1],
            rare_words_slice(reference_texts),
        ),
    )


COLLECTIONS = {"default": builtin_slices, "golden": golden_slices}


def slice_collection(
    name: str,
    class_names: Sequence[str],
    reference_texts: Iterable[str] = (),
    user_columns: Sequence[str] = (),
    examples=None,
    predicates: Optional[dict[str, Callable[[Example], bool]]] = None,
) -> SliceSet:
    """A named collection, plus slices for the user's columns and predicates."""
    if name not in COLLECTIONS:
        raise ValueError(f"slice collection must be one of {sorted(COLLECTIONS)}, got {name!r}")
    base = COLLECTIONS[name](class_names, list(reference_texts))
    extra: list[Slice] = []
    if user_columns:
        if examples is None:
            raise ValueError("user slice columns need the examples to read their values from")
        extra += column_slices(examples, user_columns)
    for pname, pred in (predicates or {}).items():
        extra.append(predicate_slice(pname, pred))
    return base.extend(extra)


def golden_examples() -> list[Example]:
    """Hand-written edge cases for the built-in reviews task (label 0 rotten, 1 fresh)."""
    text = resources.files("workbench.resources").joinpath("golden_reviews.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]
