"""The documentation's pictures, made from a real run (``make screenshots``):

1. ``workbench demo --quick`` (the tiny model, every stage, about a minute) writes a run folder; its
   ``report.html`` is opened from disk in headless Chromium, offline, and its quantization section saved as
   ``docs/img/report.png``.
2. JupyterLab (127.0.0.1, a temporary HOME, a copy of ``notebooks/``) runs the tour notebook with
   small parameters; the Workbench's Train, Export-and-fuse and Quantize buttons are pressed and
   each panel is saved once it has drawn its figure: ``workbench-lab.png`` (JupyterLab with the
   Workbench after training), ``panel-graph.png``, ``panel-quant.png``.
3. In the same JupyterLab, every other notebook runs top to bottom with small parameters (the tiny
   model, a few steps; notebook 07 MiniLM on a few queries) and its main panel is saved once it
   shows its result: ``docs/img/<notebook>.png``. Each notebook's second cell shows its picture
   (``workbench-lab.png`` for the tour), so a notebook shows what it does before it is run.

Each PNG carries the workbench version and the run's id in a ``tEXt`` chunk, and
``docs/img/manifest.json`` lists every picture with its SHA-256, the version, the run and, for a
notebook's picture, the notebook and its parameters;
``tests/repo/test_docs.py`` checks that every picture the documentation names was made this way by
the current version. Chromium: ``$WORKBENCH_CHROMIUM`` or ``/usr/bin/chromium`` (``make setup-test``).
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

IMG = REPO / "docs" / "img"
MANIFEST = IMG / "manifest.json"
TOUR = "00_tour.ipynb"
TOUR_PARAMETERS = {"MODEL": "tiny", "PRESET": "quick", "MAX_STEPS": 12, "BACKENDS": ("eager", "ortmodule"), "N_BOOT": 200}
VIEWPORT = {"width": 1400, "height": 900}  # report.html's first screen
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


def quick_run(runs: Path, home: Path) -> Path:
    """``workbench demo --quick`` into ``runs``; the run folder."""
    env = {**os.environ, "WORKBENCH_HOME": str(home)}
    cmd = [sys.executable, "-m", "workbench.cli", "demo", "--quick", "--runs", str(runs)]
    print("screenshots: " + " ".join(["workbench", *cmd[3:]]), flush=True)
    subprocess.run(cmd, cwd=REPO, env=env, check=True)
    (run,) = [p for p in runs.iterdir() if p.is_dir()]
    if not (run / "report.html").exists():
        raise SystemExit(f"screenshots: the demo wrote no report.html in {run}")
    return run


def shoot_report(browser, report: Path, out: Path) -> None:
    context = browser.new_context(viewport=VIEWPORT, offline=True)
    page = context.new_page()
    try:
        page.goto(report.resolve().as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
        # the quantization section at the top of the window: each INT8 variant's speed (with its interval)
        # and accuracy against FP32, what the verdict above it is drawn from
        _to_top(page.locator("#quantization"))
        page.wait_for_timeout(300)
        page.screenshot(path=str(out))
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


def shoot_lab(browser, tmp: Path, home: Path, shots: dict[str, Path]) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    root = tmp / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    set_parameters(root / TOUR, {**TOUR_PARAMETERS, "RUNS": str(tmp / "lab-runs")})
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
        page.goto(f"{server.url}/lab/tree/{TOUR}")
        expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()

        workbench = page.locator(".wb-workbench")
        train = page.locator(".wb-trainpanel")
        button = train.locator("button.wb-run")
        expect(button).to_be_enabled()
        button.click()
        expect(train.locator(".wb-status")).to_contain_text("ortmodule ok")
        expect(train.locator(".js-plotly-plot .scatterlayer .trace")).to_have_count(4)
        expect(workbench.get_by_text("2. Fine-tune — done")).to_be_visible()
        page.mouse.move(0, 0)  # no hover label over the curves
        _to_top(train)
        page.screenshot(path=str(shots["workbench-lab.png"]))

        workbench.get_by_text("4. Export and fuse — ready").click()
        graph = page.locator(".wb-graphpanel")
        graph.locator("button.wb-run").click()
        expect(graph.locator(".wb-status")).to_contain_text("all variants validated")
        expect(graph.locator(".js-plotly-plot .trace").first).to_be_visible()
        page.mouse.move(0, 0)
        _to_top(graph)
        page.screenshot(path=str(shots["panel-graph.png"]))

        workbench.get_by_text("5. Quantize — ready").click()
        quant = page.locator(".wb-quantpanel")
        quant.locator("button.wb-run").click()
        expect(quant.locator(".wb-status")).to_contain_text("x FP32 speed")
        expect(quant.locator(".js-plotly-plot .trace").first).to_be_visible()
        page.mouse.move(0, 0)
        _to_top(quant.locator(".wb-status"))
        page.screenshot(path=str(shots["panel-quant.png"]))

        for stem, shot in NOTEBOOK_SHOTS.items():
            shoot_notebook(page, server.url, stem, shot, shots[notebook_picture(stem)])
    finally:
        if context is not None:
            context.close()
        server.stop()


def _jsonable(parameters: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in parameters.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(IMG), help="folder for the PNGs and manifest.json (default docs/img)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"screenshots: no chromium at {CHROMIUM}: run `make setup-test` (it installs Debian's chromium) "
              "or set WORKBENCH_CHROMIUM", file=sys.stderr)
        return 2
    import workbench
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wb-screenshots-") as t:
        tmp = Path(t)
        home = tmp / "home"
        run = quick_run(tmp / "runs", home)
        summary = json.loads((run / "summary.json").read_text())
        run_id = f"{run.name} ({summary.get('created_utc', '')})"
        names = ["report.png", "workbench-lab.png", "panel-graph.png", "panel-quant.png", *map(notebook_picture, NOTEBOOK_SHOTS)]
        raw = {name: tmp / name for name in names}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                shoot_report(browser, run / "report.html", raw["report.png"])
                shoot_lab(browser, tmp, home, raw)
            finally:
                browser.close()
        shows = {
            "report.png": "report.html of `workbench demo --quick`, its quantization section",
            "workbench-lab.png": "JupyterLab, notebook 00_tour: the Workbench after the fine-tune step",
            "panel-graph.png": "notebook 00_tour: the Export-and-fuse step",
            "panel-quant.png": "notebook 00_tour: the Quantize step",
            **{notebook_picture(stem): shot.shows for stem, shot in NOTEBOOK_SHOTS.items()},
        }
        notebooks = {notebook_picture(stem): (stem, shot.parameters) for stem, shot in NOTEBOOK_SHOTS.items()}
        notebooks[TOUR_PICTURE] = (TOUR.removesuffix(".ipynb"), TOUR_PARAMETERS)
        images = {}
        for name, path in raw.items():
            data = png_with_text(path.read_bytes(), {"workbench-version": workbench.__version__, "workbench-run": run_id})
            (out / name).write_bytes(data)
            images[name] = {"sha256": hashlib.sha256(data).hexdigest(), "shows": shows[name]}
            if name in notebooks:
                stem, parameters = notebooks[name]
                images[name].update(notebook=stem, parameters=_jsonable(parameters))
    manifest = {
        "workbench_version": workbench.__version__,
        "run": run_id,
        "made_by": "make screenshots (scripts/screenshots.py)",
        "demo": "workbench demo --quick",
        "tour_parameters": _jsonable(TOUR_PARAMETERS),
        "created_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "images": images,
    }
    tmp_manifest = out / ".manifest.json.tmp"
    tmp_manifest.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp_manifest, out / "manifest.json")
    print(f"screenshots: {len(images)} pictures in {out} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
