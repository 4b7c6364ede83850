"""workbench.quant.quantize on the tiny BERT: configs, quantized graphs, exclusion, node errors, search.

Graph facts are checked by reading the ONNX files, not by trusting the result's own lists.
"""

from __future__ import annotations

import statistics

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import onnx
import pytest

from workbench.core import serial
from workbench.quant import EvalConfig, EvaluationError, evaluate_slices, softmax
from workbench.quant.baseline import FP32_TIMINGS_FILE, fp32_latency
from workbench.quant import (
    DYNAMIC_OP_TYPES,
    PRESETS,
    STATIC_OP_TYPES,
    Baseline,
    BaselineConfig,
    BudgetCheck,
    CalibrationConfig,
    QuantConfig,
    QuantizeError,
    QuantMode,
    SearchCandidate,
    SearchConfig,
    SearchResult,
    TimingConfig,
    ValidationConfig,
    check_budget,
    load_baseline,
    load_quant_result,
    load_search,
    node_errors,
    requantize_excluding,
    prepare_baseline,
    run_quantization,
    run_search,
    select_candidate,
    worst_nodes,
)
from workbench.data.slices import SliceSet, predicate_slice


def nodes_by_name(path) -> dict:
    return {n.name: n for n in onnx.load(str(path), load_external_data=False).graph.node}


def producers(model_nodes: dict) -> dict:
    return {o: n for n in model_nodes.values() for o in n.output}


# ---- config -------------------------------------------------------------------------------------
def test_presets_and_string_conversion():
    cfg = QuantConfig(mode="STATIC", calibration=CalibrationConfig(method="Entropy"), weight_type="qint8", op_types=["MatMul"])
    assert cfg.mode is QuantMode.STATIC and cfg.calibration.method.value == "entropy" and cfg.op_types == ("MatMul",)
    assert QuantConfig.preset("dynamic").label == "dynamic-qint8"
    assert QuantConfig.preset("dynamic-per-channel").label == "dynamic-qint8-pc"
    assert QuantConfig.preset("dynamic-reduce-range").label == "dynamic-qint8-rr"
    assert QuantConfig.preset("dynamic-uint8").label == "dynamic-quint8"
    assert QuantConfig.preset("static-percentile", calibration={"samples": 64}).label == "static-percentile-64"
    assert QuantConfig.preset("static-minmax").op_types == ("MatMul", "Gemm")
    assert set(PRESETS) >= {"dynamic", "static-minmax", "static-entropy", "static-percentile"}
    back = serial.from_dict(QuantConfig, json.loads(json.dumps(serial.to_dict(cfg))))
    assert back == cfg


def test_the_static_preset_takes_every_knob_and_the_search_candidates_build():
    """The demo's search starts from ``default_candidates()``; a keyword clash in a preset builder
    (the static preset with 64 samples once raised TypeError) failed the demo while every other test passed."""
    from workbench.quant.search import default_candidates

    assert QuantConfig.preset("static").calibration.samples == 128
    assert QuantConfig.preset("static", calibration={"samples": 64}, exclude_worst=2).calibration.samples == 64
    assert QuantConfig.preset("static", exclude_worst=2).exclude_worst == 2
    cands = default_candidates()
    assert len({c.label for c in cands}) == len(cands) >= 4
    assert any(c.calibration.samples == 64 and c.exclude_worst for c in cands)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mode="int4"), r"mode must be one of \['dynamic', 'static', 'weight-only'\], got 'int4'"),
        (dict(calibration={"method": "kl"}), "calibration must be one of"),
        (dict(op_types=("Softmax",)), r"op_types \['Softmax'\] cannot be quantized in dynamic mode"),
        (dict(mode="static", op_types=("Attention",)), "cannot be quantized in static mode"),
        (dict(activation_type="qint8"), "activation_type='qint8': activation_type applies to static quantization only, "
                                        "and this is dynamic quantization; use a static-\\* preset"),
        (dict(op_types="MatMul"), r"write \('MatMul',\)"),
        (dict(mode="static", calibration={"samples": 4, "batch_size": 8}), "must be at least the calibration batch_size"),
        (dict(validation={"tolerance": 0}), "tolerance must be a positive number"),
        (dict(mode="static", calibration={"histogram_bins": 128}), "histogram_bins must be 0"),
        (dict(calibration={"percentile": 100.0}), "percentile must be in"),
        (dict(quant_format="qlinear"), "quant_format must be one of"),
        (dict(matmul_const_b_only=True), "matmul_const_b_only=True: matmul_const_b_only applies to static quantization only"),
        (dict(activation_symmetric=True), "activation_symmetric=True: activation_symmetric applies to static quantization only"),
        (dict(calibration={"samples": 64}), "calibration.samples=64: calibration applies to static quantization only"),
        (dict(mode="weight-only", exclude_worst=2), "exclude_worst=2: exclude_worst applies to dynamic and static"),
    ],
)
def test_bad_config_names_the_fix(kwargs, match):
    nested = {"calibration": CalibrationConfig, "validation": ValidationConfig}
    with pytest.raises(QuantizeError, match=match):
        QuantConfig(**{k: nested[k](**v) if isinstance(v, dict) else v for k, v in kwargs.items()})


def test_op_type_lists_match_onnxruntime():
    from onnxruntime.quantization.registry import IntegerOpsRegistry, QDQRegistry

    from workbench.quant.formats import STATIC_OP_TYPES_LATER, static_op_types

    assert set(DYNAMIC_OP_TYPES) == set(IntegerOpsRegistry)
    assert set(static_op_types()) == set(QDQRegistry)  # 1.19.2's list on the training stack, more on the current one
    assert set(STATIC_OP_TYPES) <= set(QDQRegistry) and not set(STATIC_OP_TYPES) & set(STATIC_OP_TYPES_LATER)


# ---- dynamic ------------------------------------------------------------------------------------
def test_dynamic_result_graph_and_files(quant_tiny_dynamic, quant_tiny_baseline, exported_tiny):
    r = quant_tiny_dynamic
    assert Path(r.quantized_path).is_file() and (Path(r.out_dir) / "quantize.json").is_file()
    assert r.graph_kind == "exported"
    assert r.size_mib < r.fp32_size_mib  # INT8 weights and embeddings
    from workbench.quant import machine_defaults

    assert any(n.startswith("reduce_range=False (") and machine_defaults().why in n for n in r.notes)  # beside this CPU's choice
    ops = {n.op_type for n in nodes_by_name(r.quantized_path).values()}
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= ops
    # every quantized node listed is gone (replaced) from the quantized graph, as an FP32 node
    qnodes = nodes_by_name(r.quantized_path)
    fnodes = nodes_by_name(exported_tiny.onnx_path)
    for name in r.quantized_nodes:
        assert name in fnodes
        same = qnodes.get(name)
        assert same is None or list(same.input) != list(fnodes[name].input)
    assert sum(fnodes[n].op_type == "MatMul" for n in r.quantized_nodes) >= 12  # 2 layers x 6 weight MatMuls
    assert r.validation.n_examples == len(quant_tiny_baseline.eval_set("test").load_examples())
    # the two graphs were timed side by side: one paired sample per round each, and the speed-up is
    # the median of the per-round ratios with its interval (not a ratio of medians taken apart)
    (q,), (f,) = r.latency, r.fp32_latency
    assert (q.batch, q.seq) == (f.batch, f.seq) == (1, 64)
    assert len(q.stats.samples_ms) == len(f.stats.samples_ms) == r.timing.repeats
    per_round = sorted(a / b for a, b in zip(f.stats.samples_ms, q.stats.samples_ms))
    assert r.speedup == pytest.approx(statistics.median(per_round))
    ratio = r.speedup_ratio
    assert ratio.lo <= ratio.value <= ratio.hi and ratio.rounds == r.timing.repeats
    # both latencies carry this machine's floor for their graph (its work at the profile's measured throughput)
    assert q.floor_ms > 0 and f.floor_ms > 0 and q.of_floor == pytest.approx(q.floor_ms / q.median_ms)
    assert r.load is not None and isinstance(r.load.contended, bool)


