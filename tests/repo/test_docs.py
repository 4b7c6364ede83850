"""The documentation: the README's first screen, the pictures (made by `make screenshots` from the
current version), the site (`mkdocs build --strict`), the lint, the README's two examples, and
no shipped code citing notes or trackers that do not ship."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.benchmarks import load_script

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
NOTEBOOKS = REPO / "notebooks"
MANIFEST = DOCS / "img" / "manifest.json"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)|<img[^>]*\ssrc=\"([^\"]+)\"")
# a notebook's picture, in one of its first cells: what its panel shows after a quick run (made by `make screenshots`)
NOTEBOOK_PICTURE = re.compile(r"!\[What this notebook shows\]\(\.\./docs/img/([^)/\s]+\.png)\)")
WIDGET_MIME = ("application/vnd.jupyter.widget-view+json", "application/vnd.jupyter.widget-state+json")


def png_text(data: bytes) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG file, as a dict (what scripts/screenshots.py writes into each picture)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    out, pos = {}, 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        if data[pos + 4:pos + 8] == b"tEXt":
            key, _, value = data[pos + 8:pos + 8 + length].partition(b"\x00")
            out[key.decode("latin-1")] = value.decode("latin-1")
        pos += 12 + length
    return out


def pictures_named() -> dict[Path, list[str]]:
    """Every local image the README and the documentation pages name: path -> the pages naming it."""
    found: dict[Path, list[str]] = {}
    for page in [README, NOTEBOOKS / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for a, b in IMAGE.findall(page.read_text()):
            ref = a or b
            if "://" in ref:
                continue
            found.setdefault((page.parent / ref).resolve(), []).append(str(page.relative_to(REPO)))
    return found


def test_the_readme_is_short_and_its_first_screen_shows_what_you_will_see():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    first_screen = "\n".join(lines[:40])
    for picture in ("docs/img/workbench-lab.png", "docs/img/report.png"):
        assert picture in first_screen, f"{picture} is not on the README's first screen"
    for command in ("make demo", "make test"):
        assert command in first_screen, command
    assert "<!-- training-line -->" in text
    assert "```python" in text and "workbench audit --model" in text


def test_every_file_the_readme_links_to_exists():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    assert links
    missing = [link for link in links if "://" not in link and not (REPO / link).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"


def test_every_picture_the_docs_name_exists_and_was_made_by_this_version():
    import workbench

    named = pictures_named()
    assert (DOCS / "img" / "workbench-lab.png").resolve() in named and (DOCS / "img" / "report.png").resolve() in named
    manifest = json.loads(MANIFEST.read_text())
    assert manifest["workbench_version"] == workbench.__version__, (
        f"docs/img was made by workbench {manifest['workbench_version']}, this is {workbench.__version__}: run `make screenshots`")
    for path, pages in named.items():
        check_made_by_this_version(path, manifest, f"named in {pages}")


def check_made_by_this_version(path: Path, manifest: dict, where: str) -> dict:
    """``path`` exists, is the picture ``make screenshots`` recorded in the manifest, and carries this
    version and the manifest's run; its manifest entry."""
    import workbench

    assert path.exists(), f"{path.relative_to(REPO)} ({where}) does not exist: run `make screenshots`"
    entry = manifest["images"].get(path.name)
    assert entry, f"{path.name} ({where}) is not in docs/img/manifest.json: only `make screenshots` makes pictures"
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"], f"{path.name} changed since `make screenshots` made it"
    text = png_text(data)
    assert text.get("workbench-version") == workbench.__version__, (path.name, text)
    assert text.get("workbench-run") == manifest["run"], (path.name, text)
    return entry


def test_the_readme_picture_captions_are_the_manifest_s():
    """The README's picture block is what `make screenshots` writes from docs/img/manifest.json: each picture's
    caption names the run's machine (CPU model and instruction sets from its machine profile) and date, and the run
    is MiniLM's demo, not the tiny model's; a caption edited by hand, or pictures made again without the README,
    fail here."""
    import html

    captions = load_script("picture_captions")
    manifest = json.loads(MANIFEST.read_text())
    block = captions.readme_block_in(README.read_text())
    assert block is not None, f"README.md has no picture block ({captions.README_START})"
    assert "run_facts" in manifest, (
        "docs/img/manifest.json records no run facts (made before the captions were written from the run): run "
        "`make screenshots` on a quiet machine")
    facts = manifest["run_facts"]
    assert not facts["quick"] and facts["model"] == captions.MODEL_NAMES["minilm"], facts
    assert facts["training"] == captions.LIKE_FOR_LIKE and not facts["contended"], facts
    for name, _, _ in captions.README_PICTURES:
        said = manifest["images"][name]["caption"]
        assert facts["machine"] in said and facts["date"] in said, (name, said)
        assert f'<img src="docs/img/{name}"' in block and f'alt="{html.escape(said, quote=True)}"' in block, name
    assert f"{facts['machine']}." in block and facts["date"] in block
    assert block == captions.readme_block(manifest), (
        "README.md's picture block is not what docs/img/manifest.json gives: run `make screenshots` (it writes both)")


