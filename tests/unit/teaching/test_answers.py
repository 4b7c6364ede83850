"""The instructor's answer key (workbench.teaching.answers): for every notebook's exercise, the key's
answer on real results (the tiny model) passes that exercise's check, the line ``answer()`` prints
passes too once read back, and a wrong answer does not. The key stays out of the learners' notebooks."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from workbench.teaching import answers, exercises as ex

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"


def _profile():
    """A machine profile built here (nothing measured): INT8 matrix multiplies 1.8x FP32, so the goal is 1.27x."""
    from workbench.perf.machine_profile import MachineProfile

    flags = {k: k == "avx2" for k in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx", "bf16")}
    return MachineProfile(cpu_model="test CPU", flags=flags, cores=2, threads=2, ort_version="1.19.2", fp32_gops=176.0,
                          int8_gops=317.0, qdq_int8_gops=317.0, measured_at="2026-11-24T00:00:00+00:00",
                          shapes=[[128, 384, 384]])


def _shown(line: str):
    """The value ``answer()`` tells the instructor to type, read back as Python."""
    return ast.literal_eval(line.split(" = ", 1)[1].split("  #", 1)[0])


def _passes(exercise: answers.Exercise, results, **kw) -> None:
    value = exercise.key(results, **kw)
    verdict = exercise.check(value, results, **kw)
    assert verdict.correct, f"{exercise.notebook}: the key's {value!r} fails the check: {verdict}"
    line = answers.answer(exercise.notebook, results, **kw)
    assert line.startswith(exercise.variable + " = "), line
    assert exercise.check(_shown(line), results, **kw).correct, f"the printed answer fails the check: {line}"


def _fails(exercise: answers.Exercise, wrong, results, **kw) -> None:
    verdict = exercise.check(wrong, results, **kw)
    assert verdict.status == ex.NOT_QUITE, f"{exercise.notebook}: a wrong answer {wrong!r} passed: {verdict}"


def _with_deltas(report, delta_of):
    def fix(d):
        value = delta_of(d)
        deltas = {k: dataclasses.replace(m, delta=value) if k == "accuracy" else m for k, m in d.deltas.items()}
        return dataclasses.replace(d, deltas=deltas)

    return dataclasses.replace(report, slices=[fix(d) for d in report.slices], overall=fix(report.overall))


def test_every_notebook_with_an_exercise_has_a_key() -> None:
    """Each notebook that calls a check has the key's entry, with the same variable and check."""
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        checks = [c for c in cells if "check_" in c and "exercises import" in c]
        assert checks, f"{path.name} has no exercise"
        exercise = answers.KEY[path.stem]
        assert f"{exercise.variable} = None" in checks[-1] and exercise.check.__name__ in checks[-1], path.name
        assert f"{exercise.check.__name__}({exercise.variable}, {exercise.results}" in checks[-1], path.name
    assert set(answers.KEY) == {p.stem for p in NOTEBOOKS.glob("*.ipynb")}


def test_the_key_stays_out_of_the_learners_notebooks() -> None:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        text = path.read_text()
        assert "teaching.answers" not in text and "import answers" not in text, path.name


def test_00_size_ratio(quant_tiny_dynamic) -> None:
    exercise = answers.KEY["00_tour"]
    _passes(exercise, quant_tiny_dynamic)
    _fails(exercise, answers.size_ratio(quant_tiny_dynamic) * 1.5, quant_tiny_dynamic)


def test_01_startup_in_steps(tiny_comparison) -> None:
    run = tiny_comparison[0].run("ortmodule")
    _passes(answers.KEY["01_finetune_ortmodule"], run)
    _fails(answers.KEY["01_finetune_ortmodule"], answers.startup_in_steps(run) / 2, run)


def test_02_fastest_backend(tiny_comparison) -> None:
    comparison = tiny_comparison[0]
    _passes(answers.KEY["02_eager_vs_ortmodule"], comparison)
    slower = [r.backend.value for r in comparison.runs if r.backend.value != answers.fastest_backend(comparison)]
    _fails(answers.KEY["02_eager_vs_ortmodule"], slower[0], comparison)


def test_03_fusions_per_layer(fused_tiny) -> None:
    _passes(answers.KEY["03_export_and_fusion"], fused_tiny)
    assert answers.fusions_per_layer(fused_tiny) == {"Attention": 1, "SkipLayerNormalization": 2, "BiasGelu": 1}
    whole_model = {op: n * fused_tiny.num_layers for op, n in answers.fusions_per_layer(fused_tiny).items()}
    _fails(answers.KEY["03_export_and_fusion"], whole_model, fused_tiny)


