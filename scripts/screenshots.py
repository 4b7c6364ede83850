"""The documentation's pictures, made from a real run (``make screenshots``):

1. A MiniLM ``workbench demo`` run (the walkthrough ``make demo`` runs: every stage, about 10 minutes on 2
   quiet cores) writes a run folder under ``--runs``; ``--run runs/<time>-demo`` reuses one already made (make
   the demo once on a quiet machine, then shoot). A run of the tiny model, one whose speed figures were taken
   under load, or one whose fine-tune was timed one after the other is refused: the README shows this run.
2. Its ``report.html`` is opened from disk in headless Chromium, offline: ``report.png`` is the verdict and
   the quantization section (the sections between them folded away), ``report-slices.png`` the accuracy
   change by slice with each slice's interval.
3. JupyterLab (127.0.0.1, a temporary HOME, a copy of ``notebooks/``) runs the tour notebook and opens the run
   from its *saved run* list: ``workbench-lab.png`` is the fine-tune step (the loss curves of eager PyTorch and
   ORTModule, and the training verdict, which must be the like-for-like figure), ``panel-graph.png`` and
   ``panel-quant.png`` the Export-and-fuse and Quantize steps, all shown from the run without recomputing.
4. In the same JupyterLab, every other notebook runs top to bottom with small parameters (the tiny
   model, a few steps; notebook 07 MiniLM on a few queries) and its main panel is saved once it
   shows its result: ``docs/img/<notebook>.png``. Each notebook's second cell shows its picture
   (``workbench-lab.png`` for the tour), so a notebook shows what it does before it is run.

Each PNG carries the workbench version and the run's id in a ``tEXt`` chunk, and
``docs/img/manifest.json`` lists every picture with its SHA-256, the version, the run, its caption and,
for a notebook's picture, the notebook and its parameters. The captions name the machine (CPU model and
instruction sets, from the run's machine profile in ``summary.json``) and the run's date: written from the
run's files, as is the README's picture block (between its ``<!-- pictures`` markers), which this script
rewrites when ``--out`` is ``docs/img`` (elsewhere it writes ``README-pictures.md`` beside the pictures).
``tests/repo/test_docs.py`` checks that every picture the documentation names was made this way by the
current version, and that the README's captions are the manifest's.

``--quick`` shoots a ``workbench demo --quick`` run (the tiny model, about a minute) to try the pipeline
end to end; its pictures are refused for ``docs/img``. ``--readme-only`` shoots the README's three pictures
alone (also refused for ``docs/img``, whose manifest lists every picture). Chromium:
``$WORKBENCH_CHROMIUM`` or ``/usr/bin/chromium`` (``make setup-test``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from helpers.labtools import CHROMIUM, CHROMIUM_ARGS, LabServer, set_parameters  # noqa: E402
from picture_captions import (  # noqa: E402  (scripts/, beside this file)
    LIKE_FOR_LIKE,
    README_END,
    README_PICTURES,
    README_SHOWS,
    README_START,
    RunFacts,
    RunRefused,
    caption,
    notebook_caption,
    readme_block,
    readme_block_in,
    readme_shows,
    refusal,
    run_facts,
    this_machine,
    with_readme_block,
)

IMG = REPO / "docs" / "img"
MANIFEST = IMG / "manifest.json"
README = REPO / "README.md"
TOUR = "00_tour.ipynb"
VIEWPORT = {"width": 1400, "height": 1100}  # report.html: the verdict and the quantization table
LAB_VIEWPORT = {"width": 1400, "height": 1050}
TIMEOUT_MS = 180_000
NOTEBOOK_TIMEOUT_MS = 600_000  # one notebook, top to bottom (a guard: about a minute each on 2 quiet cores)


@dataclass(frozen=True)
class NotebookShot:
    """One notebook's picture: the small parameters it runs with and the panel that is shot."""

    panel: str  # the panel's CSS class (widgets.base.Panel adds ``wb-<class name>``)
    shows: str
    parameters: dict[str, Any] = field(default_factory=dict)


