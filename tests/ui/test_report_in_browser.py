"""report.html, as a colleague gets it: opened from disk in headless Chromium with the network
cut off. It must render its plotly figures, log no console error, and load nothing from outside."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.labtools import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.ui
REPO = Path(__file__).resolve().parents[2]
INJECTED = "</script><script>window.__alerted=true</script>"


@pytest.fixture(scope="module")
def audit_report(tmp_path_factory) -> Path:
    from helpers.audit_fixtures import make_rows, train_tiny_classifier, write_csv

    from workbench.cli import main

    tmp = tmp_path_factory.mktemp("report-ui")
    model = train_tiny_classifier(tmp / "model")
    # one row whose slice value is markup: it shows in the slice table and in the figures' labels
    data = write_csv(tmp / "data.csv", make_rows(240, seed=3) + [{"review": "the film was <b>awful</b>", "sentiment": "negative",
                                                                  "channel": INJECTED, "id": 999}])
    out = tmp / "out"
    code = main(["audit", "--model", str(model), "--data", str(data), "--text-column", "review", "--label-column", "sentiment",
                 "--slice-column", "channel", "--presets", "dynamic", "static-minmax", "--out", str(out), "--quick",
                 "--budget-overall", "0.99", "--budget-slice", "0.99", "--min-speedup", "0"])  # the tiny model: accuracy only
    assert code == 0
    return out / "report.html"


def test_report_is_self_contained(audit_report):
    page = audit_report.read_text()
    srcs = re.findall(r"<script[^>]*\bsrc\s*=\s*['\"]?([^'\" >]+)", page, flags=re.I)
    links = re.findall(r"<link[^>]*>", page, flags=re.I)
    assert srcs == [] and links == [], (srcs, links)
    # plotly.js inlined exactly once (its source mentions cdn.plot.ly for map data it never loads here;
    # the browser test below proves that nothing is requested)
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    assert page.count(js[:400]) == 1 and page.count(js[-400:]) == 1
    assert page.count("Plotly.newPlot") >= 3
    # the user's values are escaped, not executed
    assert INJECTED not in page and "&lt;/script&gt;&lt;script&gt;window.__alerted=true" in page
    others = [p.name for p in audit_report.parent.iterdir() if p.suffix in (".js", ".css")]
    assert others == []


def test_report_renders_offline_in_chromium(audit_report, output_dir):
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"no chromium at {CHROMIUM}: run `make setup-test` (it installs Debian's chromium)")
    errors, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1300, "height": 1000}, offline=True)
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:", "blob:", "about:")) else None)
        try:
            page.goto(audit_report.as_uri())
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            n_plots = page.locator(".js-plotly-plot").count()
            verdict = page.locator("#verdict").inner_text()
            page.screenshot(path=str(output_dir / "report.png"), full_page=True)
            # each figure drew something: bars or markers inside its SVG
            drawn = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map(d => d.querySelectorAll('.point, .bars "
                                  "path, .scatterlayer path').length)")
            alerted = page.evaluate("() => window.__alerted === true")
        finally:
            context.close()
            browser.close()
    assert errors == [], errors
    assert requests == [], requests
    assert n_plots >= 3
    assert all(n > 0 for n in drawn), drawn
    # the verdict the page shows is summary.json's: a speed stated as measured, or, where the busy
    # check found other work on the CPUs while timing (another test process, a busy CI host), said so
    summary = json.loads((audit_report.parent / "summary.json").read_text())
    assert verdict.startswith("Verdict.") and " ".join(summary["verdict"]["text"].split())[:80] in " ".join(verdict.split())
    chosen = next(q for q in summary["quantization"] if q["name"] == summary["verdict"]["chosen"])
    if chosen["contended"]:
        assert "unmeasured speed" in verdict
    else:
        assert "faster" in verdict or "slower" in verdict
    assert not alerted
