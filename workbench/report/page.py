"""``report.html``: the page, from ``summary.json``'s dict and the figures drawn from the results."""

from __future__ import annotations

from typing import Optional

from .cells import CSS, escape, figure_html, format_value, report_table
from .environment import CPU_FLAGS_OF_INTEREST
from .inputs import ReportInputs
from .lengths import section as lengths_section
from .lengths import slower_text
from .schema import MAX_FLIPS_SHOWN

# short local names for the page's many cells
_e, _f, _table, _fig = escape, format_value, report_table, figure_html


def draw_figures(inp: ReportInputs, summary: dict) -> dict[str, str]:
    """Figures by section; a figure that cannot be drawn is replaced by a line saying why."""
    from ..plots import graph as graph_plots
    from ..plots import quant as quant_plots
    from ..plots import report as report_plots
    from ..plots import train as train_plots

    figs: dict[str, str] = {}

    def add(key: str, make) -> None:
        try:
            figs[key] = _fig(make(), f"fig-{key}")
        except (ValueError, KeyError, TypeError) as exc:
            figs[key] = f"<p class='muted'>figure not drawn: {_e(exc)}</p>"

    if inp.comparison is not None:
        add("training", lambda: train_plots.throughput_memory_bars(inp.comparison))
    if inp.fusion is not None and any(v.latency for v in inp.fusion.variants):
        add("latency", lambda: graph_plots.latency(inp.fusion))
    if inp.quant:
        add("drift", lambda: report_plots.slice_drift_overview(inp.quant, inp.budget_per_slice))
        chosen = summary["verdict"].get("chosen") or summary["verdict"].get("closest")
        focus = next((r for r in inp.quant if r.name == chosen), None)
        if focus is not None:
            add("drift_focus", lambda: quant_plots.drift_bars(focus))
    search = inp.searched()
    if search is not None:
        add("search", lambda: quant_plots.tradeoff(search))
    return figs


def render_html(summary: dict, figures: Optional[dict] = None) -> str:
    """Every text from the user's data or model is HTML-escaped; plotly.js is inlined once (the file opens offline)."""
    from plotly.offline import get_plotlyjs

    figs = figures or {}
    s = summary
    if s.get("task") == "embedding":  # the embedding model's sections (:mod:`.embedding`)
        from .embedding import embedding_sections

        parts = embedding_sections(s, figs)
    else:
        parts = _heading(s) + _environment_section(s["environment"])
        if s.get("training"):
            parts += _training_section(s["training"], figs)
        parts += _data_section(s) + _export_section(s["export"]) + _fusion_section(s["fusion"], figs)
        parts += _quantization_section(s, figs) + _search_section(s["search"], figs) + _method_section(s)
    parts.append(f"<p class='muted'>Every number on this page is in summary.json beside it (schema version {s['schema_version']}).</p>")
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_e(s.get('title'))}</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head>\n<body>\n{body}\n</body></html>\n")


def _heading(s: dict) -> list[str]:
    """Title, verdict, load warning, machine, budget and the steps run."""
    v = s["verdict"]
    parts = [f"<h1>{_e(s.get('title'))}</h1>",
             f"<p class='muted'>{_e(s['kind'])} · written {_e(s['created_utc'])} · {_e(s.get('run_dir'))}</p>",
             f"<div class='verdict {_e(v['status'])}' id='verdict'><b>Verdict.</b> {_e(v['text'])}</div>"]
    if any(x["name"] == "ship" and x["status"] == "ok" for x in s["stages"]):
        parts.append("<p id='chosen'>The graph the verdict keeps is in <code>chosen/</code> beside this page, with its tokenizer, labels, "
                     "settings.json and a predict.py that needs only onnxruntime, tokenizers and numpy (docs: Ship it).</p>")
    if s.get("contended"):
        parts.append("<p class='bad' id='contended'><b>Timed under load.</b> Other work used the CPU while these speed figures "
                     "were taken: they are written down, not stated as measured. " + _e("; ".join(s.get("contended_because") or []))
                     + " Time again on a quiet machine.</p>")
    mach = s.get("machine")
    if mach:
        parts.append(f"<p class='muted' id='machine'>Machine: {_e(mach.get('cpu_model'))} ({_e(mach.get('isa'))}), "
                     f"{_e(mach.get('threads'))} threads; ONNX Runtime's FP32 matrix multiply {_f(mach.get('fp32_gops'), '.0f')} "
                     f"GOP/s, INT8 {_f(mach.get('int8_gops'), '.0f')} GOP/s ({_f(mach.get('int8_over_fp32'), '.2f', suffix='x')}): "
                     "the floor each latency is compared with.</p>")
    b = s["budget"]
    parts.append(f"<p class='muted'>Budget: at most {_f(b['overall'], 'g', 100)} accuracy points lost overall and "
                 f"{_f(b['per_slice'], 'g', 100)} on every slice with at least {b['min_slice_size']} examples"
                 f"{' (smaller slices too)' if b['include_small_slices'] else ''}. Exit code {v['exit_code']}.</p>")
    if s["stages"]:
        parts.append("<details><summary>Steps and timings</summary>" + _table(
            ["step", "status", "seconds", "message"],
            [[_e(x["name"]), f"<span class='{'ok' if x['status'] == 'ok' else 'bad'}'>{_e(x['status'])}</span>",
              _f(x["seconds"], ".1f"), _e(x.get("message"))] for x in s["stages"]], [2]) + "</details>")
    return parts