def notebook_picture(nb) -> list[str]:
    """The pictures a notebook shows in its first three cells (before its code)."""
    return [name for c in nb.cells[:3] if c.cell_type == "markdown" for name in NOTEBOOK_PICTURE.findall(c.source)]


def widget_state(nb) -> list[str]:
    """Where a notebook carries saved widget state (ipywidgets' models, plotly.js with them)."""
    found = ["metadata.widgets"] if "widgets" in nb.metadata else []
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            found += [f"cell {i}: {mime}" for mime in WIDGET_MIME if mime in output.get("data", {})]
    return found


def test_every_notebook_shows_its_panel_before_it_is_run_without_widget_state():
    """Each notebook shows, in one of its first cells, a picture of its panel after a quick run: made by
    `make screenshots` from this version (one per notebook, recorded with the notebook's name), named
    by the notebook pages too; and no notebook carries widget state."""
    import nbformat

    manifest = json.loads(MANIFEST.read_text())
    shots = load_script("screenshots")
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {p.stem for p in paths} == {*shots.NOTEBOOK_SHOTS, shots.TOUR.removesuffix(".ipynb")}, \
        "scripts/screenshots.py takes one picture per notebook (NOTEBOOK_SHOTS): add the new notebook"
    pages = ["notebooks/README.md", "docs/notebooks.md"]
    named_by = pictures_named()
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        assert widget_state(nb) == [], f"{path.name} carries widget state {widget_state(nb)}: clear its outputs and widget state"
        named = notebook_picture(nb)
        assert named == [shots.notebook_picture(path.stem)], (
            f"{path.name}: one of its first cells must show ![What this notebook shows](../docs/img/"
            f"{shots.notebook_picture(path.stem)}), found {named}")
        entry = check_made_by_this_version(DOCS / "img" / named[0], manifest, f"shown by {path.name}")
        assert entry.get("notebook") == path.stem, (named[0], entry)
        for page in pages:
            assert page in named_by.get((DOCS / "img" / named[0]).resolve(), []), f"{page} does not show {named[0]} ({path.stem})"


def test_the_notebook_checks_find_what_they_look_for():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_markdown_cell("![What this notebook shows](../docs/img/x.png)"),
                nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output(
                    "display_data", data={"text/plain": "w", WIDGET_MIME[0]: {"model_id": "1"}})])]
    assert notebook_picture(nb) == ["x.png"] and widget_state(nb) == [f"cell 2: {WIDGET_MIME[0]}"]
    nb.metadata["widgets"] = {WIDGET_MIME[1]: {"state": {}}}
    nb.cells.insert(1, nbformat.v4.new_code_cell("x"))
    nb.cells.insert(1, nbformat.v4.new_code_cell("y"))
    assert notebook_picture(nb) == [] and widget_state(nb) == ["metadata.widgets", f"cell 4: {WIDGET_MIME[0]}"]


def test_png_text_reads_what_the_screenshot_script_writes():
    png_with_text = load_script("screenshots").png_with_text

    import zlib

    raw = b"\x89PNG\r\n\x1a\n"
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    for kind, body in ((b"IHDR", ihdr), (b"IDAT", zlib.compress(b"\x00\x00")), (b"IEND", b"")):
        raw += struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    assert png_text(raw) == {}
    tagged = png_with_text(raw, {"workbench-version": "9.9", "workbench-run": "r1"})
    assert png_text(tagged) == {"workbench-version": "9.9", "workbench-run": "r1"}
    assert tagged.endswith(raw[-12:])


SHIPPED = ("workbench", "widgets", "notebooks", "benchmarks", "tests", "docs", "scripts", "requirements", "README.md",
           "CONTRIBUTING.md", "ARCHITECTURE.md", "Makefile", "pyproject.toml", ".ci")
THIS_FILE = Path(__file__).resolve()  # holds the pattern and its examples
UNSHIPPED = re.compile(r"FIELD[_ ]NOTES|\bthe (issue|brief)\b|\b(issue|brief)'s\b|\bissue[ -]?#?\d+|\bissues?/\d+", re.IGNORECASE)


