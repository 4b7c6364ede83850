"""The report's "speed at the data's lengths" part: the data's token lengths, each variant's latency
at batch 1 x the median and 95th-percentile length (beside the fixed shapes), and rows per second of
scoring against the floor of the same batches (:mod:`workbench.data.token_lengths`, :mod:`workbench.perf.scoring`)."""

from __future__ import annotations

from typing import Any, Callable, Optional


def scoring_dict(sp) -> Optional[dict]:
    """A :class:`workbench.perf.scoring.ScoringSpeed` as summary.json writes it."""
    if sp is None:
        return None
    return {"rows": sp.rows, "seconds": sp.seconds, "order": sp.order, "batch_size": sp.batch_size,
            "padded_tokens": sp.padded_tokens, "tokens": sp.tokens, "rows_per_s": sp.rows_per_second,
            "floor_seconds": sp.floor_seconds, "floor_rows_per_s": sp.floor_rows_per_second, "of_floor": sp.of_floor,
            "note": sp.note}


def data_lengths(base) -> dict:
    """What summary.json's ``data`` gains from the baseline: the lengths, the shapes timed at them, the
    scoring order with its note, the work of both orders and the FP32 scoring speed."""
    from ..core import serial

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
    """' slower than FP32' (HTML) when the variant lost: the whole interval below 1, or, without an
    interval, the ratio; ' no faster than FP32' when the ratio is below 1 but the interval reaches 1."""
    if speedup is None or speedup >= 1.0:
        return ""
    if ci and ci[1] is not None and ci[1] >= 1.0:
        return " <span class='bad'>no faster than FP32</span>"
    return " <span class='bad'>slower than FP32</span>"


def _fp32_cell(quantization: list[dict], shape: str, e: Callable[[Any], str], f: Callable[..., str]) -> str:
    """The FP32 graph at ``shape``: as timed beside the first variant timed there (each variant's row has its own
    FP32 figure in brackets, from its own rounds)."""
    for x in quantization:
        r = next((r for r in x.get("latency_by_shape", []) if r["shape"] == shape), None)
        if r is not None:
            return f"{f(r['fp32_ms'])} ms beside {e(x['name'])}; {f(r.get('fp32_of_floor'), '.0f', 100, '%')} of floor"
    return "not timed at this shape"


def section(s: dict, e: Callable[[Any], str], f: Callable[..., str], table: Callable[..., str]) -> str:
    """HTML of the part (empty when the baseline recorded no lengths: a run from before they were kept)."""
    d = s.get("data") or {}
    lengths = d.get("lengths")
    if not lengths:
        return ""
    parts = ["<h2 id='lengths'>Speed at the data's own lengths</h2>"]
    parts.append(f"<p>{lengths['n']} rows: median {f(lengths['median'], 'g')} tokens, 95th percentile "
                 f"{f(lengths['p95'], 'g')}, longest {lengths['max']} (truncated at {lengths['max_length']}). Each variant "
                 f"is timed at batch 1 x the median and the 95th percentile ({e(', '.join(d.get('length_shapes', [])))}) beside "
                 "the fixed shapes.</p>")
    shapes = d.get("length_shapes", [])
    rows = []
    for x in s.get("quantization", []):
        by = {r["shape"]: r for r in x.get("latency_by_shape", [])}
        cells = []
        for sh in shapes:
            r = by.get(sh)
            if r is None:
                cells.append("not timed at this shape")
                continue
            cells.append(f"{f(r['int8_ms'])} ms ({f(r['fp32_ms'])}); {f(r.get('speedup'), '.2f', suffix='x')}"
                         + slower_text(r.get("speedup"), r.get("speedup_ci"))
                         + f"; {f(r.get('of_floor'), '.0f', 100, '%')} of floor")
        sc = x.get("scoring") or {}
        cells.append(f"{f(sc.get('rows_per_s'), '.0f')} rows/s; floor {f(sc.get('floor_rows_per_s'), '.0f')}; "
                     f"{f(sc.get('of_floor'), '.2g', 100, '%')} of it" if sc else "–")
        rows.append([f"<b>{e(x['name'])}</b>", *cells])
    fp = d.get("fp32_scoring") or {}
    if fp:
        rows.insert(0, ["FP32", *[_fp32_cell(s.get("quantization", []), sh, e, f) for sh in shapes],
                        f"{f(fp.get('rows_per_s'), '.0f')} rows/s; floor {f(fp.get('floor_rows_per_s'), '.0f')}; "
                        f"{f(fp.get('of_floor'), '.2g', 100, '%')} of it"])
    parts.append(table(["variant", *[f"{sh}: ms (FP32); speed-up; of floor" for sh in shapes], "scoring the data: rows/s vs floor"],
                       rows))
    w = d.get("scoring_work")
    if w:
        parts.append(f"<p class='muted'>Scoring {w['n']} rows in batches of {w['batch_size']}: file order would pad to "
                     f"{f(w['file_order_overhead'], '.2f')}x the tokens of the texts, batches sorted by length "
                     f"{f(w['sorted_overhead'], '.3f')}x. {e(d.get('scoring_note'))}.</p>")
    return "".join(parts)
