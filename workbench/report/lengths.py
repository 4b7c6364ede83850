"""The report's "speed at the data's own lengths": latency at batch 1 x the median and 95th-percentile length,
and rows per second of scoring against the floor of the same batches."""

from __future__ import annotations

from typing import Optional

from ..core import serial
from .cells import escape as e
from .cells import format_value as f
from .cells import report_table


def scoring_dict(sp) -> Optional[dict]:
    if sp is None:
        return None
    return {"rows": sp.rows, "seconds": sp.seconds, "order": sp.order, "batch_size": sp.batch_size,
            "padded_tokens": sp.padded_tokens, "tokens": sp.tokens, "rows_per_s": sp.rows_per_second,
            "floor_seconds": sp.floor_seconds, "floor_rows_per_s": sp.floor_rows_per_second, "of_floor": sp.of_floor,
            "note": sp.note}


def data_lengths(base) -> dict:
    """What summary.json's ``data`` gains from the baseline."""
    out: dict = {"scoring_order": base.scoring_order, "scoring_note": base.scoring_note}
    if base.lengths is not None:
        out["lengths"] = serial.to_dict(base.lengths)
        out["length_shapes"] = [f"{b}x{s}" for b, s in base.lengths.shapes()]
    if base.scoring_work is not None:
        w = base.scoring_work
        out["scoring_work"] = {**serial.to_dict(w), "file_order_overhead": w.file_order_overhead, "sorted_overhead": w.sorted_overhead}
    out["fp32_scoring"] = scoring_dict(base.fp32_scoring)
    return out


def slower_text(speedup, ci) -> str:
    """'no faster than FP32' when the ratio is below 1 but its interval reaches 1."""
    if speedup is None or speedup >= 1.0:
        return ""
    if ci and ci[1] is not None and ci[1] >= 1.0:
        return " <span class='bad'>no faster than FP32</span>"
    return " <span class='bad'>slower than FP32</span>"


def _shape_header(shape: str, shapes: list[str]) -> str:
    batch, _, seq = shape.partition("x")
    which = ("the median and 95th percentile" if len(shapes) == 1 else
             {0: "the median", 1: "the 95th percentile"}.get(shapes.index(shape), "")) if shape in shapes else ""
    return f"batch {batch} x {seq} tokens ({which})" if which else f"batch {batch} x {seq} tokens"


def _variant_cell(x: dict, shape: str) -> str:
    """Never a bare placeholder: a missing figure says why."""
    timed = [r["shape"] for r in x.get("latency_by_shape", [])]
    r = next((r for r in x.get("latency_by_shape", []) if r["shape"] == shape), None)
    if r is None:
        return (f"not timed at {e(shape)}: this run timed {e(x['name'])} at {e(', '.join(timed))} only" if timed
                else f"not timed: this run recorded no latency for {e(x['name'])}")
    sp, ci = r.get("speedup"), r.get("speedup_ci")
    if x.get("contended"):
        return (f"{f(r['int8_ms'])} ms ({f(r['fp32_ms'])} ms); <span class='bad'>timed under load: no speed-up stated</span> "
                "(other work used the CPU while it was timed, even after timing again)")
    if sp is None:
        speed = "no speed-up: the two graphs were not timed in paired rounds at this shape"
    else:
        interval = f" [{f(ci[0], '.2f')}-{f(ci[1], '.2f')}]" if ci and None not in ci else " (no interval recorded)"
        speed = f"{f(sp, '.2f', suffix='x')}{interval}{slower_text(sp, ci)}"
    floor = (f"{f(r['of_floor'], '.0f', 100, '%')} of floor" if r.get("of_floor") is not None
             else "no floor (no machine profile for this timing)")
    return f"{f(r['int8_ms'])} ms ({f(r['fp32_ms'])} ms); {speed}; {floor}"


def _fp32_cell(quantization: list[dict], shape: str) -> str:
    """As timed beside the first variant timed there (each variant's row has its own FP32 figure in brackets)."""
    for x in quantization:
        r = next((r for r in x.get("latency_by_shape", []) if r["shape"] == shape), None)
        if r is not None:
            floor = (f"{f(r['fp32_of_floor'], '.0f', 100, '%')} of floor" if r.get("fp32_of_floor") is not None
                     else "no floor (no machine profile for this timing)")
            return f"{f(r['fp32_ms'])} ms beside {e(x['name'])}; {floor}"
    return f"not timed at {e(shape)}: no variant was timed there"


def _scoring_cell(sc: Optional[dict], why_not: str) -> str:
    if not sc or sc.get("rows_per_s") is None:
        return why_not
    floor = (f"floor {f(sc['floor_rows_per_s'], '.0f')}; {f(sc.get('of_floor'), '.2g', 100, '%')} of it"
             if sc.get("floor_rows_per_s") is not None else "no floor (no machine profile)")
    return f"{f(sc['rows_per_s'], '.0f')} rows/s; {floor}"


def section(s: dict) -> str:
    """Empty for a run from before lengths were kept; a shape no variant was timed at gets no column, only a sentence."""
    d = s.get("data") or {}
    lengths = d.get("lengths")
    if not lengths:
        return ""
    q = s.get("quantization", [])
    shapes = d.get("length_shapes", [])
    timed = [sh for sh in shapes if any(r["shape"] == sh for x in q for r in x.get("latency_by_shape", []))]
    parts = ["<h2 id='lengths'>Speed at the data's own lengths</h2>"]
    said = (f"{lengths['n']} rows: median {f(lengths['median'], 'g')} tokens, 95th percentile {f(lengths['p95'], 'g')}, "
            f"longest {lengths['max']} (truncated at {lengths['max_length']}). ")
    if timed:
        said += (f"Each variant is timed at batch 1 x the median and the 95th percentile ({e(', '.join(timed))}) beside the "
                 "fixed shapes. In each cell at a shape: the variant's median latency, then in brackets the FP32 graph's, "
                 "taken in the same interleaved rounds; the speed-up over FP32 with its 95% interval in square brackets; "
                 "the share of its floor (the matrix-multiply work at this machine's measured throughput) it reached.")
    fixed = sorted({r["shape"] for x in q for r in x.get("latency_by_shape", [])} - set(shapes))
    if [sh for sh in shapes if sh not in timed]:
        said += (f" This run did not time the variants at {e(', '.join(sh for sh in shapes if sh not in timed))}"
                 + (f" (it timed them at {e(', '.join(fixed))}: the quantization table above shows the first)" if fixed else "")
                 + "; <code>workbench audit</code> times every variant at the data's lengths too.")
    parts.append(f"<p>{said}</p>")
    no_scoring = "not timed: this run scored the data without timing it"
    rows = [["FP32", *[_fp32_cell(q, sh) for sh in timed], _scoring_cell(d.get("fp32_scoring"), no_scoring)]]
    for x in q:
        rows.append([f"<b>{e(x['name'])}</b>", *[_variant_cell(x, sh) for sh in timed],
                     _scoring_cell(x.get("scoring"), no_scoring)])
    parts.append(report_table(["variant", *[_shape_header(sh, shapes) for sh in timed], "scoring the data: rows/s vs floor"], rows))
    w = d.get("scoring_work")
    if w:
        parts.append(f"<p class='muted'>Scoring {w['n']} rows in batches of {w['batch_size']}: file order would pad to "
                     f"{f(w['file_order_overhead'], '.2f')}x the tokens of the texts, batches sorted by length "
                     f"{f(w['sorted_overhead'], '.3f')}x. {e(d.get('scoring_note'))}.</p>")
    return "".join(parts)
