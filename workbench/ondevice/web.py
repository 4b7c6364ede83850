"""On-device training in a web page: the run's artifacts trained by onnxruntime-web in a browser.

``write_page`` writes ``<run>/web/``: ``index.html`` + ``app.js`` (load the artifacts with onnxruntime-web's
training API, evaluate, train ``cfg.steps`` steps with a live loss curve, evaluate again, offer the trained
parameters as a file that ``workbench ondevice import RUN FILE`` brings back); ``ort/``, onnxruntime-web
1.19.2's WASM training build copied from ``web/node_modules`` (nothing comes from a CDN); ``batches.bin`` +
``config.json``, the batches Python trained on and the eval batches; ``optimizer_model.onnx`` with the
learning rate baked in.

The learning rate. onnxruntime-web 1.19.2 has no learning-rate setter: its WASM build exports no
``OrtTrainingSetLearningRate`` (only create, train/eval/optimizer step, lazy reset and the
parameter buffer calls), and ``Optimizer::Step`` (orttraining/training_api/optimizer.cc) feeds
the optimizer graph's ``learning_rate`` input from its own state, 1e-3 unless set. The same
constructor checks the graph's inputs by name (``learning_rate, step, params, gradients,
first_order_moments, second_order_moments``), so the input cannot be removed or turned into an
initializer (an input with an initializer is not listed among the inputs). The page's copy of the
optimizer graph keeps the input, unused, and its ``AdamWOptimizer`` node reads a constant
initializer holding ``cfg.lr`` instead (:func:`bake_learning_rate`). Whatever the runtime feeds,
the update uses the user's rate; the test proves it against Python at 3e-3 in Chromium. The
stage trains at one constant rate; a graph whose learning rate is not read by exactly the
AdamWOptimizer node is refused (:class:`~workbench.ondevice.config.OnDeviceError`, one line).

Serving: wasm needs http (``file://`` cannot fetch), and a stdlib ``http.server`` maps ``.mjs``
to ``application/octet-stream``, which the browser refuses as a module script; :class:`PageServer`
binds 127.0.0.1 only and maps ``.mjs``/``.js``/``.wasm``. The page loads ``../artifacts/...``:
the server's root is the run folder.
"""

from __future__ import annotations

import hashlib
import html
import http.server
import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .. import runs
from ..runs import layout
from .config import ARTIFACTS_DIR, OnDeviceConfig, OnDeviceError

ORT_WEB_VERSION = "1.19.2"
REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "web" / "node_modules"
ORT_WEB_DIST = NODE_MODULES / "onnxruntime-web" / "dist"
# the WASM training build: the bundle, the Emscripten module it imports, and the binary
ORT_WEB_FILES = ("ort.training.wasm.min.js", "ort-training-wasm-simd-threaded.mjs", "ort-training-wasm-simd-threaded.wasm")
ORT_SUBDIR = "ort"
PAGE_FILE = "index.html"
APP_FILE = "app.js"
CONFIG_FILE = "config.json"
BATCHES_BIN = "batches.bin"
OPTIMIZER_GRAPH = "optimizer_model.onnx"
PARAMS_DOWNLOAD = "trained_parameters.bin"
BAKED_LR = "workbench_baked_learning_rate"
LR_INPUT = "learning_rate"
EVAL_EXAMPLES = 256  # at most this many eval examples go into the page
SETUP_HINT = "run `make setup-web` (or `bash scripts/setup.sh --web`: node and npm from Debian, then npm ci in web/)"
MIME_TYPES = {".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json",
              ".html": "text/html; charset=utf-8", ".onnx": "application/octet-stream", ".bin": "application/octet-stream"}


@dataclass(frozen=True)
class WebPage:
    """The page written beside an on-device run's artifacts (``page`` is None when it was skipped,
    ``note`` says why and how to get it)."""

    page: Optional[Path]
    note: str


def ort_web_missing() -> Optional[str]:
    """Why the page cannot be written here (onnxruntime-web not installed), or None."""
    missing = [f for f in ORT_WEB_FILES if not (ORT_WEB_DIST / f).is_file()]
    if not missing:
        version = json.loads((ORT_WEB_DIST.parent / "package.json").read_text()).get("version")
        if version != ORT_WEB_VERSION:
            return (f"web/node_modules holds onnxruntime-web {version}, the page is built for {ORT_WEB_VERSION} "
                    f"(the lock file's); {SETUP_HINT}")
        return None
    return f"onnxruntime-web {ORT_WEB_VERSION} is not installed ({ORT_WEB_DIST / missing[0]} is missing); {SETUP_HINT}"


