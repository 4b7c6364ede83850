"""The documentation's pictures, made from a real run (``make screenshots``):

1. ``workbench demo --quick`` (the tiny model, every stage, about a minute) writes a run folder; its
   ``report.html`` is opened from disk in headless Chromium, offline, and its first screen saved as
   ``docs/img/report.png``.
2. JupyterLab (127.0.0.1, a temporary HOME, a copy of ``notebooks/``) runs the tour notebook with
   small parameters; the Workbench's Train, Export-and-fuse and Quantize buttons are pressed and
   each panel is saved once it has drawn its figure: ``workbench-lab.png`` (JupyterLab with the
   Workbench after training), ``panel-graph.png``, ``panel-quant.png``.

Each PNG carries the workbench version and the run's id in a ``tEXt`` chunk, and
``docs/img/manifest.json`` lists every picture with its SHA-256, the version and the run;
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
import zlib
from pathlib import Path

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
        page.screenshot(path=str(out))
    finally:
        context.close()


def _to_top(locator) -> None:
    """Scroll the notebook so that ``locator`` starts at the top of the window (a panel taller than
    the window cannot be shot as an element: the notebook's own scrolling clips it)."""
    locator.evaluate("e => e.scrollIntoView({block: 'start'})")


def shoot_lab(browser, tmp: Path, home: Path, shots: dict[str, Path]) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    root = tmp / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    set_parameters(root / TOUR, {**TOUR_PARAMETERS, "RUNS": str(tmp / "lab-runs")})
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
    finally:
        if context is not None:
            context.close()
        server.stop()


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
        raw = {name: tmp / name for name in ("report.png", "workbench-lab.png", "panel-graph.png", "panel-quant.png")}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                shoot_report(browser, run / "report.html", raw["report.png"])
                shoot_lab(browser, tmp, home, raw)
            finally:
                browser.close()
        shows = {
            "report.png": "report.html of `workbench demo --quick`, first screen",
            "workbench-lab.png": "JupyterLab, notebook 00_tour: the Workbench after the fine-tune step",
            "panel-graph.png": "notebook 00_tour: the Export-and-fuse step",
            "panel-quant.png": "notebook 00_tour: the Quantize step",
        }
        images = {}
        for name, path in raw.items():
            data = png_with_text(path.read_bytes(), {"workbench-version": workbench.__version__, "workbench-run": run_id})
            (out / name).write_bytes(data)
            images[name] = {"sha256": hashlib.sha256(data).hexdigest(), "shows": shows[name]}
    manifest = {
        "workbench_version": workbench.__version__,
        "run": run_id,
        "made_by": "make screenshots (scripts/screenshots.py)",
        "demo": "workbench demo --quick",
        "tour_parameters": {k: list(v) if isinstance(v, tuple) else v for k, v in TOUR_PARAMETERS.items()},
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