TINY_CHECKPOINT = {"MODEL": "tiny"}  # the workshop's checkpoint of the tiny model (fine-tuned once, in seconds)
NOTEBOOK_SHOTS: dict[str, NotebookShot] = {
    "01_finetune_ortmodule": NotebookShot(
        ".wb-trainpanel", "notebook 01: ORTModule fine-tuning, its loss curve and run table",
        {"MODEL": "tiny", "PRESET": "quick", "MAX_STEPS": 12}),
    "02_eager_vs_ortmodule": NotebookShot(
        ".wb-comparepanel", "notebook 02: eager against ORTModule, taking turns (verdict, ratios, loss curves)",
        {"MODEL": "tiny", "PRESET": "quick", "MAX_STEPS": 12}),
    "03_export_and_fusion": NotebookShot(
        ".wb-graphpanel", "notebook 03: export, validation, fusion and latency", dict(TINY_CHECKPOINT)),
    "04_quantization_drift": NotebookShot(
        ".wb-quantpanel", "notebook 04: INT8 against FP32 slice by slice, with the worst nodes kept in FP32",
        {**TINY_CHECKPOINT, "N_BOOT": 200, "MAX_EVAL": 256}),
    "05_audit_your_own_model": NotebookShot(
        ".wb-quantpanel", "notebook 05: the quantization audit of a model folder and a labelled file",
        {**TINY_CHECKPOINT, "N_BOOT": 200, "MAX_TRAIN": 256, "MAX_EVAL": 256}),
    "06_on_device_training": NotebookShot(
        ".wb-ondevicepanel", "notebook 06: on-device training beside PyTorch eager",
        {**TINY_CHECKPOINT, "TRAINABLE": "last", "STEPS": 12, "LR": 1e-3, "BATCH_SIZE": 8, "THREADS": 1,
         "MEASURE_MEMORY": False}),
    "07_quantize_embedding_model": NotebookShot(
        ".wb-embedquantpanel", "notebook 07: MiniLM's embeddings quantized, scored on retrieval",
        {"PRESETS": ("dynamic",), "MAX_QUERIES": 12, "MAX_DOCS": 120, "N_BOOT": 200, "TIME_SPEED": False}),
}
TOUR_PICTURE = "workbench-lab.png"  # the tour notebook's picture


def notebook_picture(stem: str) -> str:
    """The file name of the picture a notebook shows in its second cell."""
    return TOUR_PICTURE if stem == TOUR.removesuffix(".ipynb") else f"{stem}.png"


def png_with_text(data: bytes, text: dict[str, str]) -> bytes:
    """``data`` (a PNG) with one ``tEXt`` chunk per key inserted before ``IEND``."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[-12:-8] != b"\x00\x00\x00\x00" or data[-8:-4] != b"IEND":
        raise ValueError("not a PNG that ends in an IEND chunk")
    chunks = b""
    for key, value in text.items():
        body = key.encode("latin-1") + b"\x00" + value.encode("latin-1")
        chunks += struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF)
    return data[:-12] + chunks + data[-12:]


def png_text(data: bytes) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG, as a dict."""
    out, pos = {}, 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"tEXt":
            key, _, value = data[pos + 8:pos + 8 + length].partition(b"\x00")
            out[key.decode("latin-1")] = value.decode("latin-1")
        pos += 12 + length
    return out


def demo_run(runs: Path, quick: bool, home: Path) -> Path:
    """``workbench demo`` (``--quick``: the tiny model, with its own temporary home) into a new folder under
    ``runs``; the run folder."""
    env = {**os.environ, "WORKBENCH_HOME": str(home)} if quick else dict(os.environ)
    cmd = [sys.executable, "-m", "workbench.cli", "demo", *(["--quick"] if quick else []), "--runs", str(runs)]
    print("screenshots: " + " ".join(["workbench", *cmd[3:]]), flush=True)
    runs.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in runs.iterdir()}
    subprocess.run(cmd, cwd=REPO, env=env, check=True)
    made = sorted(p for p in runs.iterdir() if p.is_dir() and p.name not in before)
    if len(made) != 1:
        raise SystemExit(f"screenshots: the demo made {len(made)} run folders in {runs}, expected one: {[p.name for p in made]}")
    return made[0]


# report.html's sections between the verdict's heading part and the quantization section, folded away for report.png
FOLD_BETWEEN = """() => {
  let hide = false;
  for (const el of Array.from(document.body.children)) {
    if (el.id === 'environment') hide = true;
    if (el.id === 'quantization') hide = false;
    if (hide) el.style.display = 'none';
  }
}"""


