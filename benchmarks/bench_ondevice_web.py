"""On-device training in the browser: a model's artifacts trained in the run's web page by onnxruntime-web
1.19.2 (WASM, one thread) in headless Chromium, beside Python's onnxruntime.training.api on the same batches.

Measures: the page's step times (median after the first), session start-up, Python's on-device step
time for the same steps, the largest relative loss difference between the two, the JS heap the page
reports (``performance.memory``, Chromium) and the peak RSS of Chromium's processes (all of them,
sampled every 50 ms while the page loads and trains). Prints a table and writes JSON to --out.
Timings belong here, never in tests; take them on a quiet machine.

    .venv/bin/python benchmarks/bench_ondevice_web.py --model minilm --out runs/bench/bench_ondevice_web.json [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _chromium_rss_mib() -> float:
    """RSS of the Chromium processes this process started (through Playwright's driver), summed."""
    import psutil

    total = 0
    for p in psutil.Process().children(recursive=True):
        try:
            if "chrom" in p.name().lower():
                total += p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


class _Sampler:
    def __init__(self, every_s: float = 0.05):
        self.peak, self.every, self._stop = 0.0, every_s, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _chromium_rss_mib())
            self._stop.wait(self.every)

    def __enter__(self) -> "_Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench/bench_ondevice_web.json")
    parser.add_argument("--model", default="minilm", help="'tiny', 'minilm' or a model folder")
    parser.add_argument("--trainable", default="last", help="head, last or all")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of the Python side (the page uses one)")
    parser.add_argument("--timeout-s", type=float, default=1800, help="how long the page may take to train")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO / "tests"))
    from helpers.labtools import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    from workbench.data.load import DataConfig, load_data
    from workbench.ondevice import OnDeviceConfig, run_ondevice
    from workbench.ondevice.web import ORT_WEB_VERSION, PageServer

    if not CHROMIUM.exists():
        print(f"no chromium at {CHROMIUM}: run `make setup-test`", file=sys.stderr)
        return 2
    data = load_data(DataConfig(max_train=max(256, args.steps * args.batch_size), max_eval=64))
    with tempfile.TemporaryDirectory() as work:
        cfg = OnDeviceConfig(trainable=args.trainable, steps=args.steps, batch_size=args.batch_size,
                             max_length=args.max_length, lr=args.lr, threads=args.threads, measure_memory=False,
                             validation_examples=16, max_train=max(256, args.steps * args.batch_size))
        t0 = time.perf_counter()
        r = run_ondevice(args.model, cfg, Path(work) / "run", data=data)
        python_s = time.perf_counter() - t0
        if r.web_page is None:
            print(r.web_note, file=sys.stderr)
            return 2
        console: list[str] = []
        with PageServer(Path(work) / "run") as server, sync_playwright() as p, _Sampler() as sampler:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                        args=[*CHROMIUM_ARGS, "--enable-precise-memory-info"])
            page = browser.new_page()
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.set_default_timeout(args.timeout_s * 1000)
            t0 = time.perf_counter()
            page.goto(server.url)
            page.wait_for_function("['ready', 'error'].includes(window.__workbench.phase)")
            ready_s = time.perf_counter() - t0
            heap_ready = page.evaluate("performance.memory.usedJSHeapSize") / 2**20
            page.click("#train")
            page.wait_for_function("['done', 'error'].includes(window.__workbench.phase)")
            state = page.evaluate("({losses: window.__workbench.losses, ms: window.__workbench.stepMs, "
                                  "error: window.__workbench.error, before: window.__workbench.accuracyBefore, "
                                  "after: window.__workbench.accuracyAfter})")
            heap_done = page.evaluate("performance.memory.usedJSHeapSize") / 2**20
            browser.close()
        if state["error"]:
            print(f"the page failed: {state['error']}", file=sys.stderr)
            return 1
    rel = [abs(a - b) / abs(b) for a, b in zip(state["losses"], r.ondevice_losses)]
    ms = state["ms"]
    row = {
        "model": args.model, "trainable": args.trainable, "trainable_parameters": r.artifacts.trainable_parameters,
        "artifacts_mib": round(r.artifacts.total_size_mib, 2), "steps": len(ms),
        "page_ready_s": round(ready_s, 3), "page_step_ms": [round(x, 2) for x in ms],
        "page_median_step_ms": statistics.median(ms[1:] or ms), "page_first_step_ms": ms[0],
        "python_median_step_ms": r.ondevice.median_step_ms, "python_stage_s": round(python_s, 1),
        "max_relative_loss_difference": max(rel), "page_losses": state["losses"], "python_losses": r.ondevice_losses,
        "accuracy_before": state["before"], "accuracy_after": state["after"],
        "js_heap_mib_ready": round(heap_ready, 1), "js_heap_mib_done": round(heap_done, 1),
        "chromium_peak_rss_mib": round(sampler.peak, 1), "console_errors": console,
    }
    print(f"{args.model} ({args.trainable}: {row['trainable_parameters']:,} trainable parameters), {row['steps']} steps of "
          f"{args.batch_size} x <= {args.max_length} tokens, lr {args.lr:g}; onnxruntime-web {ORT_WEB_VERSION} (WASM, 1 thread) "
          f"in headless Chromium vs onnxruntime.training.api ({args.threads} thread(s))")
    print(f"{'page ready s':>12} {'page ms':>9} {'1st ms':>8} {'Python ms':>10} {'max rel Δloss':>14} "
          f"{'JS heap MiB':>12} {'Chromium RSS MiB':>17}")
    print(f"{row['page_ready_s']:>12.2f} {row['page_median_step_ms']:>9.1f} {row['page_first_step_ms']:>8.1f} "
          f"{row['python_median_step_ms']:>10.2f} {row['max_relative_loss_difference']:>14.2e} "
          f"{row['js_heap_mib_done']:>12.1f} {row['chromium_peak_rss_mib']:>17.0f}")
    if console:
        print(f"console errors: {console}")
    payload = {"args": vars(args), "rows": [row], "machine": {
        "cpu": platform.processor() or platform.machine(), "load_average": os.getloadavg(), "logical_cores": os.cpu_count()},
        "notes": ["JS heap: performance.memory.usedJSHeapSize after loading and after training (the WASM memory is not "
                  "in it); Chromium RSS: the peak of the sum over its processes, which counts shared pages more than once"]}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2))
    print(f"load average {os.getloadavg()}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