def unshipped_references(root: Path) -> list[str]:
    hits = []
    for folder in SHIPPED:
        top = root / folder
        for path in ([top] if top.is_file() else sorted(top.rglob("*"))):
            if path.resolve() == THIS_FILE or "__pycache__" in path.parts or "node_modules" in path.parts:
                continue
            if path.suffix not in (".py", ".md", ".ipynb", ".json", ".js", ".html", ".txt", ".toml", ".sh", ".in", "") \
                    or not path.is_file():
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if UNSHIPPED.search(line):
                    hits.append(f"{path.relative_to(root)}:{n}: {line.strip()[:120]}")
    return hits


def test_the_unshipped_reference_check_finds_them(tmp_path):
    (tmp_path / "workbench").mkdir()
    (tmp_path / "workbench" / "a.py").write_text("x = 1  # see FIELD_NOTES\n# as the brief says\n# issue-11 trials\nok = 2\n")
    assert [h.split(":")[1] for h in unshipped_references(tmp_path)] == ["1", "2", "3"]


def test_no_shipped_file_cites_notes_or_trackers_that_do_not_ship():
    """Code, tests, notebooks, benchmarks, scripts and docs speak of the project alone: no working notes, issue
    numbers or briefs."""
    assert unshipped_references(REPO) == []


# The documentation and lint tools are installed with the training stack's test tools (scripts/setup.sh --test);
# `make test` runs these two there. The current stack's lock carries neither, and says so instead of failing.
TOOLS_HERE = {name: importlib.util.find_spec(name) is not None for name in ("mkdocs", "ruff")}


@pytest.mark.skipif(not TOOLS_HERE["mkdocs"], reason="mkdocs is installed with the training stack's test tools (make setup-test)")
def test_the_site_builds_strictly_with_the_generated_command_line_page(tmp_path):
    """`mkdocs build --strict` (what `make docs` runs): a broken link, a missing page or a page left out
    of the nav fails; the command-line page holds every sub-command's help, taken from the parser."""
    import argparse

    from workbench.cli.app import build_parser

    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1", "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cli = (site / "cli" / "index.html").read_text()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        assert f"workbench {name}" in cli, name
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in cli, f"workbench {name} {flag} is missing from the generated page"


def test_the_command_line_page_holds_what_the_parser_generates():
    """docs/cli.md is committed with its reference generated from the parser and the configs, so it reads right on
    the repository; a flag, a default or a help text changed without `python docs/hooks/generated.py` fails here."""
    spec = importlib.util.spec_from_file_location("generated", REPO / "docs" / "hooks" / "generated.py")
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    page = generated.CLI_PAGE.read_text()
    assert page == generated.with_blocks(page, generated.generated_blocks()), (
        "docs/cli.md is not what the code generates: run `python docs/hooks/generated.py` and commit it")
    assert "usage: workbench audit" in page and "| `budget_overall` |" in page


@pytest.mark.skipif(not TOOLS_HERE["ruff"], reason="ruff is installed with the training stack's test tools (make setup-test)")
def test_ruff_finds_nothing():
    """`make lint`: ruff check with the rules in pyproject.toml ([tool.ruff])."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _block(text: str, lang: str, starts: str) -> str:
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)
    (block,) = [b for b in blocks if b.lstrip().startswith(starts)]
    return block


@pytest.mark.heavy  # export, fusion and quantization of the tiny model: about a minute on 2 quiet cores
def test_the_readme_python_example_runs(tmp_path):
    """The README's Python example, as written, on the tiny model instead of MiniLM (the only change)."""
    code = _block(README.read_text(), "python", "from workbench")
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    assert 'workshop_model("minilm")' in code
    code = code.replace('workshop_model("minilm")', 'workshop_model("tiny")')
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dynamic" in done.stdout and (tmp_path / "runs" / "example" / "quantize" / "dynamic" / "quantize.json").exists()


@pytest.mark.heavy  # a tiny classifier trained, then the whole audit: over a minute on 2 cores
def test_the_readme_audit_example_runs(tmp_path):
    """The README's `workbench audit` command, with its model folder and file made here (a tiny
    classifier, labelled rows with a `source` column) and `--quick` added to keep it short."""
    import shlex

    import pandas as pd

    from helpers.audit_fixtures import make_rows, train_tiny_classifier

    from workbench.cli import main

    command = _block(README.read_text(), "bash", "workbench audit").replace("\\\n", " ")
    argv = shlex.split(command, comments=True)
    assert argv[:2] == ["workbench", "audit"]
    train_tiny_classifier(tmp_path / "my-classifier")
    rows = pd.DataFrame(make_rows(200, seed=1)).rename(columns={"review": "text", "sentiment": "label", "channel": "source"})
    rows.to_csv(tmp_path / "labelled.csv", index=False)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main([*argv[1:], "--quick"])
    finally:
        os.chdir(cwd)
    assert code in (0, 3), code
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert summary["verdict"]["exit_code"] == code
    assert any(s["name"].startswith("source") for s in summary["slices"]), [s["name"] for s in summary["slices"]]
