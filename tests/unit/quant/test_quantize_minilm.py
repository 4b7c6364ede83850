"""Quantization on a fine-tuned MiniLM checkpoint: what only the real model shows.

MiniLM's FFN output weights have outliers (one weight near 8 while 99.9% are under 0.2), so one
INT8 scale per tensor leaves them at about 8 dB SQNR and per-channel scales fix it; INT8 flips a
few of its predictions, which must be listed exactly. Slow: uses the fine-tuned checkpoint fixture.
"""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest

from workbench.quant import (
    BaselineConfig,
    EvalConfig,
    QuantConfig,
    SearchConfig,
    TimingConfig,
    load_quant_result,
    prepare_baseline,
    requantize_excluding,
    run_quantization,
    run_search,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def minilm_export(trained_minilm_checkpoint, quick_data, tmp_path_factory):
    from workbench.graph import ExportConfig, run_export

    return run_export(str(trained_minilm_checkpoint), ExportConfig.quick(), tmp_path_factory.mktemp("minilm_export"), data=quick_data)


@pytest.fixture(scope="module")
def minilm_baseline(minilm_export, quick_data, tmp_path_factory):
    return prepare_baseline(minilm_export, quick_data, tmp_path_factory.mktemp("minilm_baseline"),
                            BaselineConfig(timing=TimingConfig.quick(repeats=3), calibration_samples=64))


@pytest.fixture(scope="module")
def minilm_dynamic(minilm_baseline, tmp_path_factory):
    return run_quantization(minilm_baseline, QuantConfig.preset("dynamic"), tmp_path_factory.mktemp("minilm_dynamic"),
                            evaluation=EvalConfig(n_boot=300, node_error_samples=16))


def test_fine_tuned_baseline_is_better_than_chance(minilm_baseline):
    from workbench.quant import softmax

    test = minilm_baseline.eval_set("test")
    labels = np.array([e["label"] for e in test.load_examples()])
    acc = float((softmax(test.fp32_logits()).argmax(1) == labels).mean())
    assert acc > 0.6, f"the checkpoint fixture should be fine-tuned (accuracy {acc:.2f})"


def test_flips_listed_exactly(minilm_dynamic, minilm_baseline, minilm_export):
    import onnxruntime as ort

    from workbench.data.batches import encode

    tok = minilm_export.load_tokenizer()
    total = 0
    for rep, eset in ((minilm_dynamic.report, minilm_baseline.eval_set("test")), (minilm_dynamic.golden,
                                                                                  minilm_baseline.eval_set("golden"))):
        examples = eset.load_examples()

        texts = [e["text"] for e in examples]
        bs, max_len = minilm_baseline.batch_size, minilm_baseline.max_length
        if minilm_baseline.scoring_order == "length":  # the same batches as the report: rows sorted by token length
            lengths = [len(tok(t, truncation=True, max_length=max_len)["input_ids"]) for t in texts]
            order = np.argsort(np.asarray(lengths), kind="stable")
        else:
            order = np.arange(len(texts))

        def preds(path):
            # the same batches as the report (dynamic INT8 depends on what shares a batch), results in row order
            s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            names = [i.name for i in s.get_inputs()]
            out = None
            for i in range(0, len(order), bs):
                idx = order[i : i + bs]
                enc = encode(tok, [texts[j] for j in idx], max_len)
                part = s.run(None, {k: enc[k].numpy() for k in names})[0]
                out = np.empty((len(texts),) + part.shape[1:], part.dtype) if out is None else out
                out[idx] = part
            return out

        f, q = preds(minilm_export.onnx_path), preds(minilm_dynamic.quantized_path)
        changed = np.flatnonzero(f.argmax(1) != q.argmax(1)).tolist()
        assert [fl.index for fl in rep.flips] == changed
        for fl in rep.flips:
            assert fl.text == examples[fl.index]["text"] and fl.label == examples[fl.index]["label"]
            assert fl.kind.value == ("fixed" if fl.candidate_pred == fl.label else "broken" if fl.reference_pred == fl.label else "changed")
        total += len(changed)
    # Some flips must be there to list, on any CPU: INT8 agrees with FP32 on about 97% of these reviews, and most of its
    # error is the rounding of MiniLM's weights to 8 bits (a few outlier weights leave some at about 8 dB SQNR, see the next test), which
    # is the same on every CPU; the integer kernels (AVX2's saturating u8s8 pairs, VNNI's, AMX's) only change how the
    # activations' rounding adds to it
    assert total >= 1


def test_outlier_weights_show_in_node_errors_and_per_channel_fixes_them(minilm_dynamic, minilm_baseline, tmp_path):
    errs = {e.node: e for e in minilm_dynamic.node_errors}
    ffn_out = [n for n in errs if n.endswith("output/dense/MatMul") and "attention" not in n]
    assert len(ffn_out) == 6
    worst3 = [e.node for e in minilm_dynamic.node_errors[:3]]
    assert all(n in ffn_out for n in worst3), worst3
    assert min(errs[n].weight_sqnr_db for n in ffn_out) < 15.0
    pc = run_quantization(minilm_baseline, QuantConfig.preset("dynamic-per-channel"), tmp_path,
                          evaluation=EvalConfig(n_boot=200, node_error_samples=4))
    pc_errs = {e.node: e for e in pc.node_errors}
    for n in ffn_out:
        assert pc_errs[n].weight_sqnr_db > errs[n].weight_sqnr_db + 10.0, n


def test_requantize_without_worst_nodes(minilm_dynamic, minilm_export):
    r2 = requantize_excluding(minilm_dynamic, worst_k=3, node_error_samples=0)
    fnodes = {n.name: n for n in onnx.load(str(minilm_export.onnx_path), load_external_data=False).graph.node}
    qnodes = {n.name: n for n in onnx.load(str(r2.quantized_path), load_external_data=False).graph.node}
    assert len(r2.excluded_nodes) == 3
    for name in r2.excluded_nodes:
        assert qnodes[name].op_type == "MatMul" and list(qnodes[name].input) == list(fnodes[name].input)
        assert f"{name}_quant" not in qnodes
    assert r2.size_mib > minilm_dynamic.size_mib  # three 1536x384 weights back in FP32
    assert r2.report.n == minilm_dynamic.report.n and r2.golden.n == 24


def test_search_respects_the_per_slice_budget(minilm_export, quick_data, tmp_path):
    res = run_search(
        minilm_export,
        SearchConfig(candidates=(QuantConfig.preset("dynamic"), QuantConfig.preset("dynamic-per-channel")),
                     budget_overall=0.02, budget_per_slice=0.02, baseline=BaselineConfig(timing=TimingConfig.quick(repeats=2)),
                     evaluation=EvalConfig(n_boot=200),
                     min_speedup=0),  # accuracy alone: the guard is tested in test_quantize
        tmp_path, data=quick_data,
    )
    for c in res.candidates:
        if c.result_path is None:
            continue
        q = load_quant_result(c.result_path)
        judged = [d for d in [*q.report.slices, q.golden.overall, *q.golden.slices] if d.n > 0 and not d.too_small]
        worst = max(-d.delta for d in judged)
        assert c.check.within_slices == (worst <= 0.02 + 1e-12)
        assert c.feasible == (c.check.within_slices and -q.report.overall.delta <= 0.02 + 1e-12)
        assert math.isclose(c.check.worst_slice_drop, worst)
    # the choice is the candidate with the highest speed-up over FP32 (each measured beside FP32 in
    # its own interleaved rounds; FP32 itself is 1.0) that the drops recomputed above allow; not the
    # lowest raw latency: those were timed at different moments (load in between moves them)
    allowed = [c for c in res.candidates if c.result_path is None or c.feasible]
    assert res.best is max(allowed, key=lambda c: (c.speedup, c.accuracy))
    saved = json.loads((tmp_path / "search.json").read_text())
    assert saved["chosen"] == res.chosen
