"""On-device training in a web page: the run's artifacts trained by onnxruntime-web in a browser.

``<run>/web/`` holds the page (``workbench/resources/ondevice_page.html``, ``ondevice_app.js``), ``ort/``
(onnxruntime-web 1.19.2's WASM training build copied from ``web/node_modules``: nothing from a CDN),
the batches Python trained on, and ``optimizer_model.onnx`` with the learning rate baked in. The page
offers the trained parameters as a file that ``workbench ondevice import RUN FILE`` brings back.

The learning rate. onnxruntime-web 1.19.2's WASM build exports no ``OrtTrainingSetLearningRate``, and
``Optimizer::Step`` (orttraining/training_api/optimizer.cc) feeds the graph's ``learning_rate`` input from
its own state, 1e-3 unless set. The same constructor checks the inputs by name, so the input cannot be
removed or made an initializer. The page's optimizer graph keeps it, unused, and its ``AdamWOptimizer``
reads a constant holding ``cfg.lr`` (:func:`bake_learning_rate`); the test proves it against Python at
3e-3 in Chromium. A graph whose learning rate is not read by exactly that node is refused.

Serving: wasm needs http (``file://`` cannot fetch), and stdlib ``http.server`` serves ``.mjs`` as
``application/octet-stream``, which browsers refuse as a module; :class:`PageServer` binds 127.0.0.1 and
maps ``.mjs``/``.js``/``.wasm``. The page loads ``../artifacts/...``: the server's root is the run folder.
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
from importlib import resources
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .. import runs
from ..runs import layout
from .config import ARTIFACTS_DIR, OnDeviceConfig, OnDeviceError

ORT_WEB_VERSION = "1.19.2"
ORT_WEB_DIST = Path(__file__).resolve().parents[2] / "web" / "node_modules" / "onnxruntime-web" / "dist"  # npm ci in web/
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
    """The page written beside a run's artifacts; ``page`` None when skipped, ``note`` says why."""

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
    """Copy ``optimizer_model.onnx`` with its ``AdamWOptimizer`` reading the constant ``lr`` (float32, shape [1])
    instead of the ``learning_rate`` input, which stays declared (the runtime checks the inputs by name)."""
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
    """The eval split (``validation``, else ``test``) tokenized as the training batches, the last maybe smaller."""
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
    """Write ``<run>/web/``, replaced as a whole; with ``cfg.web`` off or no onnxruntime-web installed, only a note."""
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
        page_files = resources.files("workbench.resources")  # the page's own text: ondevice_page.html, ondevice_app.js
        (tmp / APP_FILE).write_text(page_files.joinpath("ondevice_app.js").read_text(encoding="utf-8"))
        (tmp / PAGE_FILE).write_text(page_files.joinpath("ondevice_page.html").read_text(encoding="utf-8").replace(
            "{{TITLE}}", html.escape(f"{model_name}: on-device training in the browser")))
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
