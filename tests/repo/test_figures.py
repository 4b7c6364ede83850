"""Every figure the README and the documentation quote comes from one source (docs/hooks/figures.py): a committed
result file in benchmarks/results/ or the code's own setting. The committed text between the markers must be what
its source gives, and the figures the markers exist for are not typed by hand elsewhere."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("generated", REPO / "docs" / "hooks" / "generated.py")
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    return generated.figures_module()


def test_every_page_quotes_what_its_sources_say(figures):
    """A result file or a default changed without `python docs/hooks/generated.py` fails here."""
    stale = [str(p.relative_to(REPO)) for p in figures.pages() if figures.with_figures(p.read_text()) != p.read_text()]
    assert stale == [], f"{stale}: a figure is not what its source says: run `python docs/hooks/generated.py` and commit it"
    readme = (REPO / "README.md").read_text()
    assert "<!-- results-table: glance -->" in readme and "<!-- figure: test_suite.about -->" in readme


def test_every_figure_names_a_source_that_exists_and_gives_a_text(figures):
    for name, fig in figures.FIGURES.items():
        source = fig.source.split(":")[0] if not fig.source.startswith("code:") else None
        assert source is None or any(REPO.glob(source)), f"{name}: its source {fig.source} does not exist"
        assert figures.figure_text(name).strip(), name
    for path in (REPO / "benchmarks" / "results").glob("*_*_*.json"):
        assert figures.date_of(path.name), path.name


def test_a_figure_follows_its_source(figures, monkeypatch):
    """Break on purpose: a changed default and an unknown name both show up."""
    page = ("budget <!-- figure: audit.budget_overall.points -->1<!-- /figure --> point; "
            "<!-- figure: notebooks.count|Word -->Eight<!-- /figure -->")
    count = len(list(REPO.glob("notebooks/*.ipynb")))
    assert figures.with_figures(page).endswith(f"{figures.WORDS[count].capitalize()}<!-- /figure -->")
    from workbench.audit import config

    monkeypatch.setattr(config.AuditConfig.__dataclass_fields__["budget_overall"], "default", 0.005)
    assert "-->0.5<!--" in figures.with_figures(page)
    with pytest.raises(figures.FigureError, match="names no figure"):
        figures.with_figures("<!-- figure: no.such.figure -->1<!-- /figure -->")


def test_no_page_types_by_hand_a_figure_a_marker_generates(figures):
    hits = [hit for p in figures.pages() for hit in figures.hand_typed(p.read_text(), p.relative_to(REPO).as_posix())]
    assert hits == [], "typed by hand where a generated figure belongs (CONTRIBUTING.md, Figures):\n" + "\n".join(hits)


def test_the_hand_typed_check_finds_what_it_looks_for(figures):
    text = ("Seven notebooks.\n`make test` took 47 min.\n(default `dynamic dynamic-per-channel static-minmax`)\n"
            "(1 and 2 points by default)\nNDCG@10 (0.997 by default)\nabout 7 GiB of disk\nINT8 is 4.5x faster\n")
    found = [h.split(": ")[0] for h in figures.hand_typed(text, "README.md")]
    assert found == [f"README.md:{n}" for n in (1, 2, 3, 4, 5, 6, 7)], found
    assert [h.split(": ")[0] for h in figures.hand_typed(text, "docs/audit.md")] == [f"docs/audit.md:{n}" for n in range(1, 7)]
    quiet = ("<!-- figure: notebooks.count|Word -->Eight<!-- /figure --> notebooks; shapes 1x128 and 32x128; "
             "`make test-fast` (about 5 min); two open notebooks; `--budget-overall 0.01` allows one point\n")
    assert figures.hand_typed(quiet, "README.md") == []


def demo_summary(contended: bool = False) -> dict:
    """The parts of a demo's summary.json (workbench.report.SUMMARY_SCHEMA) the result script reads."""
    return {"kind": "demo", "task": "classification", "created_utc": "2026-12-01T10:00:00Z", "contended": contended,
            "contended_because": "probe at 60% of the profile" if contended else None,
            "machine": {"cpu_model": "AMD EPYC", "threads": 2, "cores": 2,
                        "flags": {"avx2": True, "avx512f": True, "avx512_vnni": True, "avx_vnni": False, "amx": False, "bf16": True}},
            "export": {"model_type": "bert", "num_parameters": 22_713_602},
            "verdict": {"chosen": "dynamic", "text": "Use dynamic."},
            "fusion": {"pytorch_latency_ms": {"1x128": 30.0, "32x128": 700.0},
                       "variants": [{"name": "ort_all", "latency_ms": {"1x128": 15.0}, "size_mib": 86.7},
                                    {"name": "transformer", "latency_ms": {"1x128": 10.0, "32x128": 300.0}, "size_mib": 86.6}]},
            "search": {"chosen": "dynamic", "candidates": [
                {"name": "fused/fp32", "latency_ms": 10.0, "speedup": 1.0, "speedup_ci": [1.0, 1.0], "size_mib": 86.6,
                 "accuracy_delta": 0.0},
                {"name": "dynamic", "latency_ms": 5.0, "speedup": 2.0, "speedup_ci": [1.8, 2.2], "size_mib": 21.9,
                 "accuracy_delta": -0.004}]},
            "quantization": [{"name": "dynamic", "latency_by_shape": [{"shape": "1x128"}]}]}


def test_the_classifier_result_comes_from_a_demo_summary_and_reaches_the_readme_table(figures, tmp_path):
    script = load_benchmark("classifier_result")
    run = tmp_path / "20261201-100000-demo"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(demo_summary()))
    assert script.main([str(run), "--out-dir", str(tmp_path / "results")]) == 0
    (written,) = (tmp_path / "results").glob("*.json")
    assert written.name == "classifier_minilm_epyc-avx512vnni_2026-12-01.json"
    result = json.loads(written.read_text())
    assert [(r["variant"], r["speed"], r["against"]) for r in result["rows"]] == [
        ("PyTorch eager", 1.0, "eager"), ("fused FP32 graph", 3.0, "eager"), ("INT8 chosen: `dynamic`", 2.0, "FP32 graph")]
    assert result["rows"][2]["lo"] == 1.8 and result["rows"][2]["accuracy_delta"] == -0.004
    table = figures.glance_table([written])
    assert "| classifier | PyTorch eager |" in table and "2.00x FP32 graph [1.80-2.20x], 1x128" in table
    assert "accuracy -0.40 points" in table and "2026-12-01" in table and "| embedding |" in table


def test_the_classifier_result_refuses_a_contended_run_or_a_folder_without_a_summary(tmp_path, capsys):
    script = load_benchmark("classifier_result")
    run = tmp_path / "run"
    run.mkdir()
    assert script.main([str(run), "--out-dir", str(tmp_path / "out")]) == 2
    (run / "summary.json").write_text(json.dumps(demo_summary(contended=True)))
    assert script.main([str(run), "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "no summary.json" in err[0] and "contended" in err[1] and "quiet machine" in err[1]
    assert not (tmp_path / "out").exists()