def bake_learning_rate(src: str | os.PathLike, dst: str | os.PathLike, lr: float) -> Path:
    """Write ``src`` (an artifacts' ``optimizer_model.onnx``) to ``dst`` with its ``AdamWOptimizer``
    reading the constant ``lr`` (float32, shape [1], initializer :data:`BAKED_LR`) instead of the
    ``learning_rate`` input, which stays declared (the runtime checks the inputs by name)."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(src))
    graph = proto.graph
    if [i.name for i in graph.input][:1] != [LR_INPUT]:
        raise OnDeviceError(f"the optimizer graph {src} has no {LR_INPUT!r} input first (inputs "
                            f"{[i.name for i in graph.input]}): the page cannot carry the learning rate; rebuild the artifacts")
    readers = [(n, k) for n in graph.node for k, name in enumerate(n.input) if name == LR_INPUT]
    if len(readers) != 1 or readers[0][0].op_type != "AdamWOptimizer" or readers[0][1] != 0:
        raise OnDeviceError(f"the optimizer graph {src} reads {LR_INPUT!r} in {[(n.op_type, k) for n, k in readers]}, not only "
                            "as the AdamWOptimizer's rate: the browser could not be held to the learning rate; rebuild the "
                            "artifacts with optimizer AdamW")
    node, k = readers[0]
    node.input[k] = BAKED_LR
    graph.initializer.append(numpy_helper.from_array(np.asarray([lr], dtype=np.float32), BAKED_LR))
    onnx.checker.check_model(proto)
    with runs.atomic_path(dst) as tmp:
        onnx.save(proto, str(tmp))
    return Path(dst)


def baked_learning_rate(path: str | os.PathLike) -> Optional[float]:
    """The learning rate a page's optimizer graph holds (None for a graph that reads its input)."""
    import onnx
    from onnx import numpy_helper

    found = [i for i in onnx.load(str(path)).graph.initializer if i.name == BAKED_LR]
    return float(numpy_helper.to_array(found[0]).reshape(-1)[0]) if found else None


def eval_batches(loaded, data, cfg: OnDeviceConfig) -> list[dict[str, np.ndarray]]:
    """The eval split (``validation``, else ``test``; at most :data:`EVAL_EXAMPLES`) tokenized as the
    training batches are, in order, ``cfg.batch_size`` a batch (the last may be smaller)."""
    from .data import encode_batch

    split = "validation" if "validation" in data else "test" if "test" in data else None
    if split is None:  # the page trains all the same; it says there is nothing to evaluate on
        return []
    ds = data[split]
    n = min(len(ds), EVAL_EXAMPLES)
    return [encode_batch(loaded, ds, list(range(start, min(n, start + cfg.batch_size))), cfg.max_length)
            for start in range(0, n, cfg.batch_size)]


def _pack(batches: Sequence[dict[str, np.ndarray]], chunks: list[bytes], offset: int) -> tuple[list[dict], int]:
    index = []
    for b in batches:
        entry = {}
        for name, arr in b.items():
            raw = np.ascontiguousarray(arr, dtype="<i8").tobytes()
            entry[name] = {"shape": [int(d) for d in arr.shape], "offset": offset, "count": int(arr.size)}
            chunks.append(raw)
            offset += len(raw)
        index.append(entry)
    return index, offset