def test_result_round_trips_and_reloads(quant_tiny_dynamic):
    r = quant_tiny_dynamic
    back = load_quant_result(r.out_dir)
    assert serial.to_dict(back) == serial.to_dict(r)
    assert isinstance(back.config.mode, QuantMode)
    assert back.report.overall.n == r.report.overall.n
    base = load_baseline(r.baseline_path)
    assert isinstance(base, Baseline) and base.timing.shapes == ((1, 64),)


def test_slice_report_covers_test_split_every_slice_and_golden(quant_tiny_dynamic, quant_tiny_baseline):
    r = quant_tiny_dynamic
    test = quant_tiny_baseline.eval_set("test")
    assert r.report.n == test.n == 128
    names = [d.slice for d in r.report.slices]
    assert {"negation", "contrast", "length:short", "rare_words", "class:rotten", "class:fresh"} <= set(names)
    for d in r.report.slices:
        expected = len(next(s for s in test.slices if s.name == d.slice).indices)
        assert d.n == expected
        assert d.too_small == (expected < r.report.min_slice_size)
    assert r.golden is not None and r.golden.set_name == "golden" and r.golden.n == 24
    assert "negation&class:fresh" in [d.slice for d in r.golden.slices]


def test_flips_match_an_independent_run_of_both_graphs(quant_tiny_dynamic, quant_tiny_baseline, exported_tiny):
    """Run both graphs here, by hand, and compare with the flips the report lists."""
    import onnxruntime as ort

    from workbench.data.batches import encode

    tok = exported_tiny.load_tokenizer()
    examples = quant_tiny_baseline.eval_set("test").load_examples()

    def preds(path):
        s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [i.name for i in s.get_inputs()]
        bs = quant_tiny_baseline.batch_size  # the report's batches: dynamic INT8 depends on what shares a batch
        texts = [e["text"] for e in examples]
        rows = list(range(len(texts)))
        assert quant_tiny_baseline.scoring_order == "length"  # batches of rows sorted by token length (stable)
        n_tok = [len(x) for x in tok(texts, truncation=True, max_length=quant_tiny_baseline.max_length)["input_ids"]]
        rows.sort(key=lambda i: n_tok[i])
        out = np.zeros((len(texts), 2), dtype=np.float32)
        for i in range(0, len(rows), bs):
            idx = rows[i : i + bs]
            enc = encode(tok, [texts[j] for j in idx], quant_tiny_baseline.max_length)
            out[idx] = s.run(None, {k: enc[k].numpy() for k in names})[0]
        return out

    f, q = preds(exported_tiny.onnx_path), preds(quant_tiny_dynamic.quantized_path)
    changed = np.flatnonzero(f.argmax(1) != q.argmax(1)).tolist()
    rep = quant_tiny_dynamic.report
    assert [fl.index for fl in rep.flips] == changed
    for fl in rep.flips:
        assert fl.text == examples[fl.index]["text"]
        assert fl.reference_pred == int(f[fl.index].argmax()) and fl.candidate_pred == int(q[fl.index].argmax())
    np.testing.assert_allclose(rep.candidate_confidence, softmax(q).max(1), rtol=1e-5, atol=1e-6)


# ---- node errors --------------------------------------------------------------------------------
def test_node_errors_ranked_and_cover_quantized_nodes(quant_tiny_dynamic):
    errs = quant_tiny_dynamic.node_errors
    assert errs and {e.node for e in errs} == set(quant_tiny_dynamic.quantized_nodes)
    local = [e.local_sqnr_db for e in errs if not math.isnan(e.local_sqnr_db)]
    assert local == sorted(local)
    assert [e.rank for e in errs] == list(range(1, len(errs) + 1))
    mm = [e for e in errs if e.op_type == "MatMul" and not math.isnan(e.weight_sqnr_db)]
    assert mm, "dynamic MatMul weights should have a weight SQNR"
    # INT8 keeps 8 bits (about 48 dB at best); a broken comparison gives ~0 dB or negative values
    assert all(15.0 < e.weight_sqnr_db < 60.0 for e in mm)
    assert all(e.output_sqnr_db > 10.0 for e in errs)


def test_node_errors_agree_with_qdq_loss_debug(quant_tiny_static, quant_tiny_baseline):
    """Our streaming SQNR equals onnxruntime's qdq_loss_debug on the same batches."""
    import tempfile

    from onnxruntime.quantization import qdq_loss_debug

    from workbench.quant.quantize import encoded_feeds, feeds_reader
    from workbench.runtime.ortinfer import make_session

    r = quant_tiny_static
    tok = quant_tiny_baseline.load_tokenizer()
    feeds = encoded_feeds(make_session(r.float_path), tok, quant_tiny_baseline.calibration_texts()[:16],
                           quant_tiny_baseline.max_length, 8, pad_to_max=False)
    ours = {e.node: e for e in node_errors(r.float_path, r.quantized_path, feeds, ("MatMul", "Gemm"))}

    with tempfile.TemporaryDirectory() as tmp:
        fa, qa = f"{tmp}/f.onnx", f"{tmp}/q.onnx"
        qdq_loss_debug.modify_model_output_intermediate_tensors(str(r.float_path), fa, ["MatMul", "Gemm"])
        qdq_loss_debug.modify_model_output_intermediate_tensors(str(r.quantized_path), qa,
                                                                ["MatMul", "Gemm", "QuantizeLinear", "DequantizeLinear"])
        fact = qdq_loss_debug.collect_activations(fa, feeds_reader(feeds))
        qact = qdq_loss_debug.collect_activations(qa, feeds_reader(feeds))
    theirs = qdq_loss_debug.compute_activation_error(qdq_loss_debug.create_activation_matching(qact, fact))
    fnodes = nodes_by_name(r.float_path)
    inits = {i.name for i in onnx.load(str(r.float_path), load_external_data=False).graph.initializer}
    compared = 0
    for name, e in ours.items():
        acts = [i for i in fnodes[name].input[:2] if i not in inits]
        if not acts or not all(a in theirs and a in fact for a in acts):
            continue
        # local noise of quantizing the node's activation inputs (the worst of them)
        assert e.activation_sqnr_db == pytest.approx(min(theirs[a]["qdq_err"] for a in acts), abs=0.05)
        # the error that arrived: FP32 graph vs quantized graph at the inputs, before their Q/DQ
        arrived = min(qdq_loss_debug.compute_signal_to_quantization_noice_ratio(fact[a], qact[a]) for a in acts)
        if arrived > 100:  # bit-identical inputs: both hit the epsilon floor (float32 vs float64 sums)
            assert e.input_sqnr_db > 100
        else:
            assert e.input_sqnr_db == pytest.approx(arrived, abs=0.05)
        # qdq_loss_debug's xmodel_err is measured after the Q/DQ, so it includes the local noise too
        assert min(theirs[a]["xmodel_err"] for a in acts) <= e.input_sqnr_db + 0.05
        compared += 1
    assert compared >= 8


# ---- exclusion ----------------------------------------------------------------------------------
def test_requantize_excluding_really_excludes_dynamic(quant_tiny_dynamic, exported_tiny):
    r = quant_tiny_dynamic
    worst = worst_nodes(r.node_errors, 2)
    r2 = requantize_excluding(r, worst_k=2)
    assert r2.excluded_nodes == worst and r2.config.nodes_to_exclude == tuple(worst)
    assert Path(r2.out_dir) == Path(r.out_dir) / "exclude-2"
    fnodes, q1, q2 = nodes_by_name(exported_tiny.onnx_path), nodes_by_name(r.quantized_path), nodes_by_name(r2.quantized_path)
    for name in worst:
        orig = fnodes[name]
        kept = q2[name]  # still there, as the FP32 op with the FP32 inputs
        assert (kept.op_type, list(kept.input)) == (orig.op_type, list(orig.input))
        assert f"{name}_quant" not in q2
        assert name not in q1 or list(q1[name].input) != list(orig.input)  # was quantized before
        assert name not in r2.quantized_nodes
    assert len(r2.quantized_nodes) == len(r.quantized_nodes) - 2
    assert r2.report.n == r.report.n  # scored on the same examples


