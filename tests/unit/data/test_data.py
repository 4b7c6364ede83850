"""Data loading and splitting: deterministic, stratified, deduplicated; user files with clear errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from workbench.data.load import DataConfig, DataError, load_data, read_reviews_frame, summarize_data


@pytest.fixture(scope="module")
def reviews():
    return read_reviews_frame()


def test_reviews_are_deduplicated_and_exclude_plots(reviews):
    assert not reviews["text"].duplicated().any()
    assert set(reviews["label"]) == {0, 1}
    # 7,403 fresh + 5,405 rotten sentences before deduplication; dedup removes a few
    assert 12_500 < len(reviews) <= 12_808
    # plot descriptions are long paragraphs; review sentences are single sentences
    assert reviews["text"].str.len().max() < 400


def test_split_is_deterministic_and_stratified():
    a = load_data(DataConfig())
    b = load_data(DataConfig())
    for split in ("train", "validation", "test"):
        assert a[split]["text"] == b[split]["text"]
    total = sum(len(a[s]) for s in a)
    assert abs(len(a["test"]) / total - 0.1) < 0.01
    ratios = [sum(a[s]["label"]) / len(a[s]) for s in ("train", "validation", "test")]
    assert max(ratios) - min(ratios) < 0.01  # stratified: same share of 'fresh' in every split
    # no example leaks between splits
    assert not set(a["train"]["text"]) & set(a["test"]["text"])
    assert not set(a["validation"]["text"]) & set(a["test"]["text"])


def test_seed_changes_the_split_and_limits_cut_it():
    a = load_data(DataConfig.quick(seed=0))
    b = load_data(DataConfig.quick(seed=1))
    assert len(a["train"]) == 256 and len(a["validation"]) == 128 and len(a["test"]) == 128
    assert a["train"]["text"] != b["train"]["text"]
    assert a["train"].features["label"].names == ["rotten", "fresh"]


def _user_frame(n=30):
    return pd.DataFrame(
        {
            "review": [f"sentence number {i} is {'great' if i % 2 else 'awful'}" for i in range(n)],
            "sentiment": ["pos" if i % 2 else "neg" for i in range(n)],
            "genre": ["drama" if i % 3 else "comedy" for i in range(n)],
        }
    )


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet", ".tsv"])
def test_user_file_loads_into_the_same_structure(tmp_path, suffix):
    df = _user_frame()
    path = tmp_path / f"mine{suffix}"
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".tsv":
        df.to_csv(path, index=False, sep="\t")
    elif suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path)
    dd = load_data(DataConfig(source=str(path), text_column="review", label_column="sentiment", slice_columns=("genre",)))
    assert set(dd) == {"train", "validation", "test"}
    assert sum(len(dd[s]) for s in dd) == 30
    assert dd["train"].features["label"].names == ["neg", "pos"]
    assert set(dd["train"].column_names) == {"text", "label", "genre"}
    row = dd["train"][0]
    assert row["label"] == (1 if "great" in row["text"] else 0)
    assert summarize_data(dd, str(path)).extra_columns == ["genre"]


def test_wrong_column_names_list_what_was_found(tmp_path):
    path = tmp_path / "mine.csv"
    _user_frame().to_csv(path, index=False)
    with pytest.raises(DataError) as err:
        load_data(DataConfig(source=str(path), text_column="text", label_column="label"))
    msg = str(err.value)
    assert "['text', 'label']" in msg and "'review', 'sentiment', 'genre'" in msg


def test_missing_empty_single_class_and_unreadable_text(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_data(DataConfig(source=str(tmp_path / "nope.csv")))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        load_data(DataConfig(source=str(empty)))
    header_only = tmp_path / "header.csv"
    header_only.write_text("text,label\n")
    with pytest.raises(DataError, match="no rows"):
        load_data(DataConfig(source=str(header_only)))
    one = tmp_path / "one.jsonl"
    one.write_text("\n".join(json.dumps({"text": f"t {i}", "label": "pos"}) for i in range(10)))
    with pytest.raises(DataError, match="single class"):
        load_data(DataConfig(source=str(one)))
    numbers = tmp_path / "numbers.csv"
    pd.DataFrame({"text": range(10), "label": [0, 1] * 5}).to_csv(numbers, index=False)
    with pytest.raises(DataError, match="holds no text"):
        load_data(DataConfig(source=str(numbers)))
    weird = tmp_path / "data.xlsx"
    weird.write_bytes(b"PK\x03\x04")
    with pytest.raises(DataError, match="unsupported data file type"):
        load_data(DataConfig(source=str(weird)))
    garbled = tmp_path / "bad.parquet"
    garbled.write_bytes(b"this is not parquet")
    with pytest.raises(DataError, match="could not read"):
        load_data(DataConfig(source=str(garbled)))


def test_bad_config_values_are_rejected():
    with pytest.raises(DataError, match="test_fraction"):
        DataConfig(test_fraction=0.7)
    with pytest.raises(DataError, match="max_train"):
        DataConfig(max_train=0)


# ---- bad data -------------------------------------------------------------------------------------
def test_a_folder_given_as_the_data_file(tmp_path):
    folder = tmp_path / "reviews.csv"  # a folder, even with a file's suffix
    folder.mkdir()
    with pytest.raises(DataError, match=r"reviews\.csv is a folder; give a CSV, TSV, JSONL or Parquet file"):
        load_data(DataConfig(source=str(folder)))


@pytest.mark.parametrize("reserved", ["text", "label"])
def test_a_slice_column_with_a_reserved_name(tmp_path, reserved):
    path = tmp_path / "mine.csv"
    _user_frame().assign(**{reserved: "x"}).to_csv(path, index=False)
    with pytest.raises(DataError) as err:
        load_data(DataConfig(source=str(path), text_column="review", label_column="sentiment", slice_columns=(reserved,)))
    msg = str(err.value)
    assert f"slice column {reserved!r} clashes with a reserved column name" in msg and "rename that column" in msg


def test_a_class_with_fewer_than_three_examples(tmp_path):
    path = tmp_path / "mine.csv"
    df = _user_frame()
    df.loc[[0, 2], "sentiment"] = "meh"  # two rows of a third class
    df.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"class\(es\) \{'meh': 2\} have fewer than 3 examples.*add examples of it"):
        load_data(DataConfig(source=str(path), text_column="review", label_column="sentiment"))


def _with_holes(path):
    """30 good rows plus 2 without text, 3 with blank text and 4 without a label (one of them also
    without text, counted once)."""
    df = _user_frame()
    holes = pd.DataFrame({
        "review": [None, None, "", "   ", "\t", "no label here", "nor here", "nor this", None],
        "sentiment": ["pos", "neg", "pos", "neg", "pos", None, None, None, None],
        "genre": ["drama"] * 9,
    })
    pd.concat([df, holes]).to_json(path, orient="records", lines=True)


def test_rows_without_text_or_label_are_counted_and_reported(tmp_path):
    from workbench.data.load import DataWarning

    path = tmp_path / "holes.jsonl"
    _with_holes(path)
    with pytest.warns(DataWarning, match=r"left out 9 row\(s\)") as caught:
        dd = load_data(DataConfig(source=str(path), text_column="review", label_column="sentiment"))
    message = str(caught[0].message)
    assert "3 row(s) with no text in column 'review'" in message
    assert "3 row(s) with empty text in column 'review'" in message
    assert "3 row(s) with no label in column 'sentiment'" in message and "30 row(s) kept" in message
    assert sum(len(dd[s]) for s in dd) == 30
    assert summarize_data(dd, str(path)).dropped_rows == {
        "no text in column 'review'": 3, "empty text in column 'review'": 3, "no label in column 'sentiment'": 3,
    }


def test_clean_files_report_no_dropped_rows(tmp_path, recwarn):
    from workbench.data.load import DataWarning

    path = tmp_path / "mine.csv"
    _user_frame().to_csv(path, index=False)
    dd = load_data(DataConfig(source=str(path), text_column="review", label_column="sentiment"))
    assert summarize_data(dd, str(path)).dropped_rows == {}
    assert not [w for w in recwarn if issubclass(w.category, DataWarning)]


def test_the_cli_prints_the_dropped_rows(tmp_path, capsys):
    from workbench.cli import main

    path = tmp_path / "holes.jsonl"
    _with_holes(path)
    with pytest.warns(UserWarning):
        assert main(["data", "--source", str(path), "--text-column", "review", "--label-column", "sentiment"]) == 0
    out = capsys.readouterr().out
    assert "left out 9 row(s): 3 with no text in column 'review'; 3 with empty text in column 'review'; " \
           "3 with no label in column 'sentiment'" in out
    with pytest.warns(UserWarning):
        assert main(["data", "--source", str(path), "--text-column", "review", "--label-column", "sentiment", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["dropped_rows"]["empty text in column 'review'"] == 3