def shoot_report(browser, report: Path, outs: dict[str, Path]) -> None:
    """``report.png``: the verdict and the quantization table; ``report-slices.png``: the accuracy change by slice
    (the overview figure of every variant, with each slice's interval)."""
    context = browser.new_context(viewport=VIEWPORT, offline=True)
    page = context.new_page()
    try:
        page.goto(report.resolve().as_uri())
        page.wait_for_selector("#fig-drift .main-svg", timeout=TIMEOUT_MS)
        page.evaluate(FOLD_BETWEEN)
        page.evaluate("() => window.scrollTo(0, 0)")
        page.wait_for_timeout(300)
        page.screenshot(path=str(outs["report.png"]))
        page.evaluate("() => { for (const el of document.body.children) el.style.display = ''; }")
        page.locator("#fig-drift").scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.locator("#fig-drift").screenshot(path=str(outs["report-slices.png"]))
    finally:
        context.close()


def _to_top(locator) -> None:
    """Scroll the notebook so that ``locator`` starts at the top of the window (a panel taller than
    the window cannot be shot as an element: the notebook's own scrolling clips it)."""
    locator.evaluate("e => e.scrollIntoView({block: 'start'})")


def _shut_down_kernels(url: str) -> None:
    """Stop the server's kernels (one notebook's kernel at a time holds memory)."""
    with urllib.request.urlopen(f"{url}/api/kernels", timeout=30) as r:
        kernels = json.load(r)
    for kernel in kernels:
        urllib.request.urlopen(urllib.request.Request(f"{url}/api/kernels/{kernel['id']}", method="DELETE"), timeout=30).close()


def shoot_notebook(page, url: str, stem: str, shot: NotebookShot, out: Path) -> None:
    """Open ``stem`` (its parameters already injected), run every cell, wait for the last cell (the
    exercise check, which says "not yet") and for the panel's figure, and save the panel's first screen."""
    from playwright.sync_api import expect

    _shut_down_kernels(url)
    page.goto(f"{url}/lab/tree/{stem}.ipynb?reset")  # ?reset: only this notebook open
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    expect(page.get_by_text(": not yet.").or_(errors).first).to_be_visible(timeout=NOTEBOOK_TIMEOUT_MS)  # the last cell ran, or one failed
    if errors.count():
        raise SystemExit(f"screenshots: {stem} wrote to stderr or failed: {errors.first.inner_text()[:2000]}")
    panel = page.locator(shot.panel).first
    expect(panel.locator(".wb-status")).not_to_be_empty()
    expect(panel.locator(".js-plotly-plot .main-svg").first).to_be_visible()
    expect(panel.locator(".js-plotly-plot .trace")).not_to_have_count(0)  # a figure with data (a trace may be hidden: zero bars)
    page.mouse.move(0, 0)
    _to_top(panel)
    page.screenshot(path=str(out))
    print(f"screenshots: {stem}: {panel.locator('.wb-status').inner_text()[:160]}", flush=True)


def tour_parameters(run: Path) -> dict[str, Any]:
    """The tour's parameters: its saved-run list is the folder holding the run (opened with the Open button once the
    Workbench is on screen, as a person does; nothing is recomputed)."""
    return {"RUNS": str(run.resolve().parent)}


def show_step(page, workbench, title: str, panel: str, run_name: str):
    """Open the Workbench's step ``title`` (unless it is open: a click on an open step's title closes it), then open
    the run from the saved-run list with the step on screen: a figure drawn into a closed step reaches the browser
    without its traces, so each step is shown open while the run's results arrive. The step's panel."""
    from playwright.sync_api import expect

    shown = page.locator(panel)
    if not shown.is_visible():
        workbench.get_by_text(title).click()
    expect(shown).to_be_visible()
    workbench.locator("select").first.select_option(label=run_name)
    workbench.get_by_role("button", name="Open").click()
    expect(shown.locator(".wb-status")).to_contain_text("opened:")
    expect(shown.locator(".js-plotly-plot .trace").first).to_be_visible()
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible()  # every panel drawn
    return shown