def test_requantize_excluding_really_excludes_static(quant_tiny_static):
    r = quant_tiny_static
    target = next(e.node for e in r.node_errors if e.op_type == "MatMul")
    r2 = requantize_excluding(r, nodes=[target], node_error_samples=0)
    q1, q2 = nodes_by_name(r.quantized_path), nodes_by_name(r2.quantized_path)
    prod1, prod2 = producers(q1), producers(q2)
    fed_by = lambda prod, node: {prod[i].op_type for i in node.input if i in prod}  # noqa: E731
    assert "DequantizeLinear" in fed_by(prod1, q1[target])
    assert "DequantizeLinear" not in fed_by(prod2, q2[target])
    assert target not in r2.quantized_nodes and target in r.quantized_nodes


def test_exclusion_errors_say_what_to_do(quant_tiny_dynamic):
    with pytest.raises(QuantizeError, match="close matches"):
        requantize_excluding(quant_tiny_dynamic, nodes=["/bert/encoder/layer.0/output/dense/MatMull"])
    with pytest.raises(QuantizeError, match="exactly one of worst_k"):
        requantize_excluding(quant_tiny_dynamic)
    with pytest.raises(QuantizeError, match="rank_by must be one of"):
        worst_nodes(quant_tiny_dynamic.node_errors, 2, rank_by="size")


# ---- static -------------------------------------------------------------------------------------
def test_static_qdq_graph(quant_tiny_static):
    r = quant_tiny_static
    ops = [n.op_type for n in nodes_by_name(r.quantized_path).values()]
    assert ops.count("QuantizeLinear") > 0 and ops.count("DequantizeLinear") > 0
    assert r.calibration_samples == 32
    assert Path(r.float_path).name == "model.fp32.pre.onnx"
    assert {nodes_by_name(r.float_path)[n].op_type for n in r.quantized_nodes} == {"MatMul", "Gemm"}
    mm = [e for e in r.node_errors if e.op_type == "MatMul" and not math.isnan(e.weight_sqnr_db)]
    assert mm and all(e.weight_sqnr_db > 15.0 for e in mm)  # uint8 weights dequantized correctly


def activation_scales(path) -> dict[str, float]:
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name: i for i in model.graph.initializer}
    return {n.input[0]: float(numpy_helper.to_array(inits[n.input[1]]))
            for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[1] in inits}


