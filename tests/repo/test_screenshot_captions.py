"""`make screenshots`' captions and the run it will shoot (scripts/picture_captions.py, scripts/screenshots.py): the
machine and the date come from the run's files, a run the README may not show is refused with its reason, and the
README's picture block is written from the manifest and read back the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.benchmarks import load_script

captions = load_script("picture_captions")

MACHINE = {"cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "cores": 2,
           "isa": "AVX-512 + AVX-512 VNNI + AMX + bf16", "flags": {"avx2": True}}


def _slice(lo: float, hi: float) -> dict:
    return {"ci95": [lo, hi]}


def make_run(root: Path, *, model: str = "minilm", interleaved: bool = True, contended: bool = False,
             widths: float = 0.02, training_busy: bool = False) -> Path:
    """A run folder with what the captions read: summary.json, demo.json, report.html."""
    run = root / "20261130-101500-demo"
    run.mkdir(parents=True)
    verdict = {"backend": "ortmodule", "ratio": 1.15, "interleaved": interleaved, "outcome": "unmeasured" if training_busy
               else "gain", "load": "CONTENDED: another process" if training_busy else ""}
    summary = {"created_utc": "2026-11-30T10:24:31Z", "machine": MACHINE, "contended": contended,
               "contended_because": ["dynamic: CONTENDED: another process"] if contended else [],
               "training": {"verdicts": [verdict]},
               "quantization": [{"overall": _slice(-widths, widths), "slices": [_slice(-widths, 0.0), _slice(0.0, 0.0)]}]}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "demo.json").write_text(json.dumps({"config": {"train": {"model": model}}}))
    (run / "report.html").write_text("<html></html>")
    return run


def test_the_facts_come_from_the_run_files(tmp_path):
    facts = captions.run_facts(make_run(tmp_path))
    assert facts.run == "20261130-101500-demo" and facts.date == "2026-11-30" and facts.model == "all-MiniLM-L6-v2"
    assert facts.machine == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz (AVX-512 + AVX-512 VNNI + AMX + bf16), 2 CPUs"
    assert facts.training == captions.LIKE_FOR_LIKE and facts.contended == [] and not facts.quick
    said = captions.caption(captions.readme_shows("workbench-lab.png", facts), facts)
    assert said.endswith("from `workbench demo` on all-MiniLM-L6-v2, run 20261130-101500-demo of 2026-11-30, on "
                         "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz (AVX-512 + AVX-512 VNNI + AMX + bf16), 2 CPUs")
    assert "the training verdict (like for like (steps taken in turns))" in said


@pytest.mark.parametrize("kind, reason", [
    ({"model": "tiny"}, "tiny test model"),
    ({"contended": True}, "taken while other work used the CPU"),
    ({"training_busy": True}, "taken while other work used the CPU"),
    ({"interleaved": False}, "no like-for-like ORTModule figure (it is one after the other, not like for like)"),
    ({"widths": 0.0}, "no slice of any variant has an interval wider than zero"),
])
def test_a_run_the_readme_may_not_show_is_refused_with_its_reason(tmp_path, kind, reason):
    run = make_run(tmp_path, **kind)
    why = captions.refusal(captions.run_facts(run), json.loads((run / "summary.json").read_text()))
    assert why is not None and reason in why, why
    good = make_run(tmp_path / "good")
    assert captions.refusal(captions.run_facts(good), json.loads((good / "summary.json").read_text())) is None


def test_a_folder_that_is_not_a_demo_run_is_refused(tmp_path):
    with pytest.raises(captions.RunRefused, match="summary.json does not exist"):
        captions.run_facts(tmp_path)
    run = make_run(tmp_path / "r")
    (run / "report.html").unlink()
    with pytest.raises(captions.RunRefused, match="no report.html"):
        captions.run_facts(run)


def _manifest(facts) -> dict:
    images = {name: {"caption": captions.caption(captions.readme_shows(name, facts), facts)}
              for name, _, _ in captions.README_PICTURES}
    return {"run_facts": facts.as_dict(), "images": images}


def test_the_readme_block_is_written_from_the_manifest_and_read_back(tmp_path):
    manifest = _manifest(captions.run_facts(make_run(tmp_path)))
    block = captions.readme_block(manifest)
    readme = f"# Title\n\nintro\n\n{captions.README_START}\nold pictures\n{captions.README_END}\n\n## Two commands\n"
    written = captions.with_readme_block(readme, block)
    assert written.startswith("# Title\n\nintro\n\n") and written.endswith("\n\n## Two commands\n")
    assert captions.readme_block_in(written) == block and "old pictures" not in written
    for name, width, _ in captions.README_PICTURES:
        assert f'<img src="docs/img/{name}" width="{width}" alt="' in block
    assert "run 20261130-101500-demo of 2026-11-30, on Intel(R) Xeon(R) Platinum 8481C" in block
    # what the README test compares: a manifest of another run (its date, its machine) gives another block
    other = json.loads(json.dumps(manifest))
    other["run_facts"]["date"] = "2026-12-01"
    assert captions.readme_block(other) != block
    with pytest.raises(captions.RunRefused, match="no picture block"):
        captions.with_readme_block("# no block\n", block)


def test_the_script_refuses_the_tiny_model_s_pictures_for_the_docs(capsys):
    shots = load_script("screenshots")
    assert shots.main(["--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("screenshots: --quick with --out docs/img") and "\n" not in err
    assert shots.main(["--readme-only"]) == 2
    assert "--readme-only with --out docs/img" in capsys.readouterr().err
    assert shots.main(["--out", "/tmp/none-such-shots", "--run", "/nonexistent/run"]) == 2
    assert "--run /nonexistent/run is not a folder" in capsys.readouterr().err