def shoot_tour(page, url: str, facts: RunFacts, shots: dict[str, Path]) -> None:
    """The tour with the run opened from its saved-run list: the fine-tune step (loss curves and the training
    verdict), then the Export-and-fuse and Quantize steps, each from the run's saved results."""
    from playwright.sync_api import expect

    page.goto(f"{url}/lab/tree/{TOUR}")
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()
    workbench = page.locator(".wb-workbench")
    expect(workbench.get_by_text("2. Fine-tune —")).to_be_visible()
    train = show_step(page, workbench, "2. Fine-tune —", ".wb-trainpanel", facts.run)
    expect(train.locator(".wb-status")).to_contain_text("ortmodule ok")
    verdict = train.locator(".wb-train-verdict").first
    expect(verdict).to_contain_text("ORTModule")
    said = verdict.inner_text()
    if not facts.quick and not said.removeprefix("Verdict:").strip().lower().startswith(LIKE_FOR_LIKE):
        raise SystemExit(f"screenshots: the Lab's training verdict is not the like-for-like figure: {said[:300]}")
    page.mouse.move(0, 0)  # no hover label over the curves
    _to_top(train.locator(".wb-status"))
    page.screenshot(path=str(shots["workbench-lab.png"]))
    print(f"screenshots: the tour's training verdict: {said[:200]}", flush=True)
    for title, panel, name in (("4. Export and fuse —", ".wb-graphpanel", "panel-graph.png"),
                               ("5. Quantize —", ".wb-quantpanel", "panel-quant.png")):
        if name not in shots:
            continue
        shown = show_step(page, workbench, title, panel, facts.run)
        page.mouse.move(0, 0)
        _to_top(shown.locator(".wb-status"))
        page.screenshot(path=str(shots[name]))


def shoot_lab(browser, tmp: Path, home: Path, run: Path, facts: RunFacts, shots: dict[str, Path]) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    root = tmp / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    set_parameters(root / TOUR, tour_parameters(run))
    for stem, shot in NOTEBOOK_SHOTS.items():
        set_parameters(root / f"{stem}.ipynb", {**shot.parameters, "RUNS": str(tmp / "lab-runs")})
    lab_home = tmp / "lab-home"
    lab_home.mkdir()
    server = LabServer(root, lab_home, tmp / "jupyterlab.log", {"WORKBENCH_RUNS": str(tmp / "lab-runs"),
                                                                "WORKBENCH_HOME": str(home)})
    context = None
    try:
        server.wait_ready()
        context = browser.new_context(viewport=LAB_VIEWPORT)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        try:
            shoot_tour(page, server.url, facts, shots)
            for stem, shot in NOTEBOOK_SHOTS.items():
                if notebook_picture(stem) in shots:
                    shoot_notebook(page, server.url, stem, shot, shots[notebook_picture(stem)])
        except BaseException:
            failed = Path(tempfile.gettempdir()) / "wb-screenshots-failed.png"
            page.screenshot(path=str(failed))
            print(f"screenshots: what JupyterLab showed when it failed: {failed}", file=sys.stderr, flush=True)
            raise
    finally:
        if context is not None:
            context.close()
        server.stop()


def _jsonable(parameters: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in parameters.items()}


RUN_SHOWS = {  # the pictures of the run (the README's three and the tour's other two steps)
    **README_SHOWS,
    "panel-graph.png": "notebook 00_tour with the run opened: the Export-and-fuse step",
    "panel-quant.png": "notebook 00_tour with the run opened: the Quantize step",
}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(IMG), help="folder for the PNGs and manifest.json (default docs/img)")
    parser.add_argument("--run", help="a run folder `workbench demo` already wrote (runs/<time>-demo): shoot it instead of "
                                      "making the demo again (make it once on a quiet machine)")
    parser.add_argument("--runs", default=os.environ.get("WORKBENCH_RUNS", "runs"),
                        help="where a new demo run goes when --run is not given (default $WORKBENCH_RUNS or runs)")
    parser.add_argument("--quick", action="store_true", help="try the pipeline: `workbench demo --quick` (the tiny model) "
                                                             "into a temporary folder, or --run such a run; refused for docs/img")
    parser.add_argument("--readme-only", action="store_true", help="only the README's three pictures (refused for docs/img, "
                                                                   "whose manifest lists every picture)")
    return parser.parse_args(argv)


