"""The quantization search on an embedding model: its budget is NDCG@10 (share of FP32's kept, largest
drop per slice), and a configuration that misses it is quantized again with its worst nodes in FP32
until no slice is below its budget. Every quantization preset builds and is scored on the tiny model."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.embed_fixtures import make_tiny_st_folder, quantized_graphs_miss
from workbench.embed.evaluate import EmbedBudget
from workbench.embed.folder import EmbedError
from workbench.embed.retrieval import Interval, RetrievalComparison, RetrievalTask, SliceRetrieval
from workbench.embed.search import exclusion_steps


def _slice(name, n, fp32, variant, lo):
    return SliceRetrieval(name, n, {"ndcg@10": fp32}, {"ndcg@10": variant}, {"ndcg@10": Interval(variant - fp32, lo, 0.0)}, 1.0)


def test_budget_check_in_ndcg_terms():
    cmp = RetrievalComparison("t", "v", [_slice("all", 100, 0.50, 0.499, -0.004), _slice("long", 40, 0.60, 0.585, -0.03),
                                         _slice("short", 60, 0.40, 0.399, -0.02), _slice("tiny", 3, 0.9, 0.1, -0.9)])
    chk = EmbedBudget(min_ndcg_ratio=0.99, max_slice_drop=0.01, min_slice_size=20).budget_check(cmp)
    assert chk.within_overall and not chk.within_slices and not chk.feasible
    assert chk.worst_slice == "long" and chk.worst_slice_drop == pytest.approx(0.015)
    assert chk.slices_skipped == ["tiny"] and chk.slices_checked == 2
    assert len(chk.violations) == 1 and "'long'" in chk.violations[0]
    assert EmbedBudget(0.99, 0.02, 20).budget_check(cmp).feasible
    strict = EmbedBudget(0.99, 0.02, 20).budget_check(cmp, strict=True)  # judged on the interval's worse end
    assert not strict.feasible and strict.worst_slice_drop == pytest.approx(0.03)
    assert not EmbedBudget(0.999, 1.0, 20).budget_check(cmp).within_overall


def test_exclusion_steps_double_up_to_the_limit():
    assert exclusion_steps(0) == []
    assert exclusion_steps(1) == [1]
    assert exclusion_steps(6) == [1, 2, 4, 6]
    assert exclusion_steps(8) == [1, 2, 4, 8]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from workbench.embed.encode import OnnxEncoder
    from workbench.embed.export import run_embed_export, validation_texts
    from workbench.embed.retrieval import top_k

    tmp = tmp_path_factory.mktemp("tiny-embed")
    export = run_embed_export(make_tiny_st_folder(tmp), tmp / "export", texts=validation_texts(4))
    texts = validation_texts(64)
    queries, docs = texts[:24], texts[24:]
    # relevant: the documents FP32 ranks 5th and 8th-10th, so a small move in any ranking changes NDCG@10
    enc = OnnxEncoder(export.onnx_path, export.load_tokenizer(), export.max_length, 1)
    ranked = top_k(enc.encode(queries), enc.encode(docs), 10)
    relevant = [sorted(int(d) for d in row[[4, 7, 8, 9]]) for row in ranked]
    order = np.argsort([len(q) for q in queries])
    task = RetrievalTask("tiny", queries, docs, relevant, [-1] * len(queries),
                         {"all": list(range(24)), "short": sorted(order[:12].tolist()), "long": sorted(order[12:].tolist())})
    return export, task, tmp


def _search(tiny, budget, candidates, max_excluded, name, strict=False):
    from workbench.embed.search import EmbedSearchBaseline
    from workbench.quant import EvalConfig, SearchConfig, run_search

    export, task, tmp = tiny
    base = EmbedSearchBaseline(export, task, tmp / name / "base", budget, threads=1, max_excluded=max_excluded, rounds=3,
                               load_check=False)
    search = SearchConfig(candidates=candidates, evaluation=EvalConfig(n_boot=100), min_speedup=0, strict=strict)
    return run_search(base, search, tmp / name / "search")


def test_with_the_speed_guard_off_an_accurate_variant_is_chosen_even_when_slower_and_its_speed_is_said():
    """The guard off means speed does not decide: the FP32 graph is the answer only when no INT8 variant is
    within budget, so a variant slower than FP32 is chosen and the message states its speed as measured."""
    from pathlib import Path
    from types import SimpleNamespace

    from workbench.embed.search import EmbedSearchBaseline
    from workbench.quant import select_candidate
    from workbench.quant.budget import BudgetCheck
    from workbench.quant.search import SearchCandidate, choice_message

    def candidate(name, precision, speedup, lo, hi, ok=True):
        return SearchCandidate(name, "model", precision, None, Path("m.onnx"), None, 1.0, 1.0, 0.5, 0.0,
                               BudgetCheck(0.0, "", 0.0, ok, ok, [] if ok else ["NDCG@10 at 99.00% of FP32's"], 1, []),
                               speedup=speedup, speedup_lo=lo, speedup_hi=hi)

    found = [candidate("model/fp32", "fp32", 1.0, 1.0, 1.0), candidate("model/dynamic", "int8", 0.85, 0.80, 0.90)]
    best = select_candidate(found)
    terms = EmbedSearchBaseline.terms(SimpleNamespace(budget=EmbedBudget(), all_fp32={}, max_excluded=8))
    assert best.name == "model/dynamic"
    assert choice_message(found, best, terms, 0.0).startswith("model/dynamic: 0.85x the FP32 graph (0.80-0.90), 1.00 ms")
    # nothing within budget: the FP32 graph, and the message names the closest variant and the budget
    found[1] = candidate("model/dynamic", "int8", 0.85, 0.80, 0.90, ok=False)
    best = select_candidate(found)
    assert best.name == "model/fp32"
    assert choice_message(found, best, terms, 0.0).startswith(
        "no INT8 variant is within the NDCG@10 budget (99.7% of FP32's kept, no slice of 20+ queries losing more than 0.01), "
        "even with up to 8 nodes in FP32; closest: model/dynamic (NDCG@10 at 99.00% of FP32's). Keep the FP32 graph (model/fp32)")


STRICT = EmbedBudget(min_ndcg_ratio=1.0, max_slice_drop=0.0, min_slice_size=5)  # any change in any ranking misses


@pytest.fixture(scope="module")
def missed_search(tiny):
    """Static INT8 and weight-only INT4 held to the zero-change budget, up to 64 nodes in FP32, scored by a
    scorer the test controls (:func:`quantized_graphs_miss`): every graph that still holds a quantized node
    ranks every relevant document below the others, every graph that holds none ranks exactly as the FP32 graph. So every INT8 try misses
    and the graph with every quantized node left in FP32 meets the budget, on any CPU: whether a real INT8
    graph moves a ranking of the tiny model depends on the CPU's integer kernels (it did on an AVX2 CPU and
    did not on one with AVX-512 VNNI)."""
    from workbench.quant import QuantConfig

    export, task, _ = tiny
    with quantized_graphs_miss(task, reference=export.onnx_path):
        return _search(tiny, STRICT, (QuantConfig.preset("static"), QuantConfig.preset("weight-only-int4")), 64, "missed")


@pytest.fixture(scope="module")
def strict_search(tiny):
    """Static INT8 held to the zero-change budget as this CPU computes it: where it stops depends on the CPU."""
    from workbench.quant import QuantConfig

    return _search(tiny, STRICT, (QuantConfig.preset("static"),), 8, "strict")


@pytest.mark.slow
def test_a_strict_search_chooses_what_meets_the_budget_and_says_so_on_any_cpu(strict_search):
    """What holds whether or not this CPU's static INT8 graph moves a ranking: the FP32 graph meets any
    budget, the search adds 1, 2, 4, ... nodes in FP32 while a try misses and stops at the first that fits,
    and the message speaks of what was chosen."""
    from workbench.quant import QuantConfig, load_search

    res = strict_search
    fp32 = res.candidate("model/fp32")
    assert res.candidates[0] is fp32 and fp32.check.feasible and fp32.accuracy_delta == 0.0 and fp32.speedup == 1.0
    tried = [c for c in res.candidates if c.name.startswith("model/static")]
    assert tried and "+fp32-" not in tried[0].name and all("+fp32-" in c.name for c in tried[1:])
    own = QuantConfig.preset("static").exclude_worst
    kept = [len(c.config.nodes_to_exclude) - own for c in tried]
    assert kept[0] == 0 and kept[1:] == exclusion_steps(kept[-1])[:len(kept) - 1]
    assert all(not c.check.feasible for c in tried[:-1]), "it stops at the first try that fits"
    best = res.best
    assert best is not None and best.check.feasible and res.chosen == best.name
    if best.precision == "int8":
        assert res.message.startswith(f"{best.name}: ") and "x the FP32 graph" in res.message
    else:
        assert best.name == "model/fp32" and res.message.startswith(("keep the FP32 graph", "no INT8 variant"))
    again = load_search(res.out_dir)
    assert again.chosen == res.chosen and again.message == res.message


@pytest.mark.slow
def test_search_keeps_nodes_in_fp32_until_no_slice_is_below_its_budget(missed_search):
    from workbench.quant import QuantConfig, load_search

    res = missed_search
    assert res.metric == "ndcg@10" and res.budget_overall == 0.0 and res.budget_per_slice == 0.0
    names = [c.name for c in res.candidates]
    assert names[0] == "model/fp32" and res.candidate("model/fp32").check.feasible
    tried = [c for c in res.candidates if c.name.startswith("model/static")]  # the last may be the FP32 graph itself
    assert not tried[0].check.feasible, "an INT8 graph ranks its relevant documents last under the test's scorer"
    assert all(c.accuracy == 0.0 for c in tried[:-1]), "no relevant document is in any top 10 of an INT8 graph"
    assert len(tried) >= 2 and all("+fp32-" in c.name for c in tried[1:])
    kept = [len(c.config.nodes_to_exclude) for c in tried]
    own = kept[0]  # the static preset leaves its own worst nodes in FP32 (exclude_worst), then the search adds 1, 2, 4, ...
    assert own == QuantConfig.preset("static").exclude_worst > 0
    assert [k - own for k in kept[1:]] == exclusion_steps(kept[-1] - own)  # 1, 2, 4, ... the last as many as it took
    assert all(not c.check.feasible for c in tried[:-1])  # it stops at the first that fits
    last = tried[-1]  # with every quantized node in FP32 at the latest, the rankings are FP32's
    assert last.check.feasible and last.accuracy_delta == pytest.approx(0.0) and last.check.worst_slice_drop <= 0.0
    assert res.chosen in ("model/fp32", last.name) and res.best.check.feasible
    assert "NDCG@10" in res.message
    int4 = [c for c in res.candidates if "weight-only" in c.name]
    assert len(int4) == 1 and "no per-node error to rank" in res.message  # said, not silently skipped
    again = load_search(res.out_dir)
    assert again.metric == "ndcg@10" and [c.name for c in again.candidates] == names


@pytest.mark.slow
def test_a_budget_no_int8_graph_meets_ends_at_the_fp32_graph_and_says_so(missed_search):
    import onnx

    from workbench.quant.choice import left_all_in_fp32
    from workbench.quant import load_search

    res = missed_search
    *tried, last = [c for c in res.candidates if c.name.startswith("model/static")]
    assert tried and all(c.precision == "int8" and not c.check.feasible for c in tried), "every INT8 try missed"
    assert [c.name for c in res.candidates if left_all_in_fp32(c)] == [last.name], "the last one: every node in FP32"
    ops = {n.op_type for n in onnx.load(str(last.onnx_path)).graph.node}
    assert not ops & {"QuantizeLinear", "DequantizeLinear"}, f"no quantized node is left in it: {sorted(ops)}"
    assert last.precision == "fp32" and len(last.config.nodes_to_exclude) > len(tried[-1].config.nodes_to_exclude)
    assert last.check.feasible and last.accuracy_delta == pytest.approx(0.0), "scored: its rankings are FP32's"
    assert not last.feasible and last.speedup is None and last.too_slow.endswith("the graph is the FP32 graph (not timed)")
    assert res.chosen == "model/fp32"
    assert res.message.startswith("no INT8 variant fits the budget: with every quantized MatMul left in FP32 the graph is "
                                  f"the FP32 graph ({last.name}, scored, not timed)")
    assert "x the FP32 graph" not in res.message, "no speed-up is claimed for it"
    again = load_search(res.out_dir)
    assert left_all_in_fp32(again.candidate(last.name)) and again.message == res.message


@pytest.mark.slow
def test_search_with_a_loose_budget_takes_the_preset_as_it_is(tiny):
    from workbench.quant import QuantConfig

    loose = EmbedBudget(min_ndcg_ratio=0.5, max_slice_drop=0.5, min_slice_size=5)
    res = _search(tiny, loose, (QuantConfig.preset("dynamic"), QuantConfig.preset("dynamic-fp32-embeddings")), 8, "loose")
    assert len([c for c in res.candidates if c.precision == "int8"]) == 2 and res.candidates[0].name == "model/fp32"
    assert all("+fp32-" not in c.name for c in res.candidates)
    int8 = [c for c in res.candidates if c.precision == "int8"]
    assert all(c.check.feasible and c.feasible for c in int8)  # the speed guard is off: within budget is enough
    assert all(c.speedup_lo <= c.speedup <= c.speedup_hi for c in int8) and res.best is not None


def test_search_refuses_to_mix_metrics(tiny, tmp_path):
    from workbench.embed.search import EmbedSearchBaseline
    from workbench.quant import EvalConfig, QuantizeError, SearchConfig, run_search

    export, task, _ = tiny
    base = EmbedSearchBaseline(export, task, tmp_path / "base", threads=1, rounds=3, load_check=False)
    with pytest.raises(QuantizeError, match="one metric at a time"):
        run_search({"embed": base, "classifier": tmp_path / "model.onnx"}, SearchConfig(evaluation=EvalConfig(n_boot=100)), tmp_path / "s")
    assert not (tmp_path / "s").exists()
    with pytest.raises(EmbedError, match="max_excluded"):
        EmbedSearchBaseline(export, task, tmp_path / "base2", threads=1, max_excluded=-1, load_check=False)


PRESET_OPS = {"dynamic": "DynamicQuantizeLinear", "dynamic-per-channel": "DynamicQuantizeLinear",
              "dynamic-fp32-embeddings": "DynamicQuantizeLinear", "static": "QuantizeLinear",
              "weight-only-int4": "MatMulNBits"}


@pytest.mark.slow
def test_every_preset_builds_and_is_scored_like_the_others(tiny):
    import onnx

    from workbench.embed.encode import OnnxEncoder
    from workbench.embed.evaluate import evaluate_embeddings
    from workbench.embed.variants import build_variants

    export, task, tmp = tiny
    v = build_variants(export, list(PRESET_OPS), tmp / "presets", list(task.docs))
    tok = export.load_tokenizer()
    encoders = {name: OnnxEncoder(v.path(name), tok, export.max_length, 1) for name in v.names}
    ev = evaluate_embeddings(encoders, "fp32", task, budget=EmbedBudget(0.5, 0.5, 5), n_boot=100)
    assert [q.name for q in ev.variants] == ["fused", *PRESET_OPS]
    from workbench.quant import QuantConfig

    static = next(x for x in v.variants if x.name == "static")  # its preset leaves its worst nodes in FP32: done, not just named
    assert len(static.excluded_nodes) == QuantConfig.preset("static").exclude_worst > 0
    for name, op in PRESET_OPS.items():
        ops = {n.op_type for n in onnx.load(str(v.path(name))).graph.node}
        assert op in ops, f"{name}: no {op} in the graph ({sorted(ops)})"
        q = ev.variant(name)
        assert q.retrieval is not None and q.agreement is not None and q.meets_budget is not None
        assert q.agreement.slices[0].cosine_min > 0.99, f"{name}: its embeddings drifted from FP32's"

    def gathers_quantized(name):  # is the embedding table read through an INT8 Gather?
        g = onnx.load(str(v.path(name))).graph
        return any(n.op_type == "Gather" and any("quantized" in i for i in n.input) for n in g.node)

    assert not gathers_quantized("dynamic-fp32-embeddings")


def test_refused_preset_is_one_line():
    from workbench.embed.variants import preset_config
    from workbench.quant.nbits import probe_bits

    if 8 in probe_bits()[0]:  # this ONNX Runtime builds 8-bit weight-only: the preset is real
        assert preset_config("weight-only-int8").bits == 8
    else:
        with pytest.raises(EmbedError, match="8-bit weight-only quantization is not available") as exc:
            preset_config("weight-only-int8")
        assert "\n" not in str(exc.value)
    with pytest.raises(EmbedError, match="no quantization preset 'int3'"):
        preset_config("int3")


@pytest.mark.slow
def test_audit_with_search_reports_the_nodes_kept_in_fp32(tiny, tmp_path, capsys):
    import json

    import pandas as pd

    from workbench.cli import main
    from workbench.embed.export import validation_texts

    export, _, tmp = tiny
    texts = validation_texts(40)
    corpus, pairs = tmp_path / "corpus.csv", tmp_path / "pairs.csv"
    pd.DataFrame({"id": [f"d{i}" for i in range(30)], "text": texts[10:]}).to_csv(corpus, index=False)
    pd.DataFrame({"query": texts[:10], "relevant": [f"d{(3 * i) % 30}" for i in range(10)]}).to_csv(pairs, index=False)
    out = tmp_path / "audit"
    code = main(["audit", "--model", str(tmp / "model"), "--data", str(corpus), "--queries", str(pairs), "--presets", "static",
                 "--search", "--max-excluded", "2", "--min-ndcg-ratio", "1.0", "--max-slice-drop", "0", "--no-speed",
                 "--n-boot", "100", "--quick", "--out", str(out)])
    assert code in (0, 3), capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    from workbench.report import validate_summary

    validate_summary(s)  # the one schema every audit's summary follows, in the embedding task's shape
    assert (s["task"], s["kind"], s["budget"]["metric"], s["data"]["rows_scored"]) == ("embedding", "audit", "ndcg@10", 10)
    assert s["verdict"]["status"] in ("meets_budget", "no_candidate_meets_budget") and "variant" not in s["verdict"]
    se = s["search"]
    assert se["metric"] == "ndcg@10" and se["budget_per_slice"] == 0.0
    names = [c["name"] for c in se["candidates"]]
    assert names[0] == "model/fp32" and any(n.startswith("model/static") for n in names)
    own = len(se["candidates"][1]["config"]["nodes_to_exclude"])  # the preset's own exclude_worst
    for c in se["candidates"][1:]:  # the preset, then (while it misses) with 1, then 2 more nodes in FP32
        k = int(c["name"].rsplit("+fp32-", 1)[1]) if "+fp32-" in c["name"] else 0
        assert len(c["config"]["nodes_to_exclude"]) == own + k and k <= 2
    chosen = next(c for c in se["candidates"] if c["name"] == se["chosen"])  # what holds on any CPU: the chosen
    meets = [c["check"]["within_overall"] and c["check"]["within_slices"] for c in (chosen, se["candidates"][0])]
    assert all(meets)  # graph meets the budget, as FP32's does,
    if chosen["precision"] == "int8":  # and the message speaks of it
        assert se["message"].startswith(f"{chosen['name']}: ")
    else:
        assert se["chosen"] == "model/fp32" and se["message"].startswith(("keep the FP32 graph", "no INT8 variant"))
    html = (out / "report.html").read_text()
    assert "id='search'" in html and se["message"][:40] in html
    assert (out / "search" / "search.json").is_file()


@pytest.mark.slow
def test_audit_says_when_the_search_ends_at_the_fp32_graph(tiny, tmp_path, capsys):
    import json

    import pandas as pd

    from workbench.cli import main

    export, task, tmp = tiny  # the queries' relevant documents are those FP32 ranks 5th and 8th-10th
    corpus, pairs = tmp_path / "corpus.csv", tmp_path / "pairs.csv"
    pd.DataFrame({"id": [f"d{i}" for i in range(len(task.docs))], "text": task.docs}).to_csv(corpus, index=False)
    pd.DataFrame([{"query": q, "relevant": f"d{d}"} for q, rel in zip(task.queries, task.relevant) for d in rel]).to_csv(
        pairs, index=False)
    out = tmp_path / "audit"
    with quantized_graphs_miss(task):  # every INT8 graph misses, whatever the CPU (see missed_search)
        code = main(["audit", "--model", str(tmp / "model"), "--data", str(corpus), "--queries", str(pairs), "--presets", "static",
                         "--search", "--max-excluded", "64", "--min-ndcg-ratio", "1.0", "--max-slice-drop", "0", "--no-speed",
                     "--n-boot", "100", "--quick", "--out", str(out)])
    printed = capsys.readouterr()
    assert code in (0, 3), printed.err
    said = "no INT8 variant fits the budget: with every quantized MatMul left in FP32 the graph is the FP32 graph"
    assert said in printed.out
    se = json.loads((out / "summary.json").read_text())["search"]
    assert se["message"].startswith(said) and se["chosen"] == "model/fp32"
    assert se["candidates"][-1]["precision"] == "fp32" and se["candidates"][-1]["speedup"] is None
    html = (out / "report.html").read_text()
    assert said in html and "not timed: the FP32 graph" in html


def test_time_encoders_pairs_every_variant_with_the_base_per_batch():
    from workbench.embed.encode import speed_of, speed_summary, time_encoders

    calls: list[str] = []

    def fn(name, n):
        def run():
            calls.append(name)
            return sum(range(n))
        return run

    fns = {1: {"base": fn("base", 2000), "quick": fn("quick", 200)}, 32: {"base": fn("base", 4000), "quick": fn("quick", 400)}}
    run = time_encoders(fns, "base", 12, 1, rounds=4, repeats=2, warmup=1, floors=False, load_check=False)
    rows = speed_summary(run)["speeds"]
    assert [(s["name"], s["batch"], s["tokens"]) for s in rows] == [("base", 1, 12), ("quick", 1, 12), ("base", 32, 12), ("quick", 32, 12)]
    base = speed_of(run, "base", 32)
    assert base["speedup"] == 1.0 and base["ms_per_text"] == pytest.approx(base["ms_per_batch"] / 32)
    q = speed_of(run, "quick", 1)
    assert q["lo"] <= q["speedup"] <= q["hi"] and q["floor_ms"] is None and not run.contended
    assert q["ratio"] == run.speed("quick", (1, 12)).ratio  # the same paired rounds as the timing's own ratio
    back = speed_of(run, "base", 1, over="quick")
    assert back["speedup"] == pytest.approx(1 / q["speedup"], rel=0.5)  # the other way round, from the same rounds
    assert calls.count("base") == calls.count("quick") == 2 * (1 + 4 * 2)  # warm-up and every round, both batch sizes
    with pytest.raises(EmbedError, match="base 'nope'"):
        time_encoders(fns, "nope", 12, 1, rounds=3, floors=False, load_check=False)
