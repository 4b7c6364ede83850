"""Every field of the embedding audit's config: a value one of its stages would refuse is refused when the config
is made (or, for the data's files and columns, when they are read), in one line naming the field, before anything
is written; on the command line, exit 2. A field added to EmbedAuditConfig without a case here fails the first test."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.helpers.config_cases import assert_every_field_has_a_case, assert_refused
from tests.helpers.embed_fixtures import make_tiny_st_folder
from workbench.embed.audit import EmbedAuditConfig, check_embed_inputs
from workbench.embed.folder import EmbedError

# field: (a value the config refuses, words of the one-line reason)
CONFIG_REFUSES = {
    "builtin_queries": ("questions", "builtin_queries must be one of plots, reviews, got 'questions'"),
    "presets": (("int3",), "no quantization preset 'int3'"),
    "exclude_worst": (-1, "exclude_worst must be 0 or more, got -1"),
    "min_ndcg_ratio": (2.0, "min_ndcg_ratio must be in (0, 1.5], got 2.0"),
    "max_slice_drop": (-0.1, "max_slice_drop must be at least 0"),
    "min_slice_size": (0, "min_slice_size must be a whole number of queries of at least 1, got 0"),
    "max_queries": (0, "max_queries must be a whole number of at least 1 (or unset: every query), got 0"),
    "max_docs": (0, "max_docs must be a whole number of at least 1 (or unset: every document), got 0"),
    "max_texts": (0, "max_texts must be a whole number of at least 1, got 0"),
    "n_boot": (50, "n_boot must be at least 100 for a 95% interval to mean anything, got 50"),
    "seed": (1.5, "seed must be a whole number, got 1.5"),
    "batch_size": (0, "batch_size must be a whole number of at least 1, got 0"),
    "threads": (0, "threads must be a whole number of at least 1"),
    "timing_rounds": (2, "timing_rounds must be a whole number of at least 3, got 2"),
    "retimes": (-1, "retimes must be a whole number of at least 0, got -1"),
    "calibration_size": (0, "calibration_size must be a whole number of at least 1, got 0"),
    "max_excluded": (-1, "max_excluded must be 0 or more"),
    "min_speedup": (-1, "min_speedup is a speed-up over the FP32 graph"),
    "engine": ("spark", "engine must be one of local, ray, got 'spark'"),
    "ray_address": ("127.0.0.1:1", "ray_address '127.0.0.1:1' is for engine ray"),
    "ray_actors": (0, "ray_actors must be a whole number of at least 1, got 0"),
    "ray_threads": (0, "ray_threads must be a whole number of at least 1, got 0"),
    "queries": ("pairs.csv", "queries (a pairs file) needs the corpus it points into as data, got data='builtin'"),
}
# field: (config overrides on a corpus with pairs, words of the reason): refused when the data is read
DATA_REFUSES = {
    "data": ({"data": "missing.csv"}, "data file 'missing.csv' does not exist"),
    "text_column": ({"text_column": "body"}, "body"),
    "id_column": ({"id_column": "doc"}, "doc"),
    "query_column": ({"query_column": "question"}, "question"),
    "relevant_column": ({"relevant_column": "answer"}, "answer"),
    "slice_columns": ({"slice_columns": ("region",)}, "region"),
}
SWITCHES = {"time_speed", "reference_check", "search"}  # either value is a valid audit


def test_every_field_has_a_case():
    assert_every_field_has_a_case(EmbedAuditConfig, CONFIG_REFUSES, DATA_REFUSES, SWITCHES)


def test_the_speed_guard_is_the_classifier_audits_by_default():
    from workbench.quant.budget import DEFAULT_MIN_SPEEDUP

    assert EmbedAuditConfig().min_speedup == DEFAULT_MIN_SPEEDUP


@pytest.mark.parametrize("name", sorted(CONFIG_REFUSES))
def test_the_config_refuses_what_a_stage_would(name):
    value, words = CONFIG_REFUSES[name]
    assert_refused(lambda: EmbedAuditConfig(**{name: value}), EmbedError, words)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("embed-fields")
    texts = [f"review number {i} of a film about {w}" for i, w in enumerate(["ships", "cats", "war", "love", "rain", "space"])]
    pd.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts}).to_csv(tmp / "corpus.csv", index=False)
    pd.DataFrame({"query": ["a film about ships", "a film about cats"], "relevant": ["d0", "d1"]}).to_csv(tmp / "pairs.csv",
                                                                                                        index=False)
    return make_tiny_st_folder(tmp), tmp


@pytest.mark.parametrize("name", sorted(DATA_REFUSES))
def test_the_data_is_checked_before_anything_is_written(name, corpus, tmp_path, monkeypatch):
    folder, tmp = corpus
    monkeypatch.chdir(tmp)
    overrides, words = DATA_REFUSES[name]
    cfg = EmbedAuditConfig(**{"data": str(tmp / "corpus.csv"), "queries": str(tmp / "pairs.csv"), **overrides})
    assert_refused(lambda: check_embed_inputs(folder, cfg, tmp_path / "out"), EmbedError, words)
    assert not (tmp_path / "out").exists()


def test_the_command_line_refuses_n_boot_50_with_exit_2_before_the_export(corpus, tmp_path, capsys):
    from workbench.cli import main

    folder, tmp = corpus
    out = tmp_path / "audit"
    code = main(["audit", "--model", str(folder), "--data", str(tmp / "corpus.csv"), "--queries", str(tmp / "pairs.csv"),
                 "--search", "--n-boot", "50", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--n-boot must be at least 100" in err, err
    assert not out.exists()


@pytest.mark.parametrize("flags", [["--fusion", "full"], ["--budget-overall", "0.1", "--max-length", "64"]])
def test_a_classifier_audit_flag_given_for_an_embedding_model_is_refused_not_ignored(flags, corpus, tmp_path, capsys):
    from workbench.cli import main

    folder, tmp = corpus
    out = tmp_path / "audit"
    code = main(["audit", "--model", str(folder), "--data", str(tmp / "corpus.csv"), *flags, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    named = [f for f in flags if f.startswith("--")]
    assert code == 2 and len(err.splitlines()) == 1 and all(f in err for f in named) and "embedding model" in err, err
    assert not out.exists()
