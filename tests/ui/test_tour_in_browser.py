"""The tour notebook in JupyterLab, in headless Chromium: run all cells, press the Workbench's
Train button, wait for the loss curves to render, follow the steps (compare, export and fuse,
quantize: each button pressed, each figure waited for), screenshot.

Every wait is on an element or a text (Playwright's expect), never a fixed sleep.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.labtools import LabServer, set_parameters

pytestmark = pytest.mark.ui

TOUR = "00_tour.ipynb"


def test_tour_trains_and_steps_through_the_workbench(lab: LabServer, page, output_dir: Path) -> None:
    from playwright.sync_api import expect

    set_parameters(lab.root / TOUR, {"MODEL": "tiny", "PRESET": "quick", "MAX_STEPS": 6, "BACKENDS": ("eager", "ortmodule"),
                                     "N_BOOT": 200, "RUNS": str(lab.root / "runs")})
    page.goto(f"{lab.url}/lab/tree/{TOUR}")
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible()

    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()

    workbench = page.locator(".wb-workbench")
    expect(workbench).to_be_visible()
    # the environment check ran when the Workbench was built; the fine-tune step is open and ready
    expect(workbench.get_by_text("1. Environment — done")).to_be_visible()
    expect(workbench.get_by_text("3. Compare — waiting for a training run")).to_be_visible()
    train = page.locator(".wb-trainpanel")
    train_button = train.locator("button.wb-run")
    expect(train_button).to_be_visible()
    expect(train_button).to_be_enabled()
    page.screenshot(path=str(output_dir / "01-tour-before-training.png"))

    train_button.click()
    # the loss curves render as a plotly plot with one line per backend, then the run finishes
    plot = train.locator(".js-plotly-plot")
    expect(plot).to_be_visible()
    expect(train.locator(".wb-status")).to_contain_text("ortmodule ok (in ONNX Runtime)")
    expect(plot.locator(".scatterlayer .trace")).to_have_count(4)  # train + validation per backend
    expect(train.locator(".wb-runs")).to_be_visible()
    expect(train_button).to_be_enabled()
    expect(workbench.get_by_text("2. Fine-tune — done")).to_be_visible()
    plot.scroll_into_view_if_needed()
    page.screenshot(path=str(output_dir / "02-tour-after-training.png"))
    train.screenshot(path=str(output_dir / "03-train-panel.png"))

    # the next steps opened up: compare shows its ratio table and figure without retraining
    expect(workbench.get_by_text("3. Compare — done")).to_be_visible()
    expect(workbench.get_by_text("4. Export and fuse — ready")).to_be_visible()
    workbench.get_by_text("3. Compare — done").click()
    compare = page.locator(".wb-comparepanel")
    expect(compare.locator(".wb-ratios")).to_be_visible()
    expect(compare.locator(".js-plotly-plot")).to_be_visible()
    compare.screenshot(path=str(output_dir / "04-compare-panel.png"))

    # export and fuse the checkpoint just trained: the operator-count bars appear, the step is done
    workbench.get_by_text("4. Export and fuse — ready").click()
    graph = page.locator(".wb-graphpanel")
    graph_button = graph.locator("button.wb-run")
    expect(graph_button).to_be_enabled()
    graph_button.click()
    expect(graph.locator(".wb-status")).to_contain_text("all variants validated")
    expect(graph.locator(".wb-status")).to_contain_text("Attention 2")  # one per layer of the tiny BERT
    expect(graph.locator(".js-plotly-plot .trace").first).to_be_visible()
    expect(workbench.get_by_text("4. Export and fuse — done")).to_be_visible()
    graph.screenshot(path=str(output_dir / "05-graph-panel.png"))

    # quantize the fused graph: the slice-drift bars appear, the step is done
    workbench.get_by_text("5. Quantize — ready").click()
    quant = page.locator(".wb-quantpanel")
    quant_button = quant.locator("button.wb-run")
    expect(quant_button).to_be_enabled()
    quant_button.click()
    expect(quant.locator(".wb-status")).to_contain_text("x FP32 speed")
    expect(quant.locator(".js-plotly-plot .trace").first).to_be_visible()
    expect(workbench.get_by_text("5. Quantize — done")).to_be_visible()
    quant.screenshot(path=str(output_dir / "06-quant-panel.png"))

    # back to the fine-tune step: a long run, stopped from the browser while it trains
    workbench.get_by_text("2. Fine-tune — done").click()
    steps = train.locator("input[type=number]").first
    expect(steps).to_be_visible()
    steps.fill("5000")
    steps.press("Enter")
    expect(train_button).to_be_enabled()
    train_button.click()
    stop = train.locator("button.wb-stop")
    expect(stop).to_be_enabled()
    expect(train.get_by_text("/5000")).to_be_visible()  # the progress bar counts the long run's steps
    stop.click()
    expect(train.locator(".wb-status")).to_contain_text("eager stopped")
    expect(train.get_by_text("the result holds what was done")).to_be_visible()  # the progress line
    expect(train.locator(".wb-runs").get_by_text("stopped on request after")).to_be_visible()  # the run's own reason
    expect(train_button).to_be_enabled()
    expect(stop).to_be_disabled()
    train.screenshot(path=str(output_dir / "07-train-panel-stopped.png"))
