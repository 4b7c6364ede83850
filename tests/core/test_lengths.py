"""The data's own lengths (percentiles, histogram) and length-sorted scoring (issue 23)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.lengths import (LengthError, file_order_batches, length_sorted_batches, length_stats, padded_tokens,
                               scoring_work, stats_from_lengths)


class WordTokenizer:
    """One token per whitespace word plus [CLS] and [SEP], truncated like a HF tokenizer."""

    def __call__(self, texts, truncation=False, max_length=None, padding=False):
        ids = []
        for t in texts:
            x = [101] + [7] * len(t.split()) + [102]
            if truncation and max_length is not None and len(x) > max_length:
                x = x[: max_length - 1] + [102]
            ids.append(x)
        return {"input_ids": ids}


def test_percentiles_match_a_hand_computation():
    # lengths (words + 2): 3, 4, 5, 6, 12 -> sorted 3 4 5 6 12
    texts = ["a", "a b", "a b c", "a b c d", "a b c d e f g h i j"]
    st = length_stats(texts, WordTokenizer(), max_length=64)
    assert st.n == 5 and st.min == 3 and st.max == 12
    assert st.median == 5.0                      # the middle of five
    # numpy's linear rule by hand: rank 0.95 * (5 - 1) = 3.8 -> 6 + 0.8 * (12 - 6) = 10.8
    assert st.p95 == pytest.approx(10.8)
    assert st.mean == pytest.approx(30 / 5)
    assert st.median_tokens == 5 and st.p95_tokens == 11
    assert st.shapes() == ((1, 5), (1, 11))
    assert sum(st.hist_counts) == 5 and len(st.hist_edges) == len(st.hist_counts) + 1
    assert st.hist_edges[0] == 3 and st.hist_edges[-1] > 12
    assert st.truncated == 0


def test_even_count_median_and_truncation():
    texts = ["a"] * 2 + ["a b c"] * 2 + ["w " * 100]  # 3, 3, 5, 5, 102 -> truncated at 10
    st = length_stats(texts[:4], WordTokenizer(), max_length=10)
    assert st.median == 4.0 and st.median_tokens == 4  # (3 + 5) / 2
    st = length_stats(texts, WordTokenizer(), max_length=10)
    assert st.max == 10 and st.truncated == 1
    assert "1 truncated at 10" in st.text()


def test_dataset_split_and_errors(quick_data):
    from workbench.models import load_model

    tok = load_model("tiny", dropout=False).tokenizer
    st = length_stats(quick_data, tok, max_length=128, split="test")
    lens = [len(x) for x in tok(list(quick_data["test"]["text"]), truncation=True, max_length=128)["input_ids"]]
    assert st.n == len(quick_data["test"])
    assert st.median == float(np.median(lens)) and st.max == max(lens)
    with pytest.raises(LengthError, match="split 'nope'"):
        length_stats(quick_data, tok, 128, split="nope")
    with pytest.raises(LengthError, match="empty split"):
        stats_from_lengths([], 128)


def test_sorted_batches_and_padded_work():
    lengths = np.array([10, 3, 8, 3, 12, 4])
    b = length_sorted_batches(lengths, 2)
    assert [list(x) for x in b] == [[1, 3], [5, 2], [0, 4]]  # stable: the two 3s keep file order
    assert sorted(np.concatenate(b).tolist()) == list(range(6))
    # file order: max(10,3)*2 + max(8,3)*2 + max(12,4)*2 = 60; sorted: 3*2 + 8*2 + 12*2 = 46
    assert padded_tokens(lengths, file_order_batches(6, 2)) == 60
    assert padded_tokens(lengths, b) == 46
    w = scoring_work(lengths, 2)
    assert (w.tokens, w.padded_file_order, w.padded_sorted) == (40, 60, 46)
    assert w.file_order_overhead == pytest.approx(1.5) and w.sorted_overhead == pytest.approx(1.15)
    with pytest.raises(LengthError, match="batch_size"):
        length_sorted_batches(lengths, 0)


def test_sorted_scoring_returns_rows_in_order_equal_to_file_order(exported_tiny, quick_data):
    """FP32 logits from length-sorted batches equal file-order logits row by row: padding changes
    nothing for a masked model beyond float rounding (different GEMM shapes)."""
    from workbench.ortinfer import InferenceError, make_session, predict_dataset, scoring_batches

    tok = exported_tiny.load_tokenizer()
    ds = quick_data["test"]
    session = make_session(exported_tiny.onnx_path)
    by_file = predict_dataset(session, tok, ds, 128, 16, order="file")
    by_len = predict_dataset(session, tok, ds, 128, 16, order="length")
    one = predict_dataset(session, tok, ds.select(range(40)), 128, 1)  # no padding at all
    assert by_len.shape == by_file.shape == (len(ds), by_file.shape[1])
    # the batches really differ (else the test proves nothing)
    batches = scoring_batches(tok, ds, 128, 16, "length")
    assert any(list(b) != list(range(b[0], b[0] + len(b))) for b in batches)
    np.testing.assert_allclose(by_len, by_file, rtol=1e-5, atol=1e-6)  # measured: 0.0 on the tiny model
    np.testing.assert_allclose(by_len[:40], one, rtol=1e-5, atol=1e-6)
    assert (by_len.argmax(-1) == by_file.argmax(-1)).all()
    with pytest.raises(InferenceError, match="order must be one of"):
        predict_dataset(session, tok, ds, 128, 16, order="random")