def _environment_section(env: dict) -> list[str]:
    cpu = env["cpu"]
    parts = ["<h2 id='environment'>Environment</h2>",
             f"<p>Python {_e(env['python'])} on {_e(env['platform'])}. CPU: {_e(cpu.get('model'))}; "
             f"{cpu.get('usable_cores')} usable of {cpu.get('logical_cores')} logical cores; instruction sets: "
             f"{_e(', '.join(cpu.get('flags', [])) or 'none of ' + ', '.join(CPU_FLAGS_OF_INTEREST))}; "
             f"load average {_e(cpu.get('load_average'))}.</p>",
             _table(["package", "version"], [[_e(k), _e(val or "not installed")] for k, val in env["packages"].items()])]
    if env.get("doctor"):
        parts.append("<details><summary>Environment check (doctor)</summary>" + _table(
            ["check", "status", "value", "fix"],
            [[_e(c["name"]), _e(c["status"]), _e(c["value"]), _e(c.get("fix"))] for c in env["doctor"]]) + "</details>")
    return parts


def _training_section(t: dict, figs: dict) -> list[str]:
    parts = ["<h2 id='training'>Fine-tuning</h2>",
             _table(["backend", "status", "steps", "median step (ms)", "samples/s", "start-up (s)", "peak memory (MiB)",
                     "val accuracy", "ran in ONNX Runtime"],
                    [[_e(r["backend"]), _e(r["status"]), r["steps"], _f(r["median_step_ms"], ".0f"), _f(r["samples_per_s"], ".1f"),
                      _f(r["startup_s"], ".1f"), _f(r["peak_memory_mib"], ".0f"), _f(r["final_accuracy"], ".3f"),
                      _e(r["executed_in_onnxruntime"])] for r in t["runs"]], [2, 3, 4, 5, 6, 7])]
    look = {"gain": "meets_budget", "loss": "no_candidate_meets_budget", "no gain": "no_candidate_meets_budget",
            "one after the other": "no_candidate_meets_budget"}
    for v in t.get("verdicts") or []:
        parts.append(f"<div class='verdict {look.get(v['outcome'], 'incomplete')}' id='training-verdict-{_e(v['backend'])}'>"
                     f"<b>Training verdict.</b> {_e(v['text'])}</div>")
        if v.get("load"):
            parts.append(f"<p>Machine load while it trained: {_e(v['load'])}.</p>")
        if v.get("where_it_pays"):
            parts.append(f"<p>Where it is reported to pay (their figures, not measured here): {_e(v['where_it_pays'])}.</p>")
        if v.get("next_steps"):
            parts.append("<p>To try next:</p><ul>" + "".join(f"<li>{_e(x)}</li>" for x in v["next_steps"]) + "</ul>")
    parts.append(f"<p>Loss parity with {_e(t['baseline'])}: {_e(t['loss_parity'])}.</p>" + figs.get("training", ""))
    return parts