def write_page(run_dir: str | os.PathLike, cfg: OnDeviceConfig, loaded, data, batches: Sequence[dict[str, np.ndarray]],
               class_names: Sequence[str]) -> WebPage:
    """Write ``<run>/web/`` (see the module doc) beside ``<run>/artifacts``, for ``loaded`` trained on ``batches``
    and evaluated on ``data``'s eval split; replaced as a whole. With ``cfg.web`` off or without onnxruntime-web
    installed, nothing is written and the result's note says why (and how to get it)."""
    run_dir, model_name = Path(run_dir), loaded.name
    if not cfg.web:
        return WebPage(None, "web page not written (web=False, --no-web)")
    missing = ort_web_missing()
    if missing is not None:
        return WebPage(None, f"web page not written: {missing}")
    artifacts = run_dir / ARTIFACTS_DIR
    chunks: list[bytes] = []
    train_index, offset = _pack(batches, chunks, 0)
    eval_index, offset = _pack(eval_batches(loaded, data, cfg), chunks, offset)
    blob = b"".join(chunks)
    config = {
        "model": model_name, "steps": len(batches), "lr": cfg.lr, "batch_size": cfg.batch_size, "seed": cfg.seed,
        "max_length": cfg.max_length, "trainable": cfg.trainable.value, "class_names": [str(c) for c in class_names],
        "ort_web_version": ORT_WEB_VERSION, "artifacts": f"../{ARTIFACTS_DIR}/", "optimizer_model": OPTIMIZER_GRAPH,
        "batches_file": BATCHES_BIN, "batches_sha256": hashlib.sha256(blob).hexdigest(),
        "train": train_index, "eval": eval_index, "download_name": PARAMS_DOWNLOAD,
        "import_command": f"workbench ondevice import {run_dir.resolve()} {PARAMS_DOWNLOAD}",
    }
    with runs.atomic_dir(run_dir / layout.ONDEVICE_WEB_DIR) as tmp:
        (tmp / ORT_SUBDIR).mkdir()
        for name in ORT_WEB_FILES:
            shutil.copyfile(ORT_WEB_DIST / name, tmp / ORT_SUBDIR / name)
        bake_learning_rate(artifacts / OPTIMIZER_GRAPH, tmp / OPTIMIZER_GRAPH, cfg.lr)
        (tmp / BATCHES_BIN).write_bytes(blob)
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n")
        (tmp / APP_FILE).write_text(_APP_JS)
        (tmp / PAGE_FILE).write_text(_PAGE_HTML.replace("{{TITLE}}", html.escape(f"{model_name}: on-device training in the browser")))
    page = run_dir / layout.ONDEVICE_WEB_DIR / PAGE_FILE
    return WebPage(page.resolve(), f"web page: {page.resolve()} (serve it: workbench ondevice serve {run_dir.resolve()})")


# ---- serving --------------------------------------------------------------------------------------
class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        if self.path == "/favicon.ico":  # the browser asks for it whatever the page says; no icon, no 404 in the console
            self.send_response(204)
            self.end_headers()
            return
        super().do_GET()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")  # a re-run replaces the page; never train on a stale copy
        super().end_headers()

    def log_message(self, format, *args) -> None:  # noqa: A002  (http.server's name)
        if self.server.quiet:  # type: ignore[attr-defined]
            return
        super().log_message(format, *args)


class PageServer:
    """The run folder over http on 127.0.0.1 (only); ``url`` is the page's address."""

    def __init__(self, run_dir: str | os.PathLike, port: int = 0, quiet: bool = True):
        run_dir = Path(run_dir).resolve()
        page = run_dir / layout.ONDEVICE_WEB_DIR / PAGE_FILE
        if not page.is_file():
            raise OnDeviceError(f"{run_dir} has no web page ({layout.ONDEVICE_WEB_DIR}/{PAGE_FILE}); run `workbench ondevice "
                                f"--run-dir {run_dir}` with onnxruntime-web installed ({SETUP_HINT})")
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise OnDeviceError(f"port must be from 0 (any free port) to 65535, got {port!r}")
        handler = lambda *a, **kw: _Handler(*a, directory=str(run_dir), **kw)  # noqa: E731
        try:
            self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError as exc:
            raise OnDeviceError(f"cannot serve on 127.0.0.1:{port} ({exc.strerror or exc}); give another --port, or 0 "
                                "for any free port") from None
        self.httpd.quiet = quiet  # type: ignore[attr-defined]
        self.httpd.daemon_threads = True
        self.run_dir = run_dir
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/{layout.ONDEVICE_WEB_DIR}/{PAGE_FILE}"
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "PageServer":
        """Serve in a background thread (for notebooks and tests); :meth:`stop` ends it."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="ondevice-page", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> "PageServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_PAGE_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>{{TITLE}}</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 1.5em; max-width: 980px; color: #222; }
 table { border-collapse: collapse; margin: .6em 0; }
 td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
 button { font-size: 1em; padding: .35em 1em; margin-right: .5em; }
 #status.error { color: #b00020; font-weight: bold; }
 svg { border: 1px solid #ddd; background: #fafafa; }
 .note { color: #555; font-size: .9em; }
</style>
</head>
<body>
<h1>{{TITLE}}</h1>
<p class="note">ONNX Runtime's training artifacts of this run, trained here by onnxruntime-web's WASM training build
(served from this run folder, nothing from a CDN), on the batches the workbench trained on in Python.</p>
<table id="facts"></table>
<p><button id="train" disabled>Train</button><button id="download" disabled>Download trained parameters</button>
<span id="status">loading…</span></p>
<svg id="curve" width="900" height="300" role="img" aria-label="training loss per step"></svg>
<table id="steps"><thead><tr><th>step</th><th>loss</th><th>step time (ms)</th></tr></thead><tbody></tbody></table>
<p class="note" id="next"></p>
<script src="ort/ort.training.wasm.min.js"></script>
<script src="app.js"></script>
</body>
</html>
"""

