"""The data's own lengths (percentiles, histogram) and length-sorted scoring."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.benchmarks import load_benchmark

from workbench.data.token_lengths import (LengthError, file_order_batches, length_sorted_batches, length_stats, padded_tokens,
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
    from workbench.models.load import load_model

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
    from workbench.runtime.ortinfer import InferenceError, make_session, predict_dataset, scoring_batches

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


def test_baseline_in_both_orders_same_fp32_results_and_work_counted(exported_tiny, quick_data, tmp_path):
    """The quantization stage's FP32 side scored sorted and in file order: same logits row by row,
    same slices; the work of both orders counted; rows/s against the floor recorded."""
    from workbench.data.token_lengths import SORTED_NOTE
    from workbench.quant import BaselineConfig, TimingConfig, prepare_baseline
    from workbench.quant.baseline import QuantizeError

    t = TimingConfig.quick()
    by_len = prepare_baseline(exported_tiny, quick_data, tmp_path / "len", BaselineConfig(timing=t, calibration_samples=8, batch_size=16))
    by_file = prepare_baseline(exported_tiny, quick_data, tmp_path / "file",
                               BaselineConfig(timing=t, calibration_samples=8, batch_size=16, order="file"))
    assert (by_len.scoring_order, by_file.scoring_order) == ("length", "file")
    assert by_len.scoring_note == SORTED_NOTE and "batch-mates" in by_len.fp32_scoring.note
    for a, b in zip(by_len.eval_sets, by_file.eval_sets):
        np.testing.assert_allclose(a.fp32_logits(), b.fp32_logits(), rtol=1e-5, atol=1e-6)
        assert [s.indices for s in a.slices] == [s.indices for s in b.slices]
    w = by_len.scoring_work
    assert w == by_file.scoring_work and w.n == len(quick_data["test"])
    assert by_len.fp32_scoring.padded_tokens == w.padded_sorted
    assert by_file.fp32_scoring.padded_tokens == w.padded_file_order
    assert w.tokens <= w.padded_sorted <= w.padded_file_order
    assert w.padded_sorted < w.padded_file_order  # uneven reviews: sorting saves padding
    assert by_len.lengths.n == w.n and by_len.lengths.median > 0
    sp = by_len.fp32_scoring
    assert sp.rows == w.n and sp.seconds > 0 and sp.floor_seconds and 0 < sp.of_floor
    with pytest.raises(QuantizeError, match="order must be one of"):
        BaselineConfig(timing=t, order="shuffled")


def test_floor_curve_is_the_graphs_floor_at_any_length(exported_tiny):
    """work(1, s) is quadratic in s: the curve fitted at three lengths gives the counted floor at
    other lengths and batch sizes, each at the throughput of its own row count."""
    from workbench.perf.machine_profile import MachineProfile
    from workbench.perf.scoring import batches_floor_seconds, floor_curve
    from workbench.perf.speed import graph_floor

    # the kernels measured slower on few rows: 16 rows at half the best figure
    prof = MachineProfile(cpu_model="test", flags={}, cores=2, threads=2, ort_version="x", fp32_gops=100.0, int8_gops=200.0,
                          qdq_int8_gops=None, measured_at="", shapes=[],
                          by_tokens={"fp32": {"16": 50.0, "128": 90.0, "1024": 100.0}, "int8": {"16": 100.0, "1024": 200.0}})
    curve = floor_curve(exported_tiny.onnx_path, prof)
    for s in (5, 27, 100):
        assert curve(s) == pytest.approx(graph_floor(exported_tiny.onnx_path, 1, s, prof), rel=1e-6)
    assert curve(27, 4) == pytest.approx(graph_floor(exported_tiny.onnx_path, 4, 27, prof), rel=1e-6)
    # 4 rows of 27 tokens run at the throughput of 108 rows: less than 4 times one row's floor
    assert curve(27, 4) < 4 * curve(27)
    lengths = [5, 27, 100, 6]
    got = batches_floor_seconds(curve, lengths, [np.array([0, 3]), np.array([1, 2])])
    assert got == pytest.approx((curve(6, 2) + curve(100, 2)) / 1e3)


def test_bench_adds_the_datas_lengths_after_the_fixed_shapes(quick_data):
    bench = load_benchmark("bench")
    from workbench.models.load import load_model

    shapes, st = bench.data_length_shapes(((1, 128), (8, 128)), "tiny", quick_data)
    tok = load_model("tiny", dropout=False).tokenizer
    lens = [len(x) for x in tok(list(quick_data["test"]["text"]), truncation=True, max_length=128)["input_ids"]]
    med, p95 = int(np.ceil(np.median(lens))), int(np.ceil(np.percentile(lens, 95)))
    assert shapes == ((1, 128), (8, 128), (1, med), (1, p95)) and st.n == len(lens)


@pytest.mark.parametrize("side", ["right", "left"])
def test_encoded_rows_pad_any_batch_as_the_tokenizer_does(tiny, quick_data, side):
    """Scoring tokenises once and pads each batch from that: every batch equals the tokenizer's own
    padded encoding of the same texts (values, pad side, keys), and the lengths are token_lengths'."""
    import copy

    from workbench.data.batches import EncodedRows, encode
    from workbench.data.token_lengths import token_lengths

    tok = copy.deepcopy(tiny.tokenizer)
    tok.padding_side = side
    texts = list(quick_data["test"]["text"])[:40] + ["", "word " * 300]  # an empty text and one cut at max_length
    rows = EncodedRows(tok, texts, max_length=48, chunk=16)  # several chunks
    assert len(rows) == len(texts)
    assert rows.lengths.tolist() == token_lengths(tok, texts, 48).tolist()
    rng = np.random.default_rng(0)
    for idx in (np.arange(5), rng.permutation(len(texts))[:9], np.array([len(texts) - 1, 0]), np.array([3])):
        want = encode(tok, [texts[i] for i in idx], 48)
        got = rows.batch(idx)
        assert set(got) == set(want)
        for k in want:
            assert np.array_equal(got[k], want[k].numpy()), (side, k, idx)


def test_encoded_rows_are_shared_between_graphs_scored_on_the_same_texts(tiny, quick_data):
    from workbench.data.batches import encoded_rows

    texts = list(quick_data["test"]["text"])[:20]
    first = encoded_rows(tiny.tokenizer, texts, 32)
    assert encoded_rows(tiny.tokenizer, list(texts), 32) is first  # equal texts, another list: reused
    assert encoded_rows(tiny.tokenizer, texts, 64) is not first  # another length: encoded again
    assert encoded_rows(tiny.tokenizer, texts[:-1] + ["changed"], 32) is not first
