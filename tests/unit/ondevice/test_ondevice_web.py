"""The on-device web page without a browser: the page's files, the learning rate baked into
its optimizer graph (proved with Python's onnxruntime.training.api), the import of a parameter
buffer, bad files, --no-web, a missing onnxruntime-web, and the server's address and MIME types.
tests/ui/test_ondevice_page.py trains the page in Chromium."""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from helpers.ondevice_fixtures import LR, STEPS, logits_of, ort_losses, page_run, read_page_batches

from workbench.cli import main  # noqa: E402
from workbench.ondevice import OnDeviceError, load_ondevice  # noqa: E402
from workbench.ondevice import web  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory, quick_data):
    return page_run(tmp_path_factory.mktemp("ondevice-web") / "run", quick_data)


def test_the_page_is_written_beside_the_artifacts(run, quick_data):
    from workbench.ondevice import OnDeviceConfig, load_ondevice_model
    from workbench.ondevice.data import make_batches

    result = load_ondevice(run)
    page = run / "web"
    assert Path(result.web_page) == (page / "index.html").resolve() and str(page / "index.html") in result.web_note
    for name in ("index.html", "app.js", "config.json", "batches.bin", "optimizer_model.onnx",
                 "ort/ort.training.wasm.min.js", "ort/ort-training-wasm-simd-threaded.mjs",
                 "ort/ort-training-wasm-simd-threaded.wasm"):
        assert (page / name).is_file() and (page / name).stat().st_size > 0, name
    # onnxruntime-web itself, copied from web/node_modules (the lock file's version), nothing from a CDN
    assert (page / "ort" / "ort.training.wasm.min.js").read_bytes() == (web.ORT_WEB_DIST / "ort.training.wasm.min.js").read_bytes()
    html, js = (page / "index.html").read_text(), (page / "app.js").read_text()
    assert "http://" not in html + js and "https://" not in html + js
    assert 'src="ort/ort.training.wasm.min.js"' in html and "TrainingSession.create" in js
    assert "getContiguousParameters(true)" in js
    cfg = json.loads((page / "config.json").read_text())
    assert cfg["lr"] == LR and cfg["steps"] == STEPS == len(cfg["train"]) and cfg["batch_size"] == 8 and cfg["seed"] == 0
    assert cfg["ort_web_version"] == "1.19.2" and cfg["class_names"] == list(result.class_names)
    assert cfg["batches_sha256"] == hashlib.sha256((page / "batches.bin").read_bytes()).hexdigest()
    # the page's training batches are exactly the ones Python trained on; eval batches hold the eval split
    train, evals = read_page_batches(page / "config.json", page / "batches.bin")
    ocfg = OnDeviceConfig.quick(trainable="last", steps=STEPS, lr=LR)
    loaded = load_ondevice_model("tiny", ocfg, list(result.class_names))
    expected = make_batches(loaded, quick_data["train"], ocfg)
    assert len(train) == len(expected) == STEPS
    for got, want in zip(train, expected):
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    split = quick_data["validation"] if "validation" in quick_data else quick_data["test"]
    assert sum(len(b["labels"]) for b in evals) == min(len(split), web.EVAL_EXAMPLES)
    assert [int(x) for b in evals for x in b["labels"]] == [int(x) for x in split["label"][: web.EVAL_EXAMPLES]]


def test_the_learning_rate_is_baked_into_the_pages_optimizer_graph(run):
    import onnx
    from onnx import numpy_helper

    baked = onnx.load(str(run / "web" / "optimizer_model.onnx"))
    own = onnx.load(str(run / "artifacts" / "optimizer_model.onnx"))
    # the input stays declared (the runtime checks the inputs by name) ...
    assert [i.name for i in baked.graph.input] == [i.name for i in own.graph.input][:6] == [
        "learning_rate", "step", "params", "gradients", "first_order_moments", "second_order_moments"]
    # ... but the AdamW node reads the constant, which holds the user's rate
    (adamw,) = [n for n in baked.graph.node if n.op_type == "AdamWOptimizer"]
    assert adamw.input[0] == web.BAKED_LR
    (init,) = [i for i in baked.graph.initializer if i.name == web.BAKED_LR]
    assert numpy_helper.to_array(init).tolist() == [np.float32(LR)]
    assert web.baked_learning_rate(run / "web" / "optimizer_model.onnx") == pytest.approx(LR, rel=1e-7)
    assert web.baked_learning_rate(run / "artifacts" / "optimizer_model.onnx") is None  # the run's own graph is untouched
    (own_adamw,) = [n for n in own.graph.node if n.op_type == "AdamWOptimizer"]
    assert own_adamw.input[0] == "learning_rate"


