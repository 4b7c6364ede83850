"""Slice definitions on hand-written sentences whose membership is obvious."""

from __future__ import annotations

import pytest

from workbench.data.slices import (
    builtin_slices,
    column_slices,
    golden_examples,
    predicate_slice,
    slice_collection,
)

CLASSES = ["rotten", "fresh"]
REFERENCE = ["a good film", "a bad film", "the plot is good", "the acting is bad"] * 3

SENTENCES = [
    ("a good film", 1),
    ("this is not a good film", 0),
    ("i didn't like it", 0),
    ("good acting , but a bad plot", 0),
    ("although long , it is good", 1),
    ("wow !", 1),
    ("is this a film ?", 0),
    ("an incandescent , mesmerizing film", 1),
    (" ".join(["good"] * 30), 1),
]


@pytest.fixture(scope="module")
def membership():
    ss = builtin_slices(CLASSES, REFERENCE)
    examples = [{"text": t, "label": y} for t, y in SENTENCES]
    return {name: [SENTENCES[i][0] for i, m in enumerate(mask) if m] for name, mask in ss.membership(examples).items()}


def test_negation(membership):
    assert membership["negation"] == ["this is not a good film", "i didn't like it"]


def test_contrast(membership):
    assert membership["contrast"] == ["good acting , but a bad plot", "although long , it is good"]


def test_length_buckets_partition_the_examples(membership):
    buckets = [membership[f"length:{b}"] for b in ("short", "medium", "long")]
    assert sum(len(b) for b in buckets) == len(SENTENCES)
    assert membership["length:long"] == [" ".join(["good"] * 30)]
    assert "a good film" in membership["length:short"]


def test_punctuation(membership):
    assert membership["exclamation"] == ["wow !"]
    assert membership["question"] == ["is this a film ?"]


def test_rare_words_are_relative_to_the_reference_texts(membership):
    # "incandescent" and "mesmerizing" never occur in REFERENCE; "wow" is one unseen word only
    assert "an incandescent , mesmerizing film" in membership["rare_words"]
    assert "wow !" not in membership["rare_words"]
    assert "a good film" not in membership["rare_words"]


def test_class_slices(membership):
    assert len(membership["class:fresh"]) == sum(y for _, y in SENTENCES)
    assert "this is not a good film" in membership["class:rotten"]


def test_user_columns_and_predicates():
    rows = [
        {"text": "a", "label": 0, "genre": "drama", "is_sequel": True},
        {"text": "b", "label": 1, "genre": "comedy", "is_sequel": False},
        {"text": "c", "label": 1, "genre": "drama", "is_sequel": False},
    ]
    ss = slice_collection(
        "default", CLASSES, REFERENCE, user_columns=["genre", "is_sequel"], examples=rows,
        predicates={"starts_with_b": lambda e: e["text"].startswith("b")},
    )
    masks = ss.membership(rows)
    assert masks["genre=drama"].tolist() == [True, False, True]
    assert masks["genre=comedy"].tolist() == [False, True, False]
    assert masks["is_sequel"].tolist() == [True, False, False]
    assert masks["starts_with_b"].tolist() == [False, True, False]
    with pytest.raises(KeyError, match="not in the data"):
        column_slices(rows, ["year"])
    with pytest.raises(TypeError, match="callable"):
        predicate_slice("x", "not a function")
    with pytest.raises(ValueError, match="must be one of"):
        slice_collection("everything", CLASSES)


def test_golden_collection_and_examples():
    golden = golden_examples()
    assert len(golden) >= 20 and {e["label"] for e in golden} == {0, 1}
    ss = slice_collection("golden", CLASSES, REFERENCE)
    masks = ss.membership(golden)
    # "not bad at all, actually quite charming" is a negated positive
    first = golden[0]
    assert [s.name for s in ss if s.contains(first)].count("negation&class:fresh") == 1
    assert masks["negation"].sum() >= 8 and masks["contrast"].sum() >= 5
    assert masks["length:long"].sum() == 2