@pytest.mark.parametrize("calibration", ["entropy", "percentile"])
def test_histogram_calibrations_differ_from_minmax(quant_tiny_baseline, quant_tiny_static, tmp_path, calibration):
    """Same 32 calibration texts as the MinMax fixture: the histogram methods must clip some
    ranges (onnxruntime 1.19's quantize_static silently gives Entropy the MinMax ranges)."""
    r = run_quantization(quant_tiny_baseline, QuantConfig.preset(f"static-{calibration}", calibration={"samples": 32}), tmp_path,
                         evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    assert r.config.calibration.method.value == calibration and r.calibration_samples == 32
    mine, minmax = activation_scales(r.quantized_path), activation_scales(quant_tiny_static.quantized_path)
    assert mine and set(mine) == set(minmax)
    narrower = [t for t in mine if mine[t] < minmax[t] * 0.99]
    assert narrower, "no activation range was clipped: the calibration method had no effect"
    assert all(mine[t] <= minmax[t] * 1.001 for t in mine)  # clipping never widens a range


def test_the_stage_input_is_a_baseline_and_bad_inputs_are_named(quant_tiny_baseline, exported_tiny, tmp_path, quick_data):
    """The stage contract: run_quantization(baseline, QuantConfig, out, evaluation=EvalConfig)."""
    with pytest.raises(QuantizeError, match=r"input is a Baseline .* got ExportResult: prepare_baseline\(graph, data"):
        run_quantization(exported_tiny, QuantConfig.preset("dynamic"), tmp_path)
    with pytest.raises(QuantizeError, match="no ONNX graph at"):
        prepare_baseline(tmp_path / "missing.onnx", quick_data, tmp_path / "b")
    with pytest.raises(QuantizeError, match="cfg must be a QuantConfig"):
        run_quantization(quant_tiny_baseline, "dynamic", tmp_path)
    with pytest.raises(QuantizeError, match="evaluation must be an EvalConfig"):
        run_quantization(quant_tiny_baseline, QuantConfig.preset("dynamic"), tmp_path, evaluation={"n_boot": 100})
    with pytest.raises(EvaluationError, match="node_error_samples must be 0"):
        EvalConfig(node_error_samples=-1)
    with pytest.raises(QuantizeError, match="cfg must be a BaselineConfig"):
        prepare_baseline(exported_tiny, quick_data, tmp_path / "b", {"batch_size": 4})
    for bad, match in (({"batch_size": 0}, "batch_size must be >= 1"), ({"order": "shuffled"}, "order must be one of"),
                       ({"max_length": 1}, "max_length must be")):
        with pytest.raises(QuantizeError, match=match):
            BaselineConfig(**bad)


def test_user_slices_and_predicates_are_scored(exported_tiny, quick_data, tmp_path):
    base = prepare_baseline(exported_tiny, quick_data, tmp_path / "baseline", BaselineConfig(timing=TimingConfig.quick(repeats=2)),
                            predicates={"mentions_film": lambda e: "film" in e["text"]})
    r = run_quantization(base, QuantConfig.preset("dynamic"), tmp_path, evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    d = r.report.drift("mentions_film")
    want = sum("film" in e["text"] for e in quick_data["test"])
    assert d.n == want and d.group == "user"


# ---- budget and search --------------------------------------------------------------------------
def _report(drop_idx_all: int, slice_drop: int, n: int = 200):
    """A report where the candidate breaks ``drop_idx_all`` examples outside slice 'big' and
    ``slice_drop`` inside it ('big' = first 100 examples; 'tiny' = 5 examples, 2 broken)."""
    labels = np.zeros(n, dtype=int)
    ref = np.tile([0.9, 0.1], (n, 1))
    cand = ref.copy()
    cand[:slice_drop] = [0.2, 0.8]
    cand[100 : 100 + drop_idx_all] = [0.2, 0.8]
    cand[195:197] = [0.2, 0.8]
    ex = [{"text": "x", "i": i} for i in range(n)]
    ss = SliceSet("t", (predicate_slice("big", lambda e: e["i"] < 100), predicate_slice("tiny", lambda e: e["i"] >= 195)))
    return evaluate_slices(ex, labels, ref, cand, ss, EvalConfig(n_boot=200))


def test_check_budget_per_slice():
    # overall: 1 (in big) + 0 + 2 (tiny) = 3/200 = 1.5% drop; slice big: 1/100 = 1%; tiny: 2/5 = 40%
    ok = check_budget([_report(0, 1)], budget_overall=0.02, budget_per_slice=0.02)
    assert ok.feasible and ok.worst_slice == "test:big" and ok.slices_skipped == ["test:tiny"]
    assert ok.overall_drop == pytest.approx(0.015) and ok.worst_slice_drop == pytest.approx(0.01)
    # same overall budget, but 3 of the 100 in 'big' broken: 3% > 2% on that slice
    bad = check_budget([_report(0, 3)], budget_overall=0.05, budget_per_slice=0.02)
    assert bad.within_overall and not bad.within_slices and not bad.feasible
    assert any("slice test:big" in v for v in bad.violations)
    # small slices count only when asked
    strict_small = check_budget([_report(0, 1)], 0.05, 0.02, include_small_slices=True)
    assert not strict_small.feasible and strict_small.worst_slice == "test:tiny"


def _cand(name, latency, check: BudgetCheck, size=10.0, acc=0.9):
    return SearchCandidate(name, "g", "int8", None, Path(name), None, latency, size, acc, -check.overall_drop, check)


def test_selection_skips_faster_candidates_that_break_a_slice():
    fine = check_budget([_report(0, 1)], 0.02, 0.02)
    slice_bad = check_budget([_report(0, 3)], 0.05, 0.02)
    cands = [_cand("fast-but-breaks-a-slice", 5.0, slice_bad), _cand("slower-ok", 8.0, fine), _cand("slowest-ok", 12.0, fine, size=1.0)]
    assert select_candidate(cands, "latency").name == "slower-ok"
    assert select_candidate(cands, "size").name == "slowest-ok"
    assert select_candidate(cands[:1]) is None


def test_run_search_respects_the_per_slice_budget(exported_tiny, quick_data, tmp_path):
    res = run_search(
        exported_tiny,
        SearchConfig(candidates=(QuantConfig.preset("dynamic"), QuantConfig.preset("dynamic-per-channel")),
                     budget_overall=0.0, budget_per_slice=0.0, baseline=BaselineConfig(timing=TimingConfig.quick(repeats=3)),
                     include_small_slices=True, evaluation=EvalConfig(n_boot=100), min_speedup=0),  # accuracy alone (the guard: below)
        tmp_path, data=quick_data,
    )
    assert [c.name for c in res.candidates] == ["model/fp32", "model/dynamic-qint8", "model/dynamic-qint8-pc"]
    for c in res.candidates:
        # recompute every slice drop from the saved per-candidate reports
        if c.result_path is None:
            assert c.feasible and c.check.overall_drop == 0.0
            continue
        q = load_quant_result(c.result_path)
        judged = [*q.report.slices, q.golden.overall, *q.golden.slices]
        drops = [-d.delta for d in judged if d.n > 0]
        assert c.feasible == (max(drops) <= 1e-12 and -q.report.overall.delta <= 1e-12)
    # the choice is the fastest (highest speed-up over FP32) INT8 candidate feasible by the drops recomputed above,
    # the FP32 graph only when none is
    feasible_by_hand = [c for c in res.candidates if c.feasible]
    int8_by_hand = [c for c in feasible_by_hand if c.precision == "int8"]
    assert res.best is max(int8_by_hand or feasible_by_hand, key=lambda c: c.speedup)
    back = serial.from_dict(SearchResult, json.loads((tmp_path / "search.json").read_text()))
    assert back.chosen == res.chosen and len(back.candidates) == 3


@pytest.mark.timeout(900)
def test_search_rejects_a_candidate_because_of_one_slice(quick_data, tmp_path):
    """Real graphs (a tiny BERT exported to ONNX, and its dynamic INT8 quantization) and a slice
    built to hold examples INT8 got wrong: the search must refuse INT8 for that slice alone. Every
    drop is recomputed here from per-example predictions, and feasibility by the rule written here,
    not by the library's budget check."""
    import datasets
    import torch

    from workbench.graph import ExportConfig, run_export
    from workbench.models.load import load_model
    from workbench.runtime.ortinfer import predict_dataset

    # class names other than the reviews' rotten/fresh: no golden set, the two slices below are all
    data = quick_data.cast_column("label", datasets.ClassLabel(names=["neg", "pos"]))
    test = data["test"]
    labels = np.array(test["label"])
    # A random tiny BERT gives every text nearly the same logits (it predicts one class for all, margins ~5e-3;
    # INT8 moves them ~5e-4, by how much depends on the CPU's integer kernels). The classifier's bias is added in
    # float32 after the quantized MatMuls, so moving it moves FP32's and INT8's logit differences alike: measure both
    # once, then put the decision boundary where it separates them for as many examples as it can (FP32 right,
    # INT8 wrong), in the middle of that stretch, and export again. INT8 then breaks those examples by construction.
    loaded = load_model("tiny", dropout=False)

    def exported(name):
        return run_export(loaded, ExportConfig.quick(), tmp_path / name, data=data)

    def margins(graph) -> np.ndarray:  # logit of class 1 minus class 0, per test example
        logits = predict_dataset(str(graph), tok, test, export.max_length, 32)
        return logits[:, 1] - logits[:, 0]

    export = exported("probe")
    tok = export.load_tokenizer()
    probe = prepare_baseline(export, data, tmp_path / "probe" / "baseline", BaselineConfig(timing=TimingConfig.quick(repeats=1)))
    probe_int8 = run_quantization(probe, QuantConfig.preset("dynamic"), tmp_path / "probe",
                                  evaluation=EvalConfig(n_boot=100, node_error_samples=0)).quantized_path
    d32, d8 = margins(export.onnx_path), margins(probe_int8)
    # with the boundary at s, example i is predicted positive when its margin exceeds s: FP32 right and INT8 wrong
    # when s lies between d32 and d8 on the side that makes FP32 agree with the label
    lo, hi = np.where(labels == 1, d8, d32), np.where(labels == 1, d32, d8)
    ends = np.unique(np.concatenate([lo[lo < hi], hi[lo < hi]]))
    mids = (ends[:-1] + ends[1:]) / 2
    covered = [int(((lo <= m) & (m < hi)).sum()) for m in mids]
    same = [int(((d32 > m) == (d8 > m)).sum()) for m in mids]  # examples INT8 does not change there
    # the trap below holds up to 25 broken examples and is filled to 50 with unchanged ones
    fits = [j for j in range(len(mids)) if covered[j] >= 2 and same[j] >= 50 - min(covered[j], 25)]
    assert fits, f"INT8 moves no two margins past a common boundary (FP32 {d32[:4]}, INT8 {d8[:4]})"
    best = max(fits, key=lambda j: (min(covered[j], 25), ends[j + 1] - ends[j]))
    with torch.no_grad():
        loaded.model.classifier.bias[1] -= float(mids[best])
    export = exported("export")

    def right(graph) -> np.ndarray:
        return predict_dataset(str(graph), tok, test, export.max_length, 32).argmax(axis=1) == labels

    first = prepare_baseline(export, data, tmp_path / "first" / "baseline", BaselineConfig(timing=TimingConfig.quick(repeats=1)))
    int8_graph = run_quantization(first, QuantConfig.preset("dynamic"), tmp_path / "first",
                                  evaluation=EvalConfig(n_boot=100, node_error_samples=0)).quantized_path
    fp32_right, int8_right = right(export.onnx_path), right(int8_graph)
    broken = np.flatnonzero(fp32_right & ~int8_right)
    assert len(broken) >= 2, f"the boundary was put where INT8 breaks {covered[best]} examples FP32 gets right"
    # the trap: up to 25 broken examples, padded to 50 with examples INT8 did not change
    unchanged = np.flatnonzero(fp32_right == int8_right)
    k = min(len(broken), 25)
    trap = set(broken[:k].tolist()) | set(unchanged[: 50 - k].tolist())
    texts = test["text"]
    trap_texts = {texts[i] for i in trap}
    slices = SliceSet("two", (predicate_slice("trap", lambda e: e["text"] in trap_texts),
                             predicate_slice("rest", lambda e: e["text"] not in trap_texts)))

    def drop(idx) -> float:  # accuracy lost by INT8 on those examples (positive: worse)
        idx = np.asarray(sorted(idx))
        return float(fp32_right[idx].mean() - int8_right[idx].mean())

    hand = {"overall": drop(range(len(test))), "trap": drop(trap), "rest": drop(set(range(len(test))) - trap)}
    assert hand["trap"] == pytest.approx(k / 50) and hand["trap"] > max(hand["rest"], 0.0)
    budget_slice = (hand["trap"] + max(hand["rest"], 0.0)) / 2  # between the trap's drop and the other slice's
    budget_overall = min(max(hand["overall"], 0.0) + 0.01, 0.99)

    search = SearchConfig(candidates=(QuantConfig.preset("dynamic"),), budget_overall=budget_overall, budget_per_slice=budget_slice,
                          baseline=BaselineConfig(timing=TimingConfig.quick(repeats=2)),
                          evaluation=EvalConfig(n_boot=100), min_speedup=0)
    res = run_search(export, search, tmp_path / "search", data=data, slices=slices)
    fp32, int8 = res.candidates
    assert (fp32.precision, int8.precision) == ("fp32", "int8")
    # the search's own INT8 graph, scored here: the same predictions, so the drops above are what it judged
    assert np.array_equal(right(int8.onnx_path), int8_right)
    assert int8.check.overall_drop == pytest.approx(hand["overall"])
    assert int8.check.worst_slice == "test:trap" and int8.check.worst_slice_drop == pytest.approx(hand["trap"])
    # feasibility by the rule written here: the overall drop and every slice's within budget
    feasible_by_hand = hand["overall"] <= budget_overall and max(hand["trap"], hand["rest"]) <= budget_slice
    assert feasible_by_hand is False and int8.feasible is False
    assert int8.check.within_overall and not int8.check.within_slices  # the trap alone rejected it
    assert [v.split(" (")[0] for v in int8.check.violations] == ["slice test:trap"], int8.check.violations
    assert fp32.feasible and res.chosen == fp32.name

    # the same graphs with the per-slice budget at the trap's drop: INT8 fits, and is the smaller one
    loose = run_search(export, dataclasses.replace(search, budget_per_slice=hand["trap"], objective="size"), tmp_path / "loose",
                       data=data, slices=slices)
    assert loose.candidates[1].feasible and loose.chosen == loose.candidates[1].name


def test_search_config_refuses_bad_knobs(exported_tiny, tmp_path):
    from workbench.quant import Objective

    with pytest.raises(QuantizeError, match="fraction of accuracy"):
        SearchConfig(budget_per_slice=2.0)
    with pytest.raises(QuantizeError, match=r"objective must be one of \['latency', 'size'\], got 'power'"):
        SearchConfig(objective="power")
    with pytest.raises(QuantizeError, match="unique"):
        SearchConfig(candidates=(QuantConfig.preset("dynamic"), QuantConfig.preset("dynamic")))
    with pytest.raises(QuantizeError, match="must be QuantConfigs"):
        SearchConfig(candidates=("dynamic",))
    with pytest.raises(QuantizeError, match="nothing to search"):
        SearchConfig(candidates=(), include_fp32=False)
    with pytest.raises(QuantizeError, match=r"evaluation must be given as EvalConfig\(...\), got dict"):
        SearchConfig(evaluation={"n_boot": 100})
    with pytest.raises(QuantizeError, match=r"baseline must be given as BaselineConfig\(...\), got TimingConfig"):
        SearchConfig(baseline=TimingConfig())
    cfg = SearchConfig(objective="SIZE", candidates=[QuantConfig.preset("dynamic")])
    assert cfg.objective is Objective.SIZE and cfg.candidates == (QuantConfig.preset("dynamic"),)
    assert len(SearchConfig().candidates) >= 4  # None: the default candidates
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.budget_overall = 0.5
    with pytest.raises(QuantizeError, match="config must be a SearchConfig"):
        run_search(exported_tiny, {"budget_overall": 0.01}, tmp_path)
    with pytest.raises(QuantizeError, match="fraction of accuracy"):
        run_search(exported_tiny, SearchConfig(budget_per_slice=2.0), tmp_path)
    assert not any(tmp_path.iterdir())


# ---- the package: rooms of one idea -------------------------------------------------------------
def test_quant_package_files_stay_small_and_the_init_maps_them():
    import workbench.quant as quant

    folder = Path(quant.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert max(sizes.values()) <= 500, sizes
    doc = quant.__doc__
    missing = [name for name in sizes if name != "__init__.py" and f"``{name}``" not in doc]
    assert not missing, f"the package docstring's file map misses {missing}"
    for entry in ("run_quantization", "run_search", "prepare_baseline", "evaluate_slices", "SearchConfig", "EvalConfig"):
        assert entry in doc and hasattr(quant, entry), entry


# ---- work done once: the FP32 latency and scores, and results the search can take ----------------
class _Counter:
    """Counts, through monkeypatched ``workbench.runtime.ortinfer`` functions, how often the FP32 graph is
    timed (``latency_by_shape`` on its path) and scored (``predict_dataset`` on a session opened
    from its path), and which other graphs are timed."""

    def __init__(self, monkeypatch, fp32_path) -> None:
        import workbench.runtime.ortinfer as ortinfer

        self.fp32 = Path(fp32_path).resolve()
        self.timed: list[Path] = []
        self.fp32_scored = 0
        fp32_sessions: list = []
        real_lat, real_make, real_predict = ortinfer.latency_by_shape, ortinfer.make_session, ortinfer.predict_dataset

        def latency_by_shape(path, *a, **k):
            self.timed.append(Path(path).resolve())
            return real_lat(path, *a, **k)

        def make_session(path, *a, **k):
            session = real_make(path, *a, **k)
            if isinstance(path, (str, Path)) and Path(path).resolve() == self.fp32:
                fp32_sessions.append(session)
            return session

        def predict_dataset(session, *a, **k):
            self.fp32_scored += any(session is s for s in fp32_sessions)
            return real_predict(session, *a, **k)

        import workbench.perf.speed as perf_speed

        real_side = perf_speed.time_side_by_side

        def time_side_by_side(graphs, *a, **k):  # the FP32 graph timed beside a quantized one
            self.timed += [Path(g).resolve() for g in graphs.values()]
            return real_side(graphs, *a, **k)

        monkeypatch.setattr(ortinfer, "latency_by_shape", latency_by_shape)
        monkeypatch.setattr(ortinfer, "make_session", make_session)
        monkeypatch.setattr(ortinfer, "predict_dataset", predict_dataset)
        monkeypatch.setattr(perf_speed, "time_side_by_side", time_side_by_side)

    @property
    def fp32_timed(self) -> int:
        return self.timed.count(self.fp32)

    @property
    def others_timed(self) -> int:
        return len(self.timed) - self.fp32_timed


def test_fp32_is_timed_and_scored_once_and_the_search_reuses_earlier_results(exported_tiny, quick_data, tmp_path,
                                                                            monkeypatch):
    """The demo's order: one baseline, presets quantized into it, then the search over candidates that
    include two of the same configurations. The FP32 graph is scored once (with the baseline) and timed
    only beside each graph quantized (interleaved in one run, so load hits both sides of every ratio);
    the FP32 row of the search shows the first of those runs; the search quantizes and times only what was
    not quantized before."""
    count = _Counter(monkeypatch, exported_tiny.onnx_path)
    timing = TimingConfig.quick(repeats=2)
    base = prepare_baseline(exported_tiny, quick_data, tmp_path / "quantize" / "baseline", BaselineConfig(timing=timing))
    assert count.fp32_timed == 0 and count.fp32_scored == len(base.eval_sets) >= 1  # scored, never timed alone
    assert not (Path(base.out_dir) / FP32_TIMINGS_FILE).exists()

    evaluation = EvalConfig(n_boot=100, node_error_samples=0)
    presets = [run_quantization(base, QuantConfig.preset(name), tmp_path / "quantize" / name, evaluation=evaluation)
               for name in ("dynamic", "dynamic-per-channel")]
    assert count.fp32_scored == len(base.eval_sets)  # not scored again
    assert count.fp32_timed == 2 and count.others_timed == 2  # timed beside each variant, in the same rounds
    assert count.timed == [count.fp32, Path(presets[0].quantized_path).resolve(), count.fp32,
                               Path(presets[1].quantized_path).resolve()]
    assert all(r.timing == timing and len(r.fp32_latency[0].stats.samples_ms) == len(r.latency[0].stats.samples_ms)
               for r in presets)
    assert load_quant_result(presets[0].out_dir).timing == timing

    steps: list[str] = []
    cands = (QuantConfig.preset("dynamic"), QuantConfig.preset("dynamic-per-channel"), QuantConfig.preset("dynamic-reduce-range"))
    res = run_search(base, SearchConfig(candidates=cands, evaluation=EvalConfig(n_boot=100)), tmp_path / "search", previous=presets,
                     progress=lambda i, n, what: steps.append(what))
    assert count.fp32_scored == len(base.eval_sets)  # the baseline, not a second one
    assert count.others_timed == 3 and count.fp32_timed == 3  # only the reduce-range candidate was quantized and timed
    assert res.reused == ["model/dynamic-qint8", "model/dynamic-qint8-pc"]
    assert not (tmp_path / "search" / "model" / "baseline").exists()
    assert sorted(p.name for p in (tmp_path / "search" / "model").iterdir()) == ["dynamic-qint8-rr"]
    assert [w.endswith(")") and "(reused" in w for w in steps] == [True, True, False, False], steps  # FP32 after its variants
    assert "reused 2 earlier results" in res.message
    for r, name in zip(presets, res.reused):
        c = res.candidate(name)
        assert c.reused and c.result_path == Path(r.out_dir) / "quantize.json" and c.latency_ms == r.latency_ms
        assert c.accuracy == r.accuracy and c.onnx_path == Path(r.quantized_path)
    # the FP32 row: the FP32 side of the first interleaved run with these settings, not a timing of its own
    assert res.candidate("model/fp32").latency_ms == presets[0].fp32_latency[0].median_ms
    assert fp32_latency(base) == presets[0].fp32_latency and fp32_latency(load_baseline(base.out_dir)) == presets[0].fp32_latency
    assert load_search(tmp_path / "search").reused == res.reused

    # reused only when the scoring would be the same: other bootstrap settings quantize again
    other = run_search({"exported": base}, SearchConfig(candidates=cands[:1], evaluation=EvalConfig(n_boot=200), include_fp32=False),
                       tmp_path / "search-200", previous=presets)
    assert other.reused == [] and count.others_timed == 4 and count.fp32_timed == 4
    # other timing settings time the FP32 graph again, with those settings (a comparison needs both)
    slow = dataclasses.replace(timing, repeats=3)
    again = run_quantization(base, QuantConfig.preset("dynamic"), tmp_path / "other-timing",
                             evaluation=EvalConfig(n_boot=100, node_error_samples=0), timing=slow)
    assert count.fp32_timed == 5 and again.timing == slow and count.timed[-2:] == [count.fp32, Path(again.quantized_path).resolve()]


def test_results_saved_before_the_fp32_latency_was_kept_still_load(quant_tiny_baseline, quant_tiny_dynamic, tmp_path,
                                                                  monkeypatch):
    """baseline.json, quantize.json and search.json written before these fields existed load. An old
    baseline kept a latency of the FP32 graph timed on its own: it is not shown; until a variant is timed
    beside it the FP32 graph is timed when asked for (once per call), and an old result is never reused."""
    import shutil

    old_base = tmp_path / "baseline"
    shutil.copytree(quant_tiny_baseline.out_dir, old_base)
    (old_base / FP32_TIMINGS_FILE).unlink(missing_ok=True)
    data = json.loads((old_base / "baseline.json").read_text())
    data["fp32_latency"] = serial.to_dict(quant_tiny_dynamic.fp32_latency)  # where old baselines kept it
    data["out_dir"] = str(old_base)
    (old_base / "baseline.json").write_text(json.dumps(data))
    base = load_baseline(old_base)
    assert base.class_names == quant_tiny_baseline.class_names and not hasattr(base, "fp32_latency")
    count = _Counter(monkeypatch, base.fp32_path)
    assert fp32_latency(base)[0].median_ms > 0 and count.timed == [count.fp32]  # nothing beside it yet: timed now
    assert not (old_base / FP32_TIMINGS_FILE).exists()  # and not kept: the first variant's run will be FP32's figure
    kept = fp32_latency(quant_tiny_baseline)  # quant_tiny_dynamic timed FP32 beside it
    assert kept and kept == fp32_latency(load_baseline(quant_tiny_baseline.out_dir)) and count.fp32_timed == 1

    q = json.loads((Path(quant_tiny_dynamic.out_dir) / "quantize.json").read_text())
    del q["timing"]
    (tmp_path / "quantize.json").write_text(json.dumps(q))
    old_result = load_quant_result(tmp_path / "quantize.json")
    assert old_result.timing is None and old_result.accuracy == quant_tiny_dynamic.accuracy
    from workbench.quant.search import reusable_result

    assert reusable_result([quant_tiny_dynamic], QuantConfig.preset("dynamic"), quant_tiny_baseline,
                           quant_tiny_baseline.timing, 200, 0) is quant_tiny_dynamic
    assert reusable_result([old_result], QuantConfig.preset("dynamic"), quant_tiny_baseline,
                           quant_tiny_baseline.timing, 200, 0) is None

    cand = {"name": "model/fp32", "graph": "model", "precision": "fp32", "config": None, "onnx_path": "m.onnx",
            "result_path": None, "latency_ms": 1.0, "size_mib": 1.0, "accuracy": 0.9, "accuracy_delta": 0.0,
            "check": serial.to_dict(check_budget([quant_tiny_dynamic.report], 0.5, 0.5)), "feasible": True}
    old_search = {"candidates": [cand], "chosen": "model/fp32", "budget_overall": 0.01, "budget_per_slice": 0.02,
                  "objective": "latency", "include_small_slices": False, "strict": False, "out_dir": str(tmp_path),
                  "message": "m"}
    (tmp_path / "search.json").write_text(json.dumps(old_search))
    s = load_search(tmp_path)
    assert s.best.name == "model/fp32" and s.reused == [] and s.best.reused is False


# ---- the fused graph ----------------------------------------------------------------------------
def test_fused_graph_dynamic_and_static(fused_tiny, exported_tiny, quick_data, tmp_path):
    base = prepare_baseline(fused_tiny, quick_data, tmp_path / "baseline", BaselineConfig(timing=TimingConfig.quick(repeats=2)),
                            export=exported_tiny)
    r = run_quantization(base, QuantConfig.preset("dynamic"), tmp_path / "dyn", evaluation=EvalConfig(n_boot=100, node_error_samples=8))
    assert r.graph_kind == "fused"
    ops = {n.op_type for n in nodes_by_name(r.quantized_path).values()}
    assert ops & {"QAttention", "MatMulInteger", "DynamicQuantizeMatMul"}
    assert r.node_errors and r.report.n == 128
    s = run_quantization(load_baseline(tmp_path / "baseline"), QuantConfig.preset("static-minmax", calibration={"samples": 16}),
                         tmp_path / "static",
                         evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    assert any(n.op_type == "QuantizeLinear" for n in nodes_by_name(s.quantized_path).values())


# ---- CLI ----------------------------------------------------------------------------------------
def test_cli_quantize_json(exported_tiny, tmp_path, capsys):
    from workbench.cli import main

    rc = main(["quantize", str(exported_tiny.out_dir), "--quick", "--json", "--exclude-worst", "1", "--repeats", "2",
               "--run-dir", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    # the tiny BERT's INT8 graph stays within the validation limits (1 logit, 90% label agreement),
    # checked here from the numbers the CLI printed: it passes, and the exit status says so
    v = out["validation"]
    assert v["max_abs_diff"] <= 1.0 and v["label_agreement"] >= 0.9
    assert v["passed"] is True and rc == 0
    assert out["name"] == "dynamic-qint8-excl1" and len(out["excluded_nodes"]) == 1
    assert Path(out["result"]).is_file() and out["graph_kind"] == "exported"
    saved = load_quant_result(out["result"])
    assert saved.excluded_nodes == out["excluded_nodes"]
    assert out["overall"]["n"] == 128 and len(out["worst_slices"]) == 5


def test_cli_quantize_exits_1_when_validation_fails(exported_tiny, tmp_path, capsys, monkeypatch):
    """The same dynamic INT8 preset held to a logit tolerance of 1e-7 (INT8 moves the tiny model's
    logits by about 1e-4): the validation fails, the CLI says so and exits with 1."""
    import workbench.cli as cli
    import workbench.cli.quant as cli_quant

    strict = QuantConfig.preset("dynamic", validation={"tolerance": 1e-7})
    monkeypatch.setattr(cli_quant, "_quant_config", lambda args: strict)
    rc = cli.main(["quantize", str(exported_tiny.out_dir), "--quick", "--json", "--node-samples", "0", "--repeats", "2",
                   "--run-dir", str(tmp_path)])
    v = json.loads(capsys.readouterr().out)["validation"]
    assert v["max_abs_diff"] > 1e-7, "INT8 changed the logits"
    assert v["passed"] is False and rc == 1


def test_cli_quantize_bad_source(tmp_path, capsys):
    from workbench.cli import main

    assert main(["quantize", str(tmp_path)]) == 2
    assert "run `workbench export` first" in capsys.readouterr().err


def test_a_fusion_report_leads_to_its_export_wherever_the_folders_are(fused_tiny, quick_data, tmp_path):
    """In the demo and Workbench layouts fusion/ sits beside export/, not inside it: the report's
    export_path is how quantization finds the tokenizer and class names."""
    from pathlib import Path

    from workbench.quant import BaselineConfig, EvalConfig, QuantConfig, TimingConfig, prepare_baseline, run_quantization

    assert not (Path(fused_tiny.fused_path).parent / "export.json").exists()
    assert not (Path(fused_tiny.fused_path).parent.parent / "export.json").exists()
    base = prepare_baseline(fused_tiny, quick_data, tmp_path / "q" / "baseline", BaselineConfig(timing=TimingConfig.quick()))
    res = run_quantization(base, QuantConfig.preset("dynamic"), tmp_path / "q", evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    assert res.graph_kind == "fused"
    assert res.report.overall.n == len(quick_data["test"])


def test_static_preprocessing_leaves_nothing_in_the_working_directory(exported_tiny, tmp_path, monkeypatch):
    """ONNX Runtime's symbolic shape inference drops sym_shape_infer_temp.onnx into the current
    folder when it fails; pre-processing must run somewhere else."""
    import pytest
    from onnx import TensorProto, helper

    from workbench.quant.quantize import QuantizeError, preprocess_for_static

    monkeypatch.chdir(tmp_path)
    broken = tmp_path / "graphs" / "model_fused.onnx"  # named like a fused graph: symbolic inference runs
    broken.parent.mkdir()
    model = onnx.load(str(exported_tiny.onnx_path))  # plus an operator no shape inference knows: it cannot finish
    model.graph.node.append(helper.make_node("Mystery", ["logits"], ["mystery"], domain="com.example"))
    model.graph.output.append(helper.make_tensor_value_info("mystery", TensorProto.FLOAT, None))
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    onnx.save(model, str(broken))
    import workbench.quant.quantize as q

    monkeypatch.setattr(q, "graph_kind", lambda p: "fused")
    with pytest.raises(QuantizeError, match="with symbolic shape inference.*Incomplete symbolic shape inference"):
        preprocess_for_static(broken, tmp_path / "graphs" / "pre.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graphs"]


def _sliced_buffer_graph(path: Path, positions: int = 16) -> Path:
    """A fused-style graph (a contrib Gelu) with what a transformers 5 BERT export holds when the tokenizer gives
    no token_type_ids: a buffer of ``positions`` rows sliced to the input's length, ``Min(positions, sequence)``
    long to symbolic shape inference, added to a ``[batch, sequence]`` tensor."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Shape", ["input_ids"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["end"], axis=0),
             helper.make_node("Slice", ["buffer", "zero", "end", "one"], ["positions"]),
             helper.make_node("Add", ["input_ids", "positions"], ["sum"]),
             helper.make_node("Cast", ["sum"], ["sum_f"], to=TensorProto.FLOAT),
             helper.make_node("Gelu", ["sum_f"], ["out"], domain="com.microsoft")]
    inits = [numpy_helper.from_array(np.arange(positions, dtype=np.int64)[None], "buffer"),
             numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "one")]
    dims = ["batch", "sequence"]
    graph = helper.make_graph(nodes, "sliced_buffer", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, dims)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8  # what onnxruntime 1.19.2 reads
    onnx.save(model, str(path))
    return path


def test_static_preprocessing_takes_a_sliced_position_buffer_as_the_sequence_length(tmp_path):
    """Symbolic shape inference cannot prove ``Min(16, sequence)`` equal to ``sequence`` ("unsupported broadcast",
    then "Incomplete symbolic shape inference"); pre-processing merges the two, the sequence dim runs through to the
    output, and the pre-processed graph computes what the graph did."""
    import onnxruntime as ort

    from workbench.quant.quantize import preprocess_for_static
    from workbench.quant.baseline import graph_kind

    src = _sliced_buffer_graph(tmp_path / "model_fused.onnx")
    assert graph_kind(src) == "fused"
    out = preprocess_for_static(src, tmp_path / "pre.onnx")
    model = onnx.load(str(out))
    shapes = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in [*model.graph.value_info,
                                                                                                     *model.graph.output]}
    assert shapes["positions"] == [1, "sequence"] and shapes["out"] == ["batch", "sequence"], shapes
    ids = np.arange(12, dtype=np.int64).reshape(2, 6)
    before, after = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids})[0] for p in (src, out))
    np.testing.assert_array_equal(before, after)


def assert_weights_stay_fp32(r, nodes) -> None:
    """An excluded MatMul/Gemm computes in FP32 with its original float weight (its activation input
    may still arrive through a Q/DQ pair when another consumer of that tensor is quantized: ONNX
    Runtime's QDQ quantizer rewires every consumer)."""
    q = nodes_by_name(r.quantized_path)
    prod = producers(q)
    model = onnx.load(str(r.quantized_path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    for name in nodes:
        node = q[name]
        assert node.op_type in ("MatMul", "Gemm"), name
        quantized_weights = [i for i in node.input if i in prod and prod[i].op_type == "DequantizeLinear"
                             and prod[i].input[0] in inits]
        assert not quantized_weights, f"{name} is fed a quantized weight: {quantized_weights}"


def test_the_static_preset_keeps_attention_products_fp32_and_quantizes_weights(quant_tiny_baseline, tmp_path):
    """The "static" preset (the recipe the benchmark chose): per-channel weights, and the MatMuls
    that multiply two activations (attention's Q·Kᵀ, softmax·V) left in FP32."""
    from workbench.quant.quantize import activation_matmuls

    cfg = QuantConfig.preset("static", calibration={"samples": 32})
    assert cfg.per_channel and cfg.matmul_const_b_only and cfg.exclude_worst > 0
    assert cfg.label == f"static-minmax-32-constb-pc-worst{cfg.exclude_worst}"
    r = run_quantization(quant_tiny_baseline, cfg, tmp_path, evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    act = set(activation_matmuls(r.float_path))
    weights = {n for n, node in nodes_by_name(r.float_path).items() if node.op_type in ("MatMul", "Gemm")} - act
    assert act and len(act) % 2 == 0, "tiny BERT has two activation MatMuls per layer"
    assert not act & set(r.quantized_nodes), "an attention product was quantized"
    assert len(r.excluded_nodes) == cfg.exclude_worst
    assert weights - set(r.excluded_nodes) <= set(r.quantized_nodes), "a weight MatMul was left in FP32"
    assert_weights_stay_fp32(r, r.excluded_nodes)
    # per-channel: weight scales are vectors (one per output column)
    from onnx import numpy_helper

    model = onnx.load(str(r.quantized_path), load_external_data=False)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    scales = [inits[n.input[1]] for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits
              and inits[n.input[0]].ndim == 2]
    assert scales and all(s.ndim == 1 and s.size > 1 for s in scales)


def test_static_qoperator_and_symmetric_activations(quant_tiny_baseline, tmp_path):
    cfg = QuantConfig.preset("static-minmax", calibration={"samples": 32}, quant_format="qoperator", activation_type="qint8",
                             activation_symmetric=True, matmul_const_b_only=True)
    assert cfg.label == "static-minmax-32-wqint8-aqint8-qop-sym-constb"
    r = run_quantization(quant_tiny_baseline, cfg, tmp_path, evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    model = onnx.load(str(r.quantized_path), load_external_data=False)
    ops = [n.op_type for n in model.graph.node]
    assert "QLinearMatMul" in ops and "DequantizeLinear" in ops
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    zps = [inits[n.input[2]] for n in model.graph.node if n.op_type == "QuantizeLinear" and len(n.input) > 2 and n.input[2] in inits]
    assert zps and all(z.dtype == np.int8 and not z.any() for z in zps), "symmetric int8 activations have zero points 0"
    assert r.validation.label_agreement >= 0.5


def test_exclude_worst_leaves_the_ranked_worst_nodes_in_fp32(quant_tiny_static, quant_tiny_baseline, tmp_path):
    """exclude_worst ranks on the same 16 calibration texts as node_errors: the nodes it leaves in
    FP32 are the worst of the plain run's ranking, and the graph really has them unquantized."""
    cfg = QuantConfig.preset("static-minmax", calibration={"samples": 32}, exclude_worst=2)
    assert cfg.label == "static-minmax-32-worst2"
    r = run_quantization(quant_tiny_baseline, cfg, tmp_path, evaluation=EvalConfig(n_boot=100, node_error_samples=16))
    assert r.excluded_nodes == worst_nodes(quant_tiny_static.node_errors, 2)
    assert_weights_stay_fp32(r, r.excluded_nodes)
    assert any("exclude_worst=2" in n for n in r.notes)
    with pytest.raises(QuantizeError, match="exclude_worst must be a whole number"):
        QuantConfig.preset("static-minmax", exclude_worst=-1)


def test_static_preprocessing_with_a_relative_output_path(fused_tiny, tmp_path, monkeypatch):
    """A relative run folder (`workbench audit --out out`) once resolved against the scratch folder
    pre-processing runs in, and static quantization failed with FileNotFoundError."""
    from pathlib import Path

    from workbench.quant.quantize import preprocess_for_static

    monkeypatch.chdir(tmp_path)
    out = preprocess_for_static(Path(fused_tiny.fused_path), Path("rel") / "pre.onnx")
    assert (tmp_path / "rel" / "pre.onnx").is_file() and out == Path("rel") / "pre.onnx"


# ---- the speed guard ----------------------------------------------------------------
def _timed(name: str, accuracy_delta: float, lo: float, value: float, hi: float, contended: bool = False):
    """A quantized result as the search reads it, with a speed-up interval from paired rounds."""
    from types import SimpleNamespace

    from workbench.core.latency import Ratio

    return SimpleNamespace(config=QuantConfig.preset("dynamic", name=name), quantized_path=Path(f"/x/{name}.onnx"),
                           out_dir=Path(f"/x/{name}"), latency_ms=10.0 / value, size_mib=22.0, accuracy=0.8 + accuracy_delta,
                           accuracy_delta=accuracy_delta, speedup=value, speedup_ratio=Ratio(value, lo, hi, 20),
                           latency=[], contended=contended)


def _check(ok: bool):
    from workbench.quant import BudgetCheck

    return BudgetCheck(0.0, "", 0.0, ok, ok, [] if ok else ["overall -3.0 points"], 0, [])


def test_a_slower_but_more_accurate_candidate_is_never_chosen() -> None:
    from workbench.quant.search import SearchTerms, choice_message, int8_candidate

    fp32 = SearchCandidate(name="model/fp32", graph="model", precision="fp32", config=None, onnx_path=Path("/x/m.onnx"),
                           result_path=None, latency_ms=10.0, size_mib=87.0, accuracy=0.8, accuracy_delta=0.0,
                           check=_check(True), speedup=1.0, speedup_lo=1.0, speedup_hi=1.0)
    exact_but_slow = int8_candidate("exact", "model", _timed("exact", 0.0, 0.98, 1.04, 1.10), _check(True), 1.05)
    quick = int8_candidate("quick", "model", _timed("quick", -0.004, 1.55, 1.70, 1.82), _check(True), 1.05)
    assert not exact_but_slow.feasible and exact_but_slow.check.feasible and "0.98x is under the 1.05x" in exact_but_slow.too_slow
    assert select_candidate([fp32, exact_but_slow, quick]).name == "quick"
    # the quick one over the accuracy budget: the exact one is still too slow, so the FP32 graph is the answer
    quick_but_off = int8_candidate("quick", "model", _timed("quick", -0.03, 1.55, 1.70, 1.82), _check(False), 1.05)
    best = select_candidate([fp32, exact_but_slow, quick_but_off])
    assert best is fp32
    text = choice_message([fp32, exact_but_slow, quick_but_off], best, SearchTerms.accuracy(0.01, 0.02), 1.05)
    assert text.startswith("keep the FP32 graph (model/fp32)") and "none is at least 1.05x faster" in text
    assert "exact" in text and "0.98x is under the 1.05x speed guard" in text
    # the guard off: the exact one (1.04x, inside the budget) wins over FP32
    assert select_candidate([fp32, int8_candidate("exact", "model", _timed("exact", 0.0, 0.98, 1.04, 1.10),
                                                  _check(True), 0.0)]).name == "exact"


def test_the_guard_reads_the_lower_end_and_says_when_the_machine_was_busy() -> None:
    from workbench.quant.budget import speed_guard
    from workbench.quant.search import SearchTerms, choice_message, int8_candidate

    assert speed_guard(_timed("a", 0.0, 1.06, 1.2, 1.3), 1.05) == (True, "")
    ok, why = speed_guard(_timed("a", 0.0, 1.01, 1.6, 2.3), 1.05)  # a big median with a wide interval is not enough
    assert not ok and "1.01x is under the 1.05x speed guard" in why
    busy = int8_candidate("busy", "model", _timed("busy", 0.0, 1.5, 1.7, 1.9, contended=True), _check(True), 1.05)
    said = "the speed of busy was taken while other work used the CPU, even after timing again, so it is not stated as measured"
    message = choice_message([busy], busy, SearchTerms.accuracy(0.01, 0.02), 1.05)
    assert busy.contended and said in message and message.count(said) == 1
    assert "1.70x" not in message and "speed not measured" in message  # a busy timing's ratio is never stated
    with pytest.raises(QuantizeError, match="min_speedup is a speed-up over the FP32 graph"):
        SearchConfig(min_speedup=-1)
    assert SearchConfig(min_speedup="0").min_speedup == 0.0


def test_the_export_of_a_graph_is_read_from_the_run_not_guessed(exported_tiny, fused_tiny, tmp_path):
    """A graph's export is export.json beside it, or for a fused graph the export its
    fusion.json recorded; a graph that merely sits one folder below an export is described by nobody."""
    import shutil

    from workbench.graph.sources import export_of

    beside = export_of(Path(exported_tiny.onnx_path))
    assert Path(beside.onnx_path).resolve() == Path(exported_tiny.onnx_path).resolve()
    fused = export_of(Path(fused_tiny.fused_path))
    assert fused is not None and Path(fused.onnx_path).resolve() == Path(exported_tiny.onnx_path).resolve()
    # a copy of the fused graph below a folder holding some export.json: not that export's graph
    shutil.copy(Path(exported_tiny.onnx_path).parent / "export.json", tmp_path / "export.json")
    (tmp_path / "elsewhere").mkdir()
    stray = shutil.copy(fused_tiny.fused_path, tmp_path / "elsewhere" / "model.onnx")
    assert export_of(Path(stray)) is None


def test_fp32_embeddings_preset_quantizes_the_matmuls_and_keeps_the_embedding_table(quant_tiny_baseline, tmp_path):
    """The preset: per-channel dynamic INT8 of every MatMul, the word-embedding table left in
    FP32 (plain per-channel quantizes it to 8 bits); the label says so."""
    def embedding_table(path):
        model = onnx.load(str(path))
        return next(t for t in model.graph.initializer if t.name.split("_quantized")[0].endswith("word_embeddings.weight")
                    and len(t.dims) == 2)

    plain = run_quantization(quant_tiny_baseline, QuantConfig.preset("dynamic-per-channel"), tmp_path / "plain",
                             evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    kept = run_quantization(quant_tiny_baseline, QuantConfig.preset("dynamic-fp32-embeddings"), tmp_path / "kept",
                            evaluation=EvalConfig(n_boot=100, node_error_samples=0))
    assert kept.name == "dynamic-qint8-pc-fp32emb" and kept.validation.passed
    assert embedding_table(plain.quantized_path).data_type != onnx.TensorProto.FLOAT
    assert embedding_table(kept.quantized_path).data_type == onnx.TensorProto.FLOAT
    ops = [n.op_type for n in nodes_by_name(kept.quantized_path).values()]
    assert ops.count("MatMulInteger") == [n.op_type for n in nodes_by_name(plain.quantized_path).values()].count("MatMulInteger") > 0
    assert kept.size_mib > plain.size_mib  # the table stays 4 bytes a weight