def bad_input(args) -> str:
    """One line naming the value, the reason and the fix; "" when the arguments are good."""
    out = Path(args.out).resolve()
    if out == IMG.resolve() and args.quick:
        return ("screenshots: --quick with --out docs/img: the tiny model's pictures are not the documentation's; give --out "
                "a scratch folder (e.g. --out /tmp/shots), or drop --quick")
    if out == IMG.resolve() and args.readme_only:
        return ("screenshots: --readme-only with --out docs/img: its manifest lists every picture of one run; give --out a "
                "scratch folder, or drop --readme-only")
    if out == IMG.resolve() and readme_block_in(README.read_text()) is None:
        return (f"screenshots: README.md has no picture block to write the captions into: put the lines {README_START!r} "
                f"and {README_END!r} around its pictures")
    if args.run is not None and not Path(args.run).is_dir():
        return f"screenshots: --run {args.run} is not a folder: give a run folder `workbench demo` wrote (runs/<time>-demo)"
    if not CHROMIUM.exists():
        return (f"screenshots: no chromium at {CHROMIUM}: run `make setup-test` (it installs Debian's chromium) "
                "or set WORKBENCH_CHROMIUM")
    return ""


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def shown_path(run: Path) -> str:
    """The run folder as the manifest records it: relative to the repository when it lies in it."""
    return str(run.resolve().relative_to(REPO)) if run.resolve().is_relative_to(REPO) else str(run.resolve())


def main(argv=None) -> int:
    args = parse_args(argv)
    if (why := bad_input(args)):
        print(why, file=sys.stderr)
        return 2
    import workbench
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wb-screenshots-") as t:
        tmp = Path(t)
        home = tmp / "home"
        try:
            run = Path(args.run) if args.run else demo_run(tmp / "runs" if args.quick else Path(args.runs).resolve(), args.quick, home)
            facts = run_facts(run)
            why = None if args.quick else refusal(facts, json.loads((run / "summary.json").read_text()))
        except (RunRefused, subprocess.CalledProcessError) as exc:
            print(f"screenshots: {exc}", file=sys.stderr)
            return 2
        if why:
            print(f"screenshots: {why}", file=sys.stderr)
            return 2
        run_id = f"{run.name} ({facts.written_utc})"
        names = [name for name, _, _ in README_PICTURES]
        if not args.readme_only:
            names += ["panel-graph.png", "panel-quant.png", *(notebook_picture(stem) for stem in NOTEBOOK_SHOTS)]
        raw = {name: tmp / name for name in names}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                shoot_report(browser, run / "report.html", raw)
                shoot_lab(browser, tmp, home, run, facts, raw)
            finally:
                browser.close()
        made = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        machine_now = this_machine()
        images = {}
        for name, path in raw.items():
            data = png_with_text(path.read_bytes(), {"workbench-version": workbench.__version__, "workbench-run": run_id})
            write_atomic(out / name, data)
            stem = next((stem for stem in NOTEBOOK_SHOTS if notebook_picture(stem) == name), None)
            if stem is None:
                shows = readme_shows(name, facts) if name in README_SHOWS else RUN_SHOWS[name]
                images[name] = {"sha256": hashlib.sha256(data).hexdigest(), "shows": shows, "caption": caption(shows, facts)}
            else:
                shot = NOTEBOOK_SHOTS[stem]
                images[name] = {"sha256": hashlib.sha256(data).hexdigest(), "shows": shot.shows,
                                "caption": notebook_caption(shot.shows, _jsonable(shot.parameters), machine_now, made[:10]),
                                "notebook": stem, "parameters": _jsonable(shot.parameters)}
            if name == TOUR_PICTURE:
                images[name].update(notebook=TOUR.removesuffix(".ipynb"), parameters={"RUNS": shown_path(run.parent),
                                                                                       "opened": run.name})
    manifest = {
        "workbench_version": workbench.__version__,
        "run": run_id,
        "run_facts": facts.as_dict(),
        "made_by": "make screenshots (scripts/screenshots.py)",
        "demo": "workbench demo --quick" if facts.quick else "workbench demo",
        "tour_parameters": {"RUNS": shown_path(run.parent), "opened": run.name},
        "created_utc": made,
        "images": images,
    }
    write_atomic(out / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
    block = readme_block(manifest)
    if out.resolve() == IMG.resolve():
        write_atomic(README, with_readme_block(README.read_text(), block).encode())
        where = "README.md's picture block"
    else:
        write_atomic(out / "README-pictures.md", (block + "\n").encode())
        where = out / "README-pictures.md"
    print(f"screenshots: {len(images)} pictures of {run.name} in {out}, captions in {where} "
          f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