def test_the_baked_graph_trains_at_the_users_rate_whatever_is_fed(run):
    """What the page's runtime does (feeds 1e-3, onnxruntime-web 1.19.2 has no setter), in Python:
    with the page's graph the losses are the stage's at 3e-3; with the artifacts' own graph they are not."""
    result = load_ondevice(run)
    baked = ort_losses(run, run / "web" / "optimizer_model.onnx", fed_lr=1e-3)
    assert len(baked) == STEPS
    np.testing.assert_allclose(baked, result.ondevice_losses, rtol=1e-6, atol=0)
    plain = ort_losses(run, run / "artifacts" / "optimizer_model.onnx", fed_lr=1e-3)
    # the defect the baking removes is far outside the page test's 1e-5 relative tolerance
    assert max(abs(a - b) / abs(b) for a, b in zip(plain, result.ondevice_losses)) > 1e-3


def test_a_graph_whose_rate_is_not_the_adamw_input_is_refused(run, tmp_path):
    import onnx
    from onnx import helper

    proto = onnx.load(str(run / "artifacts" / "optimizer_model.onnx"))
    proto.graph.node.append(helper.make_node("Identity", ["learning_rate"], ["lr_copy"]))
    proto.graph.output.append(helper.make_tensor_value_info("lr_copy", onnx.TensorProto.FLOAT, [1]))
    bad = tmp_path / "opt.onnx"
    onnx.save(proto, str(bad))
    with pytest.raises(OnDeviceError, match="not only as the AdamWOptimizer's rate"):
        web.bake_learning_rate(bad, tmp_path / "out.onnx", LR)
    assert not (tmp_path / "out.onnx").exists()


def _python_trained_buffer(run: Path, path: Path) -> Path:
    """The trainable parameters of the run's Python-trained checkpoint, as the page's download lays them out."""
    from onnxruntime.training.api import CheckpointState, Module

    state = CheckpointState.load_checkpoint(str(run / "trained_checkpoint"))
    module = Module(str(run / "artifacts" / "training_model.onnx"), state, str(run / "artifacts" / "eval_model.onnx"))
    values = module.get_contiguous_parameters(True).numpy()
    path.write_bytes(np.asarray(values, dtype="<f4").tobytes())
    return path