_APP_JS = r"""// The on-device page: train this run's artifacts with onnxruntime-web (see workbench/ondevice/web.py).
'use strict';
const state = { phase: 'loading', losses: [], stepMs: [], accuracyBefore: null, accuracyAfter: null,
                evalLossBefore: null, evalLossAfter: null, error: null, parameters: null, config: null };
window.__workbench = state;

const $ = (id) => document.getElementById(id);
function say(text, isError) {
  $('status').textContent = text;
  $('status').className = isError ? 'error' : '';
}
function fail(err) {
  state.error = String(err && err.stack || err);
  state.phase = 'error';
  say('error: ' + (err && err.message || err), true);
  console.error(err);
}

async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error('cannot load ' + url + ': HTTP ' + r.status);
  return new Uint8Array(await r.arrayBuffer());
}

function feedsOf(buffer, entry, names) {
  const feeds = {};
  for (const name of names) {
    const t = entry[name];
    if (!t) throw new Error('the batches have no input ' + name + ' (they hold ' + Object.keys(entry).join(', ') + ')');
    feeds[name] = new ort.Tensor('int64', new BigInt64Array(buffer, t.offset, t.count), t.shape);
  }
  return feeds;
}

function drawCurve(losses, total) {
  const svg = $('curve'), w = +svg.getAttribute('width'), h = +svg.getAttribute('height'), pad = 40;
  if (!losses.length) { svg.innerHTML = ''; return; }
  const lo = Math.min(...losses), hi = Math.max(...losses), span = (hi - lo) || 1;
  const x = (i) => pad + (total > 1 ? i / (total - 1) : 0.5) * (w - 2 * pad);
  const y = (v) => h - pad - (v - lo) / span * (h - 2 * pad);
  const pts = losses.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');
  svg.innerHTML =
    '<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="' + pts + '"/>' +
    losses.map((v, i) => '<circle r="3" fill="#1f77b4" cx="' + x(i).toFixed(1) + '" cy="' + y(v).toFixed(1) + '"/>').join('') +
    '<text x="' + pad + '" y="20">loss ' + hi.toFixed(4) + ' (top) to ' + lo.toFixed(4) + ' (bottom), step 1 to ' + total + '</text>';
}

async function evaluate(session, cfg, buffer) {
  const names = session.evalInputNames;
  const logitsName = session.evalOutputNames.find((n) => n === 'logits');
  const lossName = session.evalOutputNames[0];
  if (!logitsName) {
    throw new Error('the eval graph has no logits output (outputs ' + session.evalOutputNames.join(', ') + '); rebuild the artifacts');
  }
  if (!cfg.eval.length) return { accuracy: null, loss: null };  // the data had no validation or test split
  let right = 0, count = 0, lossSum = 0;
  for (const entry of cfg.eval) {
    const out = await session.runEvalStep(feedsOf(buffer, entry, names));
    const logits = out[logitsName].data, [n, k] = out[logitsName].dims;
    const labels = new BigInt64Array(buffer, entry.labels.offset, entry.labels.count);
    for (let i = 0; i < n; i++) {
      let best = 0;
      for (let j = 1; j < k; j++) if (logits[i * k + j] > logits[i * k + best]) best = j;
      if (BigInt(best) === labels[i]) right++;
    }
    lossSum += Number(out[lossName].data[0]) * n;
    count += n;
  }
  return { accuracy: count ? right / count : NaN, loss: count ? lossSum / count : NaN };
}

const pct = (x) => x === null ? 'no eval split in the data' : (100 * x).toFixed(1) + '%';

function facts(cfg, extra) {
  const lr = cfg.lr + ' (baked into ' + cfg.optimizer_model + ': onnxruntime-web ' + cfg.ort_web_version + ' has no setter)';
  const rows = [['model', cfg.model], ['steps', cfg.steps], ['learning rate', lr],
                ['batch size', cfg.batch_size], ['seed', cfg.seed], ['trainable', cfg.trainable],
                ['eval examples', cfg.eval.reduce((a, e) => a + e.labels.count, 0)], ...extra];
  const escape = (s) => String(s).replace(/[&<>]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'}[c]));
  $('facts').innerHTML = rows.map(([k, v]) => '<tr><th>' + k + '</th><td>' + escape(v) + '</td></tr>').join('');
}

async function main() {
  ort.env.wasm.wasmPaths = new URL('ort/', location.href).href;
  ort.env.wasm.numThreads = 1;  // one thread: the order of every sum is fixed (and no cross-origin isolation is needed)
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'error';  // ONNX Runtime's warnings (unused dropout constants) would reach the console as errors
  const cfg = await (await fetch('config.json')).json();
  state.config = cfg;
  facts(cfg, []);
  const data = await fetchBytes(cfg.batches_file);
  const buffer = data.buffer;
  const art = cfg.artifacts;
  say('loading the artifacts…');
  const session = await ort.TrainingSession.create({
    checkpointState: await fetchBytes(art + 'checkpoint'),
    trainModel: await fetchBytes(art + 'training_model.onnx'),
    evalModel: await fetchBytes(art + 'eval_model.onnx'),
    optimizerModel: await fetchBytes(cfg.optimizer_model),
  }, { logSeverityLevel: 3 });
  state.session = session;
  say('evaluating before training…');
  const before = await evaluate(session, cfg, buffer);
  state.accuracyBefore = before.accuracy; state.evalLossBefore = before.loss;
  facts(cfg, [['accuracy before', pct(before.accuracy)]]);
  state.phase = 'ready';
  say('ready: ' + cfg.steps + ' steps');
  $('train').disabled = false;
  $('train').onclick = () => train(session, cfg, buffer).catch(fail);
  $('download').onclick = () => download(cfg);
}

async function train(session, cfg, buffer) {
  $('train').disabled = true;
  state.phase = 'training';
  state.losses = []; state.stepMs = [];
  const names = session.trainingInputNames, lossName = session.trainingOutputNames[0];
  const body = document.querySelector('#steps tbody');
  body.innerHTML = '';
  for (let i = 0; i < cfg.train.length; i++) {
    const t0 = performance.now();
    const out = await session.runTrainStep(feedsOf(buffer, cfg.train[i], names));
    await session.runOptimizerStep();
    await session.lazyResetGrad();
    const ms = performance.now() - t0;
    const loss = Number(out[lossName].data[0]);
    state.losses.push(loss); state.stepMs.push(ms);
    body.insertAdjacentHTML('beforeend', '<tr><td>' + (i + 1) + '</td><td>' + loss.toFixed(6) + '</td><td>' + ms.toFixed(1) + '</td></tr>');
    drawCurve(state.losses, cfg.train.length);
    say('step ' + (i + 1) + ' of ' + cfg.train.length + ': loss ' + loss.toFixed(4));
  }
  say('evaluating after training…');
  const after = await evaluate(session, cfg, buffer);
  state.accuracyAfter = after.accuracy; state.evalLossAfter = after.loss;
  const params = await session.getContiguousParameters(true);
  state.parameters = params.data;
  const sorted = [...state.stepMs].slice(1).sort((a, b) => a - b);
  const median = sorted.length ? sorted[Math.floor(sorted.length / 2)] : state.stepMs[0];
  facts(cfg, [['accuracy before', pct(state.accuracyBefore)], ['accuracy after', pct(after.accuracy)],
              ['median step time', median.toFixed(1) + ' ms (after the first)'], ['trained parameters', params.data.length + ' float32']]);
  $('download').disabled = false;
  $('next').textContent = 'Bring the weights back: ' + cfg.import_command;
  state.phase = 'done';
  say('done: ' + cfg.train.length + ' steps, accuracy ' + pct(state.accuracyBefore) + ' → ' + pct(after.accuracy));
}

function download(cfg) {
  const p = state.parameters;
  const blob = new Blob([new Uint8Array(p.buffer, p.byteOffset, p.byteLength)], { type: 'application/octet-stream' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = cfg.download_name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

main().catch(fail);
"""
