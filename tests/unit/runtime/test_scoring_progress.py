"""Progress while a graph is scored (rows, rows per second, actors) and the batches a Ray worker pads
from texts alone: the same arrays the local path pads from rows tokenized together."""

from __future__ import annotations

import io

import numpy as np


def _texts_and_batches(exported_tiny, quick_data):
    from workbench.runtime.ortinfer import scoring_batches

    tok, ds = exported_tiny.load_tokenizer(), quick_data["test"]
    return tok, ds, list(ds["text"]), scoring_batches(tok, ds, 128, 16)


def test_a_batch_padded_from_its_texts_alone_is_the_batch_padded_here(exported_tiny, quick_data):
    from workbench.data.batches import EncodedRows, padded_batch

    tok, _, texts, batches = _texts_and_batches(exported_tiny, quick_data)
    rows = EncodedRows(tok, texts, 128)
    padded = 0
    for idx in batches:
        got, want = padded_batch(tok, [texts[i] for i in idx], 128), rows.batch(idx)
        assert set(got) == set(want)
        for name in want:
            assert got[name].dtype == want[name].dtype == np.int64
            np.testing.assert_array_equal(got[name], want[name])
        padded += int((want["attention_mask"] == 0).sum())
    assert padded > 0  # some batch held rows of different lengths: the padding itself was compared


def test_local_scoring_reports_each_batch_as_it_comes_back(exported_tiny, quick_data):
    from workbench.runtime.ortinfer import predict_dataset
    from workbench.runtime.progress import scoring_progress

    tok, ds, _, batches = _texts_and_batches(exported_tiny, quick_data)
    seen: list = []
    with scoring_progress(seen.append, every_s=0):
        logits = predict_dataset(exported_tiny.onnx_path, tok, ds, 128, 16, label="FP32")
    rows = [p.rows for p in seen]
    assert rows[0] == 0 and rows[-1] == len(ds) == logits.shape[0]
    assert np.diff(rows).tolist() == [len(b) for b in batches]  # one report per batch, in the order they ran
    assert all(p.graph == "FP32" and p.total == len(ds) and p.actors is None for p in seen)
    assert seen[-1].done and seen[-1].rows_per_second > 0
    assert seen[-1].text().startswith(f"scoring FP32: {len(ds)}/{len(ds)} rows, ") and seen[-1].text().endswith("this process")
    predict_dataset(exported_tiny.onnx_path, tok, ds, 128, 16)
    assert len(seen) == len(rows)  # outside the block: nobody hears


def test_reports_are_spaced_but_the_first_and_last_always_come(exported_tiny, quick_data):
    from workbench.embed.encode import OnnxEncoder
    from workbench.runtime.progress import scoring_progress

    tok, _, texts, _ = _texts_and_batches(exported_tiny, quick_data)
    seen: list = []
    with scoring_progress(seen.append, every_s=3600):
        OnnxEncoder(exported_tiny.onnx_path, tok, 128, label="enc").encode(texts, 8)
    assert [(p.graph, p.rows) for p in seen] == [("enc", 0), ("enc", len(texts))]


def test_the_command_line_bar_draws_rows_rate_and_actors_in_a_log():
    from workbench.cli.progress import ScoringBar
    from workbench.runtime.progress import ScoringProgress

    out = io.StringIO()
    bar = ScoringBar(stream=out)
    for rows in range(0, 1201, 100):
        bar(ScoringProgress("dynamic", rows, 1200, 1.0 + rows / 1000, actors=2))
    lines = out.getvalue().splitlines()
    assert [ln.split("] ")[1].split(" rows")[0] for ln in lines] == ["0/1200", "300/1200", "600/1200", "900/1200", "1200/1200"]
    assert lines[-1] == "      scoring dynamic [" + "#" * 30 + "] 1200/1200 rows, 545 rows/s, 2 Ray actor(s)"