def test_import_of_a_parameter_buffer_round_trips(run, tmp_path, capsys):
    from workbench.flow.handoffs import open_run
    from workbench.graph import load_export
    from workbench import runs
    from workbench.ondevice.browser import BrowserImport
    from workbench.runs.layout import BROWSER_FILE

    buf = _python_trained_buffer(run, tmp_path / "trained_parameters.bin")
    code = main(["ondevice", "import", str(run), str(buf)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "trained in: browser (onnxruntime-web 1.19.2)" in out and f"workbench fuse {run / 'browser'}" in out
    record = runs.load_result(BrowserImport, run / "browser", BROWSER_FILE)
    assert record.parameters == buf.stat().st_size // 4 and record.validation.passed
    assert record.learning_rate == pytest.approx(LR, rel=1e-7) and record.weights_moved > 1e-4
    assert record.parameters_sha256 == hashlib.sha256(buf.read_bytes()).hexdigest()
    export = load_export(run / "browser")
    assert export.trained_in == "browser (onnxruntime-web 1.19.2)"
    python = load_export(run / "inference")
    # the same weights went in, so the graph computes what the Python-trained graph computes
    np.testing.assert_allclose(logits_of(Path(export.onnx_path), python), logits_of(Path(python.onnx_path), python),
                               rtol=0, atol=1e-6)
    # and what PyTorch computes holding the Python-trained weights (the Python export's reference)
    np.testing.assert_allclose(logits_of(Path(export.onnx_path), python), python.reference_logits(), rtol=0, atol=1e-5)
    # the run's newest export is the browser-trained one: fuse / quantize take it
    assert open_run(run).result_path("export") == (run / "browser" / "export.json")
    code = main(["fuse", str(run), "--preset", "inspect", "--json"])
    fused = json.loads(capsys.readouterr().out)
    assert code == 0 and fused["result"] == str(run / "fusion" / "fusion.json")
    from workbench.graph import load_fusion

    assert Path(load_fusion(run / "fusion").export_path).parent == (run / "browser").resolve()  # the browser-trained graph
    # the run's report says where the weights were trained, in the page and in summary.json
    from workbench.report import inputs_from_run, write_report

    page, _, summary = write_report(inputs_from_run(run), tmp_path / "report")
    assert "Trained in: browser (onnxruntime-web 1.19.2)." in page.read_text()
    assert json.dumps(summary).count('"trained_in": "browser (onnxruntime-web 1.19.2)"') >= 1


def test_import_of_the_untrained_parameters_says_so(run, tmp_path, capsys):
    from onnxruntime.training.api import CheckpointState, Module

    state = CheckpointState.load_checkpoint(str(run / "artifacts" / "checkpoint"))
    module = Module(str(run / "artifacts" / "training_model.onnx"), state, str(run / "artifacts" / "eval_model.onnx"))
    buf = tmp_path / "p.bin"
    buf.write_bytes(np.asarray(module.get_contiguous_parameters(True).numpy(), dtype="<f4").tobytes())
    copy = tmp_path / "run"
    import shutil

    shutil.copytree(run, copy)
    assert main(["ondevice", "import", str(copy), str(buf)]) == 0
    assert "the page's download was made before training" in capsys.readouterr().out


@pytest.mark.parametrize("make, expected", [
    (lambda p, n: None, "does not exist; download it from the run's page"),
    (lambda p, n: p.write_bytes(b"\0" * (4 * n + 2)), "not a whole number of float32 values"),
    (lambda p, n: p.write_bytes(b"\0" * (4 * (n - 1))), "float32 values, but this run trains"),
    (lambda p, n: p.write_bytes(np.full(n, np.nan, dtype="<f4").tobytes()), "NaN or infinite values"),
])
def test_a_bad_parameters_file_is_one_line_and_exit_2(run, tmp_path, capsys, make, expected):
    n = load_ondevice(run).artifacts.trainable_parameters
    bad = tmp_path / "trained_parameters.bin"
    make(bad, n)
    code = main(["ondevice", "import", str(run), str(bad)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and expected in err[0] and str(bad) in err[0], err


def test_import_into_a_folder_that_is_no_run_is_one_line_and_exit_2(tmp_path, capsys):
    code = main(["ondevice", "import", str(tmp_path), str(tmp_path / "x.bin")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "is not an on-device run (no ondevice.json)" in err[0]


def test_no_web_and_a_missing_onnxruntime_web(tmp_path, capsys, monkeypatch):
    common = ["ondevice", "--steps", "2", "--no-memory", "--threads", "1", "--validation-examples", "4", "--max-train", "32"]
    assert main([*common, "--no-web", "--run-dir", str(tmp_path / "a")]) == 0
    assert not (tmp_path / "a" / "web").exists() and load_ondevice(tmp_path / "a").web_page is None
    assert "web page not written (web=False, --no-web)" in capsys.readouterr().out
    # no node / npm ci never ran: the stage still works, the page is skipped with one line saying how to get it
    monkeypatch.setattr(web, "ORT_WEB_DIST", tmp_path / "no-node_modules" / "onnxruntime-web" / "dist")
    assert main([*common, "--run-dir", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("web page not written")]
    assert len(lines) == 1 and "onnxruntime-web 1.19.2 is not installed" in lines[0] and "make setup-web" in lines[0]
    assert not (tmp_path / "b" / "web").exists() and load_ondevice(tmp_path / "b").loss_parity
    # --serve without a page: one line, exit 2, before any run folder is made
    for extra, expected in ((["--serve"], "--serve: the web page cannot be written: onnxruntime-web 1.19.2 is not installed"),
                            (["--serve", "--no-web"], "--serve serves the run's web page, which --no-web skips")):
        assert main([*common, "--run-dir", str(tmp_path / "c"), *extra]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and expected in err[0], err
        assert not (tmp_path / "c").exists()


def test_the_server_binds_127_0_0_1_with_module_and_wasm_types(run, tmp_path, listening, monkeypatch):
    import mimetypes
    import os

    # a machine without /etc/mime.types: Python 3.11's own table has no .mjs, and a module script served as
    # application/octet-stream is refused by the browser; the server's own map must not depend on it
    monkeypatch.setattr(mimetypes, "guess_type", lambda *a, **kw: (None, None))
    with web.PageServer(run) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/web/index.html")
        assert server.httpd.server_address[0] == "127.0.0.1"
        assert {ip for ip, port in listening(os.getpid()) if port == server.port} == {"127.0.0.1"}
        base = server.url.rsplit("/web/", 1)[0]
        for path, mime in (("/web/ort/ort-training-wasm-simd-threaded.mjs", "text/javascript"),
                           ("/web/ort/ort-training-wasm-simd-threaded.wasm", "application/wasm"),
                           ("/web/app.js", "text/javascript"), ("/web/index.html", "text/html"),
                           ("/artifacts/checkpoint", None)):
            with urllib.request.urlopen(base + path, timeout=30) as r:
                assert r.status == 200 and (mime is None or r.headers["Content-Type"].startswith(mime)), (path, r.headers)
    with pytest.raises(OnDeviceError, match="has no web page"):
        web.PageServer(tmp_path)


@pytest.mark.slow  # a long run for make test-fast: 7 s on 2 cores
def test_serve_after_the_run_prints_the_address_and_ctrl_c_stops_it(tmp_path, listening):
    """`workbench ondevice ... --serve`: the run, then its page on 127.0.0.1 until Ctrl-C (exit 0)."""
    import os
    import re
    import signal
    import subprocess

    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "ondevice", "--steps", "2", "--no-memory", "--threads", "1",
                             "--validation-examples", "4", "--max-train", "32", "--run-dir", str(tmp_path / "r"), "--serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stdout:
            if line.startswith("serving the on-device page on "):
                break
        else:
            pytest.fail(f"no address printed; stderr: {proc.stderr.read()[-2000:]}")
        url = re.search(r"(http://127\.0\.0\.1:\d+/web/index\.html)", line).group(1)
        assert {ip for ip, _ in listening(proc.pid)} == {"127.0.0.1"}
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200 and b"ort/ort.training.wasm.min.js" in r.read()
        proc.send_signal(signal.SIGINT)  # our own child, by its pid
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
