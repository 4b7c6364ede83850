"""Fixtures for the browser tests: JupyterLab over a copy of notebooks/, and a Playwright page on
Debian's chromium (see labtools.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from helpers.labtools import CHROMIUM, CHROMIUM_ARGS, NOTEBOOKS, LabServer


@pytest.fixture
def lab(tmp_path: Path, output_dir: Path, listening) -> Iterator[LabServer]:
    """JupyterLab over a copy of notebooks/ (Lab autosaves outputs; the originals stay clean)."""
    if not CHROMIUM.exists():
        pytest.fail(f"no chromium at {CHROMIUM}: run `make setup-test` (it installs Debian's chromium)")
    root = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    home = tmp_path / "home"
    home.mkdir()
    server = LabServer(root, home, output_dir / "jupyterlab.log", {"WORKBENCH_RUNS": str(tmp_path / "runs")})
    try:
        server.wait_ready()
        sockets = listening(server.proc.pid)
        assert {ip for ip, _ in sockets} == {"127.0.0.1"}, f"JupyterLab listens beyond 127.0.0.1: {sockets}"
        yield server
    finally:
        server.stop()


@pytest.fixture
def page(output_dir: Path) -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=120_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = context.new_page()
        pg.set_default_timeout(120_000)
        console: list[str] = []
        pg.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        try:
            yield pg
        finally:
            pg.screenshot(path=str(output_dir / "last-state.png"))  # what the page showed at the end (pass or fail)
            (output_dir / "browser-console.log").write_text("\n".join(console))
            context.close()
            browser.close()