def _timed(r, speedup: float, lo: float):
    """``r`` as if timed side by side at ``speedup`` over FP32 (interval lower end ``lo``) on a quiet machine."""
    from workbench.core.latency import Ratio

    speed = [dataclasses.replace(s, ratio=Ratio(speedup, lo, speedup * 1.03, 20)) for s in r.speed]
    return dataclasses.replace(r, speed=speed, load=dataclasses.replace(r.load, contended=False, reasons=[]))


def test_04_preset_within_budget(quant_tiny_dynamic) -> None:
    """Of three results, only one holds every slice and is clearly faster: the key names it, the check
    passes it and fails the other two (one loses 2 points on a class, one is not beyond doubt faster)."""
    held = dataclasses.replace(quant_tiny_dynamic, report=_with_deltas(quant_tiny_dynamic.report, lambda d: 0.0))
    good = dataclasses.replace(_timed(held, 1.6, 1.5), name="kept-nodes")
    hurt = dataclasses.replace(_timed(quant_tiny_dynamic, 1.9, 1.8), name="dynamic",
                               report=_with_deltas(quant_tiny_dynamic.report,
                                                   lambda d: -0.02 if d.slice.startswith("class:") else 0.0))
    unsure = dataclasses.replace(_timed(held, 1.3, 1.1), name="static-minmax")
    results = {r.name: r for r in (good, hurt, unsure)}
    fast = _profile()
    assert ex.exercise_speed_target(fast) == pytest.approx(1.27, abs=0.01)
    exercise = answers.KEY["04_quantization_drift"]
    assert answers.preset_within_budget(results, profile=fast) == "kept-nodes"
    _passes(exercise, results, profile=fast)
    _fails(exercise, "dynamic", results, profile=fast)
    _fails(exercise, "static-minmax", results, profile=fast)
    assert answers.preset_within_budget({"dynamic": hurt}, profile=fast) is None
    assert "none of the results run so far fits" in answers.answer("04_quantization_drift", {"dynamic": hurt}, profile=fast)


def test_05_most_hurt_class(quant_tiny_dynamic) -> None:
    names = [d.slice.split(":", 1)[1] for d in quant_tiny_dynamic.report.slices if d.slice.startswith("class:")]
    worst, other = names[-1], names[0]  # the last class loses 5 points here, so right and wrong are known
    result = dataclasses.replace(quant_tiny_dynamic, report=_with_deltas(
        quant_tiny_dynamic.report, lambda d: -0.05 if d.slice == f"class:{worst}" else 0.0))
    assert answers.most_hurt_class(result) == worst
    _passes(answers.KEY["05_audit_your_own_model"], result)
    _fails(answers.KEY["05_audit_your_own_model"], other, result)


def test_06_trainable_fraction() -> None:
    # MiniLM with its last encoder layer and the head trainable: about 1.8 M of 22.7 M scalars
    result = SimpleNamespace(artifacts=SimpleNamespace(trainable_parameters=1_774_080, total_parameters=22_713_986))
    _passes(answers.KEY["06_on_device_training"], result)
    _fails(answers.KEY["06_on_device_training"], 1_774_080 / 22_713_986 * 1.5, result)
    small = SimpleNamespace(artifacts=SimpleNamespace(trainable_parameters=770, total_parameters=22_713_986))
    _passes(answers.KEY["06_on_device_training"], small)  # the head alone: a tiny fraction, still printed close enough


def test_07_most_ndcg_kept() -> None:
    def variant(name, ratio):
        return SimpleNamespace(name=name, retrieval=SimpleNamespace(ndcg_ratio=ratio))

    result = SimpleNamespace(evaluation=SimpleNamespace(variants=[
        variant("dynamic", 0.954), variant("dynamic-per-channel", 0.991), SimpleNamespace(name="unscored", retrieval=None)]))
    assert answers.most_ndcg_kept(result) == "dynamic-per-channel"
    _passes(answers.KEY["07_quantize_embedding_model"], result)
    _fails(answers.KEY["07_quantize_embedding_model"], "dynamic", result)


def test_a_notebook_without_an_exercise_is_named() -> None:
    with pytest.raises(KeyError, match="has no exercise"):
        answers.answer("99_nothing", None)
