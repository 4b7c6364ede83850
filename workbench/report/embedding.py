"""The embedding model's sections of ``report.html`` (``task`` ``embedding``), in the page's order."""

from __future__ import annotations

from ..quant.choice import left_all_in_fp32
from .cells import escape as _e
from .cells import format_value as _f
from .cells import report_table as _table


def embedding_sections(s: dict, figs: dict) -> list[str]:
    parts = _head_html(s)
    ev = s.get("evaluation")
    if ev and ev.get("task"):
        parts += _retrieval_html(ev, figs)
    if ev:
        parts += _agreement_html(ev, figs)
    if s.get("search"):
        parts += _search_html(s["search"])
    if s.get("speed"):
        parts += _speed_html(s["speed"], figs)
    return parts


def _head_html(s: dict) -> list[str]:
    v, m = s["verdict"], s["model"]
    val, b = s["export"]["validation"], s["budget"]
    return [f"<h1>{_e(s['title'])}</h1>",
            f"<p class='muted'>{_e(s['task'])} {_e(s['kind'])} · written {_e(s['created_utc'])} · {_e(s['data']['source'])}</p>",
            f"<div class='verdict {_e(v['status'])}' id='verdict'><b>Verdict.</b> {_e(v['text'])} Exit code {v['exit_code']}.</div>",
            "<h2 id='model'>Model</h2>",
            f"<p>{_e(' -> '.join(m['modules']))}: {_e(m['pooling'])} pooling, {m['dimension']} dimensions"
            f"{', normalized' if m['normalize'] else ''}, up to {_e(m['max_seq_length'])} tokens. The exported graph computes "
            "the pooling and normalization itself (output <code>sentence_embedding</code>).</p>",
            f"<p id='validation'>Validation against SentenceTransformer.encode on {val['texts']} texts: lowest cosine "
            f"{_f(val['min_cosine'], '.6f')} (threshold {val['threshold']}), mean {_f(val['mean_cosine'], '.6f')}, largest "
            f"difference {_f(val['max_abs_diff'], '.2e')}.</p>",
            f"<p class='muted'>Budget: NDCG@10 at least {_f(b['min_ndcg_ratio'], '.1%', 1)} of FP32's over all queries, "
            f"and at most {b['max_slice_drop']:g} NDCG@10 lost on any query slice of {b['min_slice_size']} queries or more.</p>",
            *(f"<p class='muted' id='variant-notes'>{_e(n)}</p>" for n in ((s.get("variants") or {}).get("notes") or []))]


def _retrieval_row(q: dict) -> list:
    all_ = next(x for x in q["retrieval"]["slices"] if x["name"] == "all")
    d = all_["delta"]["ndcg@10"]
    ratio = all_["variant"]["ndcg@10"] / all_["fp32"]["ndcg@10"] if all_["fp32"]["ndcg@10"] else 1.0
    return [_e(q["name"]), _f(all_["variant"]["ndcg@10"], ".4f"), _f(ratio, ".2%", 1),
            f"{d['value']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]", _f(all_["variant"]["recall@10"], ".4f"),
            _f(all_["variant"]["mrr@10"], ".4f"), _f(all_["overlap_at_10"], ".3f"),
            "<span class='ok'>yes</span>" if q["meets_budget"] else f"<span class='bad'>no</span> {_e('; '.join(q['budget_reasons']))}"]


def _changed_html(q: dict) -> str:
    items = []
    for c in q["retrieval"]["changed"]:
        before = "".join(f"<li class='{'ok' if rel else ''}'>{_e(t[:140])}</li>" for t, rel in c["before"])
        after = "".join(f"<li class='{'ok' if rel else ''}'>{_e(t[:140])}</li>" for t, rel in c["after"])
        items.append(f"<details><summary>{_e(c['query'][:160])} — NDCG@10 {c['ndcg_fp32']:.3f} → {c['ndcg_variant']:.3f}, "
                     f"top 10 kept {c['overlap']:.0%}</summary><div class='cols'><div><b>FP32</b><ol>{before}</ol></div>"
                     f"<div><b>{_e(q['name'])}</b><ol>{after}</ol></div></div></details>")
    return f"<h3>Queries whose results changed most under {_e(q['name'])}</h3>" + "".join(items)