def _data_section(s: dict) -> list[str]:
    d = s["data"]
    facts = [("source", d.get("source")), ("text column", d.get("text_column")), ("label column", d.get("label_column")),
             ("labels given as", d.get("label_format")), ("rows in the file", d.get("rows_in_file")),
             ("rows scored", d.get("rows_scored")), ("calibration rows (held out, not scored)", d.get("calibration_count")),
             ("rows skipped (empty text or no label)", d.get("rows_skipped")), ("classes", ", ".join(map(str, d.get("class_names", [])))),
             ("scored per class", d.get("class_counts")), ("splits", d.get("split_sizes"))]
    parts = ["<h2 id='data'>Data and slices</h2>",
             _table(["", ""], [[_e(k), _e(val)] for k, val in facts if val not in (None, "", {}, [])])]
    if d.get("calibration_rows"):
        parts.append(f"<details><summary>The {len(d['calibration_rows'])} calibration rows (0-based row numbers of the file, "
                     f"drawn with seed {_e(d.get('calibration_seed'))})</summary>"
                     f"<p><code>{_e(', '.join(map(str, d['calibration_rows'])))}</code></p></details>")
    if d.get("skipped_rows"):
        parts.append(f"<details><summary>Skipped rows</summary><p><code>{_e(', '.join(map(str, d['skipped_rows'])))}</code></p></details>")
    if s["slices"]:
        parts.append(_table(["slice", "group", "examples", "description"],
                            [[_e(x["name"]), _e(x["group"]), f"{x['n']}{' (too small to judge)' if x['too_small'] else ''}",
                              _e(x.get("description"))] for x in s["slices"]], [2]))
    return parts


def _export_section(e: Optional[dict]) -> list[str]:
    parts = ["<h2 id='export'>Export validation</h2>"]
    if e is None:
        return parts + ["<p class='bad'>No export.</p>"]
    val = e["validation"]
    parts.append(f"<p>{_e(e['model_type'])} model, {_e(e['num_parameters'])} parameters, exported with "
                 f"{_e(e['attn_implementation'])} attention at opset {e['opset']}: {e['node_count']} nodes, "
                 f"{_f(e['size_mib'], '.1f')} MiB, in {_f(e['export_seconds'], '.1f')} s."
                 f"{(' Trained in: ' + _e(e['trained_in']) + '.') if e.get('trained_in') else ''}</p>"
                 f"<p class='{'ok' if val['passed'] else 'bad'}'>Against PyTorch on {val['n_examples']} of the rows: "
                 f"{_e(val['message'])}</p>")
    return parts


def _fusion_section(fu: Optional[dict], figs: dict) -> list[str]:
    parts = ["<h2 id='fusion'>Fusions and latency</h2>"]
    if fu is None:
        return parts + ["<p class='muted'>No fusion result: the quantized variants start from the exported graph.</p>"]
    fused = ", ".join(f"{k} {n}" for k, n in fu["fused_ops"].items()) or "nothing fused"
    parts.append(f"<p>ONNX Runtime's transformer optimizer fused: {_e(fused)}.</p>")
    for dg in fu["diagnoses"]:
        parts.append(f"<p class='bad'>{_e(dg)}</p>")
    shapes = sorted({k for var in fu["variants"] for k in var["latency_ms"]} | set(fu["pytorch_latency_ms"]))
    rows = []
    if fu["pytorch_latency_ms"]:
        rows.append(["PyTorch eager", "", "", "", *[_f(fu["pytorch_latency_ms"].get(k)) for k in shapes]])
    for var in fu["variants"]:
        rows.append([_e(var["name"]), var["node_count"], _f(var["size_mib"], ".1f"),
                     f"<span class='{'ok' if var['validation_passed'] else 'bad'}'>{'passed' if var['validation_passed'] else 'FAILED'}"
                     f" (max |Δ| {_f(var['max_abs_diff'], '.1e')})</span>", *[_f(var["latency_ms"].get(k)) for k in shapes]])
    parts.append(_table(["graph", "nodes", "MiB", "validation", *[f"{k} (ms)" for k in shapes]], rows,
                        [1, 2, *range(4, 4 + len(shapes))]))
    parts.append(figs.get("latency", ""))
    return parts + _choice_part(fu.get("choice"))


