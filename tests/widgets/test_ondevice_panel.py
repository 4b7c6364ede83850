"""OnDevicePanel without a browser: train on the device beside PyTorch, figures and tables from the
result, bad options, an error shown in the panel that keeps working."""

from __future__ import annotations

import pytest

from widgets import OnDevicePanel, PanelInputError
from workbench.ondevice import OnDeviceResult


@pytest.fixture(scope="module")
def panel(tmp_path_factory, quick_data) -> OnDevicePanel:
    p = OnDevicePanel(data=quick_data, steps=4, threads=1, measure_memory=False, background=False,
                      run_dir=tmp_path_factory.mktemp("ondevice-panel"))
    p.set_values(trainable="last")
    p.run()
    return p


def test_panel_trains_and_draws_both_curves(panel):
    r = panel.result
    assert isinstance(r, OnDeviceResult) and r.loss_parity and r.artifacts.trainable.value == "last"
    names = [t.name for t in panel.figure.data]
    assert names[:2] == ["PyTorch eager", "onnxruntime.training.api"]
    assert list(panel.figure.data[1].y) == r.ondevice_losses and list(panel.figure.data[0].y) == r.pytorch_losses
    assert panel.figure.data[3].y[0] == r.tolerance  # the tolerance line under the difference
    assert [b.name for b in panel.cost_figure.data] or len(panel.cost_figure.data) == 1
    assert list(panel.cost_figure.data[0].y) == [r.ondevice.median_step_ms, r.pytorch.median_step_ms]
    html = panel.results_html.value
    for what in ("training_model.onnx", "optimizer_model.onnx", "checkpoint", "agree", "passed", "workbench fuse"):
        assert what in html
    assert "curves agree" in panel.status.value and panel.error is None
    # progress went through the panel's bar: its steps set the bar's length, and it ended full and green
    bar = panel.progress.bar
    assert bar.max == 4 and bar.value == 4 and bar.bar_style == "success", (bar.max, bar.value, bar.bar_style)


def test_panel_links_the_runs_web_page_served_on_127_0_0_1(panel):
    import urllib.request

    r = panel.result
    server = panel.page_server
    assert r.web_page is not None and server is not None
    assert server.httpd.server_address[0] == "127.0.0.1" and server.url.startswith("http://127.0.0.1:")
    link = panel.page_html.value
    assert f"href='{server.url}'" in link and "Open the on-device page" in link
    assert f"workbench ondevice import {server.run_dir}" in link
    with urllib.request.urlopen(server.url, timeout=30) as resp:  # the link answers with the run's page
        assert resp.status == 200 and b"app.js" in resp.read()
    panel.stop_page()
    assert panel.page_server is None


def test_bad_options_and_errors_keep_the_panel_usable(tmp_path, quick_data):
    with pytest.raises(TypeError, match="steps"):
        OnDevicePanel(step=3)
    with pytest.raises(PanelInputError, match="trainable must be one of"):
        OnDevicePanel(trainable="layers")
    p = OnDevicePanel(data=quick_data, steps=2, threads=1, measure_memory=False, background=False, run_dir=tmp_path)
    p.set_values(trainable="last", last_n_layers=7)
    with pytest.raises(Exception, match="last_n_layers is 7 but the model has 2 encoder layers"):
        p.run()
    assert p.error is not None and "last_n_layers is 7" in p.error_box.value and p.result is None
    assert not p.run_button.disabled  # usable again
    p.set_values(trainable="head", last_n_layers=1)
    assert p.run().loss_parity and p.error is None
    p.stop_page()
