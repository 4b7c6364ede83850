"""The audit at the data's own lengths: the data's token lengths, every variant timed at
batch 1 x the median and 95th percentile beside the fixed shapes, scoring sorted by length with rows
per second against the floor, and a weight-only variant measured like the INT8 ones."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers.audit_fixtures import make_rows, train_tiny_classifier, write_csv

N_ROWS = 160


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    from workbench.cli import main

    root = tmp_path_factory.mktemp("audit-lengths")
    model = train_tiny_classifier(root / "classifier")
    # uneven lengths: short rows and a few long ones (so sorting saves padding and median != p95)
    rows = make_rows(N_ROWS, seed=3)
    for i, r in enumerate(rows):
        if i % 9 == 0:
            r["review"] = " ".join([r["review"]] * 4)
    data = write_csv(root / "reviews.csv", rows)
    out = root / "out"
    code = main(["audit", "--model", str(model), "--data", str(data), "--text-column", "review", "--label-column", "sentiment",
                 "--out", str(out), "--quick", "--presets", "dynamic", "weight-only-int4", "--budget-overall", "0.99",
                 "--budget-slice", "0.99", "--min-speedup", "0"])
    return code, model, out, json.loads((out / "summary.json").read_text())


def test_lengths_shapes_scoring_and_weight_only_in_the_summary_and_page(audited):
    from transformers import AutoTokenizer

    from workbench.quant import load_baseline

    code, model, out, s = audited
    assert code == 0, s["verdict"]
    d = s["data"]
    base = load_baseline(out / "quantize" / "baseline")
    texts = [e["text"] for e in base.eval_set("test").load_examples()]
    tok = AutoTokenizer.from_pretrained(str(model))
    lens = [len(x) for x in tok(texts, truncation=True, max_length=128)["input_ids"]]
    assert d["lengths"]["n"] == len(texts) == d["rows_scored"]
    assert d["lengths"]["median"] == float(np.median(lens)) and d["lengths"]["p95"] == pytest.approx(np.percentile(lens, 95))
    med, p95 = int(np.ceil(np.median(lens))), int(np.ceil(np.percentile(lens, 95)))
    assert med != p95 and d["length_shapes"] == [f"1x{med}", f"1x{p95}"]
    assert d["scoring_order"] == "length" and "batch-mates" in d["scoring_note"]
    w = d["scoring_work"]
    assert w["padded_sorted"] < w["padded_file_order"] and w["tokens"] == sum(lens)
    assert d["fp32_scoring"]["rows"] == len(texts) and d["fp32_scoring"]["of_floor"] > 0
    # every variant timed at the fixed shape first, then at the data's lengths
    assert s["method"]["timing"]["shapes"][1:] == d["length_shapes"]
    for q in s["quantization"]:
        shapes = [r["shape"] for r in q["latency_by_shape"]]
        assert shapes[1:] == d["length_shapes"]
        assert all(r["int8_ms"] > 0 and r["fp32_ms"] > 0 and r["floor_ms"] for r in q["latency_by_shape"])
        assert q["scoring"]["order"] == "length" and q["scoring"]["rows"] == len(texts)
        assert q["scoring"]["floor_rows_per_s"] > 0 and q["scoring"]["of_floor"] > 0
    wo = next(q for q in s["quantization"] if q["name"] == "weight-only-int4")
    assert wo["mode"] == "weight-only" and wo["weight_bits"] == 4 and wo["accuracy_level"] == 0
    assert "MatMulNBits" in wo["description"] and wo["validation_passed"]
    assert any("sorted by token length" in n for n in s["method"]["notes"])
    # dynamic INT8's batch effect of the new order, measured and stated
    moved = [b for b in s["method"]["batch_dependence"] if b["batch_b"] == "32 in file order"]
    assert len(moved) == 1 and moved[0]["variant"] == "dynamic" and moved[0]["differ"] >= 0
    assert any("32 sorted by length and batch 32 in file order" in n for n in s["method"]["notes"])
    page = (out / "report.html").read_text()
    assert "Speed at the data&#x27;s own lengths" in page or "Speed at the data's own lengths" in page
    assert f"batch 1 x {med} tokens (the median)" in page and f"batch 1 x {p95} tokens (the 95th percentile)" in page
    assert "rows/s" in page and "then in brackets the FP32 graph" in page
    # the FP32 row states its own figures at each shape (timed beside the first variant), not a pointer to other cells
    first = s["quantization"][0]
    fp32_at_med = next(r for r in first["latency_by_shape"] if r["shape"] == f"1x{med}")
    assert f"{fp32_at_med['fp32_ms']:.2f} ms beside {first['name']}" in page and "in brackets in each row" not in page


def test_the_table_says_when_a_variant_is_slower():
    from workbench.report.lengths import slower_text

    assert slower_text(1.3, [1.1, 1.5]) == "" and slower_text(None, None) == ""
    assert "slower than FP32" in slower_text(0.45, [0.40, 0.50])
    assert "no faster than FP32" in slower_text(0.95, [0.80, 1.10])
    assert "slower than FP32" in slower_text(0.9, None)