def _choice_part(ch: Optional[dict]) -> list[str]:
    """The fusion choice: why, and each candidate's fused operators and node count beside the full fusion's."""
    if not ch:
        return []
    shapes = sorted({k for c in ch["candidates"] for k in c["speedup_vs_full"]})
    rows = [[_e(c["name"]) + (" <b>(taken)</b>" if c["name"] == ch["chosen"] else ""),
             _e(", ".join(f"{k} {n}" for k, n in c["fused_ops"].items()) or "nothing fused"), c["node_count"],
             *[(f"{_f(r['value'], '.2f')}x [{_f(r['lo'], '.2f')}, {_f(r['hi'], '.2f')}]" if (r := c["speedup_vs_full"].get(k))
                else "") for k in shapes]] for c in ch["candidates"]]
    return [f"<p>Graph the later stages take ({_e(ch['mode'])}): {_e(ch['reason'])}.</p>",
            _table(["candidate", "fused operators", "nodes", *[f"{k} vs full [95% CI]" for k in shapes]], rows, [2])]


def _quantization_section(s: dict, figs: dict) -> list[str]:
    parts = ["<h2 id='quantization'>Quantization</h2>"]
    q = s["quantization"]
    if not q:
        return parts + ["<p class='bad'>No quantized variant.</p>"]
    parts += [_variants_table(q), lengths_section(s),
              "<h2 id='drift'>Accuracy change by slice</h2>", figs.get("drift", ""), figs.get("drift_focus", ""),
              _every_slice_details(q)]
    return parts + _flips_section(q, s["verdict"])


def _variants_table(q: list[dict]) -> str:
    """One row per quantized variant: size, latency, speed-up, floor, accuracy, change, worst slice, budget."""
    return _table(
        ["variant", "graph", "MiB (FP32)", "latency ms (FP32)", "speed-up [95% CI]", "of floor (FP32)", "accuracy (FP32)",
         "change, points [95% CI]",
         "worst judged slice", "flips", "within budget"],
        [[f"<b>{_e(x['name'])}</b><br><span class='muted'>{_e(x['description'])}</span>", _e(x["graph"]),
          f"{_f(x['size_mib'], '.1f')} ({_f(x['fp32_size_mib'], '.1f')})", f"{_f(x['latency_ms'])} ({_f(x['fp32_latency_ms'])})",
          _f(x["speedup"], ".2f", suffix="x") + (f" [{_f(x['speedup_ci'][0], '.2f')}-{_f(x['speedup_ci'][1], '.2f')}]"
                                                  if x.get("speedup_ci") else "")
          + (" <span class='bad'>(under load)</span>" if x.get("contended") else "")
          + slower_text(x.get("speedup"), x.get("speedup_ci")),
          f"{_f(x.get('of_floor'), '.0f', 100, '%')} ({_f(x.get('fp32_of_floor'), '.0f', 100, '%')})",
          f"{_f(x['accuracy'], '.1f', 100)}% ({_f(x['fp32_accuracy'], '.1f', 100)}%)",
          f"{_f(x['overall']['delta'], '+.1f', 100)} [{_f(x['overall']['ci95'][0], '+.1f', 100)}, "
          f"{_f(x['overall']['ci95'][1], '+.1f', 100)}]",
          f"{_e(x['worst_slice'] or '–')} {_f(-x['worst_slice_drop'] if x['worst_slice_drop'] is not None else None, '+.1f', 100)}",
          x["n_flips"], f"<span class='{'ok' if x['within_budget'] else 'bad'}'>{'yes' if x['within_budget'] else 'no'}</span>"
          + "".join(f"<br><span class='muted'>{_e(viol)}</span>" for viol in x["violations"][:3])]
         for x in q], [2, 3, 4, 5, 6, 8])


def _every_slice_details(q: list[dict]) -> str:
    return "<details><summary>Every slice, every variant (points, 95% CI)</summary>" + _table(
        ["variant", "slice", "n", "FP32 acc", "INT8 acc", "change [95% CI]", "flips"],
        [[_e(x["name"]), _e(r["slice"]), f"{r['n']}{' (small)' if r['too_small'] else ''}", _f(r["fp32_accuracy"], ".1f", 100),
          _f(r["int8_accuracy"], ".1f", 100),
          f"{_f(r['delta'], '+.1f', 100)} [{_f(r['ci95'][0], '+.1f', 100)}, {_f(r['ci95'][1], '+.1f', 100)}]"
          f"{' *' if r['significant'] else ''}", r["flips"]] for x in q for r in [x["overall"], *x["slices"]]], [2, 3, 4, 6]) \
        + "<p class='muted'>* the interval excludes zero.</p></details>"