def _retrieval_html(ev: dict, figs: dict) -> list[str]:
    parts = ["<h2 id='retrieval'>Retrieval quality</h2>",
             f"<p>{_e(ev['task'])}: {_e(ev['task_description'])}. FP32 graph: "
             + ", ".join(f"{k} {_f(x, '.4f')}" for k, x in ev["fp32_metrics"].items())
             + ("; the same task with SentenceTransformer.encode: " + ", ".join(
                 f"{k} {_f(x, '.4f')}" for k, x in ev["reference_metrics"].items()) if ev.get("reference_metrics") else "")
             + ".</p>"]
    rows = [_retrieval_row(q) for q in ev["variants"] if q["retrieval"]]
    parts.append(_table(["variant", "NDCG@10", "of FP32", "NDCG@10 change [95%]", "recall@10", "MRR@10", "top-10 kept",
                         "meets budget"], rows, [1, 2, 4, 5, 6]))
    parts.append(figs.get("retrieval_drift", ""))
    parts += [_changed_html(q) for q in ev["variants"] if q["retrieval"] and q["retrieval"]["changed"]]
    return parts


def _agreement_html(ev: dict, figs: dict) -> list[str]:
    rows = [[_e(q["name"]), _e(sl["name"]), sl["n"], f"{sl['cosine']['value']:.5f}", _f(sl["cosine_quantiles"].get("p1"), ".5f"),
             _f(sl["cosine_min"], ".5f"),
             f"{sl['overlap_at_10']['value']:.3f} [{sl['overlap_at_10']['lo']:.3f}, {sl['overlap_at_10']['hi']:.3f}]"]
            for q in ev["variants"] for sl in q["agreement"]["slices"]]
    parts = ["<h2 id='agreement'>Agreement with FP32 (no labels needed)</h2>",
             _table(["variant", "slice", "texts", "mean cosine", "1st percentile", "lowest", "overlap@10 [95%]"], rows, [2, 3, 4, 5])]
    parts += [figs.get("cosine", ""), figs.get("overlap", "")]
    worst = ev["variants"][-1]["agreement"]["worst"] if ev["variants"] else []
    if worst:
        parts.append(f"<details><summary>Texts moved most by {_e(ev['variants'][-1]['name'])}</summary>" + _table(
            ["text", "cosine", "overlap@10"], [[_e(w["text"][:200]), f"{w['cosine']:.5f}", f"{w['overlap']:.2f}"] for w in worst],
            [1, 2]) + "</details>")
    return parts


def _search_html(se: dict) -> list[str]:

    def why_not(c: dict) -> str:
        return f"<span class='bad'>no</span> {_e('; '.join(c['check']['violations'][:2]) or c['too_slow'])}"

    def speed(c: dict) -> str:
        if left_all_in_fp32(c):  # every quantized node in FP32: the FP32 graph, no speed-up to state
            return "not timed: the FP32 graph"
        return f"{c['speedup']:.2f}x [{c['speedup_lo']:.2f}, {c['speedup_hi']:.2f}]" if c.get("speedup_lo") is not None else "-"

    rows = [[_e(c["name"]), _f(c["accuracy"], ".4f"), f"{c['accuracy_delta']:+.4f}",
             f"{_e(c['check']['worst_slice'] or '-')} -{c['check']['worst_slice_drop']:.4f}",
             len((c.get("config") or {}).get("nodes_to_exclude") or ()), speed(c),
             "<span class='ok'>yes</span>" if c["fast_enough"] and not c["check"]["violations"] else why_not(c)]
            for c in se["candidates"]]
    return ["<h2 id='search'>Search: which nodes to keep in FP32</h2>",
            f"<p>{_e(se['message'])}</p>",
            _table(["candidate", "NDCG@10", "change", "worst slice", "nodes in FP32", "speed-up vs FP32 graph [95%]",
                    "within budget and speed guard"], rows, [1, 2, 4])]


def _speed_html(sp: dict, figs: dict) -> list[str]:
    parts = ["<h2 id='speed'>Speed</h2>",
             f"<p class='bad'><b>Timed under load.</b> {_e(sp['load'])}</p>" if sp["contended"] else
             f"<p class='muted'>{_e(sp['load'])}; {_e(sp['cpu'])}; {sp['threads']} threads for PyTorch and ONNX Runtime.</p>",
             _table(["variant", "batch", "tokens", "ms per text", "speed-up [95%]", "of floor"],
                    [[_e(x["name"]), x["batch"], x["tokens"], f"{x['ms_per_text']:.3f}",
                      f"{x['speedup']:.2f}x [{x['lo']:.2f}, {x['hi']:.2f}]",
                      _f(x["floor_ms"] / x["ms_per_batch"] if x.get("floor_ms") else None, ".0%", 1)] for x in sp["speeds"]],
                    [1, 2, 3, 4, 5])]
    return parts + [figs.get("speed", "")]
