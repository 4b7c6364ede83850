"""The report's "Speed at the data's own lengths" table, rendered from a summary that holds every case a run
can leave: a variant timed at the data's lengths, one timed at the fixed shape only, one timed under load, one
without a paired ratio or a floor; and a run (the demo's) that timed no variant at the data's lengths. Every
cell holds a figure or says why there is none; the brackets are explained once, above the table."""

from __future__ import annotations

import copy
import html
import re

from workbench.report.lengths import section


def _shape(shape, int8, fp32, speedup=None, ci=None, of_floor=None, fp32_of_floor=None):
    return {"shape": shape, "int8_ms": int8, "fp32_ms": fp32, "floor_ms": 0.1, "of_floor": of_floor, "fp32_floor_ms": 0.1,
            "fp32_of_floor": fp32_of_floor, "speedup": speedup, "speedup_ci": ci}


SCORING = {"rows_per_s": 2400.0, "floor_rows_per_s": 12000.0, "of_floor": 0.2}
SUMMARY = {
    "data": {
        "lengths": {"n": 500, "median": 27.0, "p95": 46.3, "max": 54, "max_length": 128},
        "length_shapes": ["1x27", "1x47"],
        "fp32_scoring": {"rows_per_s": 1500.0, "floor_rows_per_s": 9000.0, "of_floor": 0.1667},
        "scoring_work": {"n": 500, "batch_size": 32, "file_order_overhead": 1.92, "sorted_overhead": 1.234},
        "scoring_note": "scored in batches sorted by token length",
    },
    "quantization": [
        {"name": "timed", "contended": False, "scoring": SCORING, "latency_by_shape": [
            _shape("1x64", 1.0, 2.0, 2.0, [1.9, 2.1], 0.5, 0.4),
            _shape("1x27", 0.5, 1.2, 2.4, [2.2, 2.6], 0.31, 0.25),
            _shape("1x47", 0.9, 0.8, 0.89, [0.85, 0.93], 0.42, 0.33)]},
        {"name": "fixed-only", "contended": False, "scoring": None,
         "latency_by_shape": [_shape("1x64", 1.1, 2.0, 1.8, [1.7, 1.9], 0.5, 0.4)]},
        {"name": "busy", "contended": True, "scoring": SCORING, "latency_by_shape": [
            _shape("1x64", 1.0, 2.0, 2.0, [1.9, 2.1], 0.5, 0.4),
            _shape("1x27", 0.6, 1.3, 2.17, [2.0, 2.3], 0.3, 0.25),
            _shape("1x47", 0.7, 1.4, 2.0, [1.8, 2.2], 0.4, 0.33)]},
        {"name": "no-ratio", "contended": False, "scoring": {"rows_per_s": 1800.0, "floor_rows_per_s": None},
         "latency_by_shape": [
            _shape("1x64", 1.0, 2.0, 2.0, [1.9, 2.1], 0.5, 0.4),
            _shape("1x27", 0.7, 1.2, None, None, 0.3, 0.25),
            _shape("1x47", 0.8, 1.5, 1.9, [1.7, 2.1], None, None)]},
    ],
}


def _render(summary: dict) -> str:
    return section(summary)


def _table(page: str) -> tuple[list[str], list[list[str]]]:
    """(the header cells, the body rows' cells) as text, tags stripped."""
    def text(cell: str) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()

    head = [text(c) for c in re.findall(r"<th>(.*?)</th>", page)]
    body = re.search(r"<tbody>(.*)</tbody>", page).group(1)
    return head, [[text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in re.findall(r"<tr>(.*?)</tr>", body)]


def test_every_cell_holds_a_figure_or_a_reason():
    page = _render(copy.deepcopy(SUMMARY))
    head, rows = _table(page)
    assert head == ["variant", "batch 1 x 27 tokens (the median)", "batch 1 x 47 tokens (the 95th percentile)",
                    "scoring the data: rows/s vs floor"]
    by = {r[0]: r[1:] for r in rows}
    assert list(by) == ["FP32", "timed", "fixed-only", "busy", "no-ratio"]
    # the FP32 graph states its own milliseconds at each shape: as timed beside the first variant timed there
    assert by["FP32"] == ["1.20 ms beside timed; 25% of floor", "0.80 ms beside timed; 33% of floor",
                          "1500 rows/s; floor 9000; 17% of it"]
    assert by["timed"] == ["0.50 ms (1.20 ms); 2.40x [2.20-2.60]; 31% of floor",
                           "0.90 ms (0.80 ms); 0.89x [0.85-0.93] slower than FP32; 42% of floor",
                           "2400 rows/s; floor 12000; 20% of it"]
    assert by["fixed-only"] == ["not timed at 1x27: this run timed fixed-only at 1x64 only",
                                "not timed at 1x47: this run timed fixed-only at 1x64 only",
                                "not timed: this run scored the data without timing it"]
    under_load = "timed under load: no speed-up stated (other work used the CPU while it was timed, even after timing again)"
    assert by["busy"] == [f"0.60 ms (1.30 ms); {under_load}", f"0.70 ms (1.40 ms); {under_load}",
                          "2400 rows/s; floor 12000; 20% of it"]
    assert by["no-ratio"] == ["0.70 ms (1.20 ms); no speed-up: the two graphs were not timed in paired rounds at this shape; "
                              "30% of floor",
                              "0.80 ms (1.50 ms); 1.90x [1.70-2.10]; no floor (no machine profile for this timing)",
                              "1800 rows/s; no floor (no machine profile)"]
    cells = [c for r in rows for c in r[1:]]
    assert all(c and c not in ("–", "-") and "–;" not in c and not c.startswith("–") for c in cells), cells
    # the brackets are explained once, above the table, not in the cells
    assert page.count("then in brackets the FP32 graph") == 1 and "in brackets in each row" not in page
    assert page.index("then in brackets the FP32 graph") < page.index("<table>")
    assert "Each variant is timed at batch 1 x the median and the 95th percentile (1x27, 1x47)" in page


def test_a_run_that_timed_no_variant_at_the_data_lengths_says_so_instead_of_empty_columns():
    """The demo times its variants at its fixed shape only: no column of "not timed" cells, the paragraph says which
    shapes were timed instead, and the scoring column still holds figures."""
    s = copy.deepcopy(SUMMARY)
    s["quantization"] = [s["quantization"][1]]
    page = _render(s)
    head, rows = _table(page)
    assert head == ["variant", "scoring the data: rows/s vs floor"]
    assert rows == [["FP32", "1500 rows/s; floor 9000; 17% of it"],
                    ["fixed-only", "not timed: this run scored the data without timing it"]]
    assert ("This run did not time the variants at 1x27, 1x47 (it timed them at 1x64: the quantization table above shows "
            "the first)") in page
    assert "Each variant is timed at batch 1 x the median" not in page and "in brackets" not in page


def test_no_lengths_no_section():
    assert _render({"data": {}, "quantization": SUMMARY["quantization"]}) == ""