def _flips_section(q: list[dict], verdict: dict) -> list[str]:
    """Each variant's flipped predictions (broken ones first); the chosen (or closest) variant's list is open."""
    parts = ["<h2 id='flips'>Flipped predictions</h2>"]
    focus = verdict.get("chosen") or verdict.get("closest")
    for x in q:
        flips = x["flips"]
        shown = sorted(flips, key=lambda fl: (fl["kind"] != "broken", fl["index"]))[:MAX_FLIPS_SHOWN]
        more = f" (first {len(shown)} shown; summary.json lists all)" if len(flips) > len(shown) else ""
        parts.append(f"<details {'open' if x['name'] == focus else ''}><summary>{_e(x['name'])}: "
                     f"{len(flips)} flipped predictions{more}</summary>")
        if flips:
            parts.append(_table(["row", "text", "label", "FP32 (conf.)", "INT8 (conf.)", "kind", "slices"],
                                [[fl["row"], _e(fl["text"]), _e(fl["label"]),
                                  f"{_e(fl['fp32_pred'])} ({_f(fl['fp32_confidence'], '.2f')})",
                                  f"{_e(fl['int8_pred'])} ({_f(fl['int8_confidence'], '.2f')})", _e(fl["kind"]),
                                  _e(", ".join(fl["slices"]))]
                                 for fl in shown], [0]))
        parts.append("</details>")
    return parts


def _search_section(se: Optional[dict], figs: dict) -> list[str]:
    parts = ["<h2 id='search'>The search</h2>"]
    if se is None:
        return parts + ["<p class='muted'>No search.</p>"]
    guard = se.get("min_speedup") or 0
    parts.append("<p>Objective: the fastest INT8 variant within both budgets"
                 + (f" and at least {guard:.2f}x faster than FP32 at the lower end of its interval (the speed guard)" if guard else "")
                 + f"; else the FP32 graph. {_e(se['message'])}.</p>")
    parts.append(_table(["candidate", "precision", "ms", "speed-up [95% CI]", "MiB", "accuracy", "change (points)", "worst slice",
                         "within budget"],
                        [[_e(c["name"]) + (" <b>(chosen)</b>" if c["name"] == se["chosen"] else ""), _e(c["precision"]),
                          _f(c["latency_ms"]),
                          (_f(c.get("speedup"), ".2f",
                              suffix="x") + (f" [{_f(c['speedup_ci'][0], '.2f')}-{_f(c['speedup_ci'][1], '.2f')}]"
                                                                     if c.get("speedup_ci") else "")),
                          _f(c["size_mib"], ".1f"), _f(c["accuracy"], ".1f", 100, "%"),
                          _f(c["accuracy_delta"], "+.1f", 100),
                          f"{_e(c['worst_slice'] or '–')} {_f(-c['worst_slice_drop'], '+.1f', 100)}",
                          "reference" if c["precision"] == "fp32" else ("yes" if c["feasible"] else
                                                                        ("too slow" if c.get("too_slow") else "no"))]
                         for c in se["candidates"]], [2, 3, 4, 5, 6]))
    parts.append(figs.get("search", ""))
    return parts


def _method_section(s: dict) -> list[str]:
    """How the numbers were obtained, the timing settings, the notes, and where the numbers live."""
    m, env = s["method"], s["environment"]
    cpu = env["cpu"]
    t = m.get("timing") or {}
    parts = ["<h2 id='method'>How the numbers were obtained</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in m["notes"]) + "</ul>",
             f"<p>Timing: shapes {_e(t.get('shapes'))}, {_e(t.get('warmup'))} warm-up and {_e(t.get('repeats'))} timed runs, "
             f"ONNX Runtime intra-op threads: {_e(t.get('threads') or 'its default (one per physical core)')}; PyTorch threads: "
             f"{_e(env.get('torch_threads'))}. Machine: {_e(cpu.get('model'))}, {cpu.get('usable_cores')} cores, "
             f"load average at the end {_e(cpu.get('load_average'))}.</p>"]
    if s.get("notes"):
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in s["notes"]) + "</ul>")
    return parts
