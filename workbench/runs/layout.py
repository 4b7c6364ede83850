"""The run layout: where every stage writes inside a run folder, as paths relative to its root.

    <run>/
      doctor.txt, data.json                        the demo's environment check and data summary
      train/compare.json                           Comparison of the backends
      train/<backend>/train.json, .../checkpoint/  each backend's TrainRun and its fine-tuned checkpoint
      export/export.json, export/model.onnx        ExportResult and the exported graph
      fusion/fusion.json, fusion/model_fused.onnx  FusionReport and the fully fused graph
      fusion/model_fused_<candidate>.onnx          the timed choice when a fusion left out ran faster (fusion_candidate)
      quantize/baseline/                           the FP32 baseline (scored once, shared by the presets)
      quantize/<name>/quantize.json                QuantResult of each preset (re-quantizations below it)
      search/search.json                           SearchResult (its candidates in search/<candidate>/)
      chosen/                                      the graph to ship (the audit's verdict, a search's choice): the
                                                   graph, tokenizer.json, labels.json, settings.json, predict.py
      inference/export.json                        an on-device run's inference graph (an export)
      web/index.html                               an on-device run's web page (onnxruntime-web trains there)
      browser/export.json, browser/browser.json    the page's trained parameters, imported: an export
      figures/*.html                               the demo's figures
      report.html, summary.json                    the one-page report (demo, Workbench, audit): links
                                                   into .report/ (a link to one generation of the pair)
      .workbench.lock                              held by the command writing the run (runs/lock.py)
      demo.json, summary.md, audit.json            the demo's and the audit's own record

Older run folders put some results elsewhere (at the root, or ``fusion.json`` in ``export/``);
:data:`RESULT_PLACES` still reads them, and the newest result of a stage wins wherever it lies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

# ---- folders and files, relative to the run root ------------------------------------------------
TRAIN_DIR = "train"
COMPARE_FILE = "compare.json"
TRAIN_FILE = "train.json"
CHECKPOINT_DIR = "checkpoint"
EXPORT_DIR = "export"
EXPORT_FILE = "export.json"
EXPORT_GRAPH = "model.onnx"
FUSION_DIR = "fusion"
FUSION_FILE = "fusion.json"
FUSED_GRAPH = "model_fused.onnx"
QUANTIZE_DIR = "quantize"
QUANTIZE_FILE = "quantize.json"
BASELINE_DIR = "baseline"
SEARCH_DIR = "search"
SEARCH_FILE = "search.json"
CHOSEN_DIR = "chosen"  # the graph to ship, with what it needs to run without PyTorch (quant/ship.py)
SHIP_SETTINGS = "settings.json"
SHIP_LABELS = "labels.json"
SHIP_PREDICT = "predict.py"
INFERENCE_DIR = "inference"
FIGURES_DIR = "figures"
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
DEMO_FILE = "demo.json"
DEMO_SUMMARY = "summary.md"
DATA_FILE = "data.json"
DOCTOR_FILE = "doctor.txt"
AUDIT_FILE = "audit.json"
ONDEVICE_DIR = "ondevice"
ONDEVICE_FILE = "ondevice.json"
ONDEVICE_WEB_DIR = "web"  # an on-device run's web page (index.html, app.js, onnxruntime-web, its batches)
BROWSER_DIR = "browser"  # parameters trained in that page, imported: an export (export.json) and browser.json
BROWSER_FILE = "browser.json"

COMPARE = f"{TRAIN_DIR}/{COMPARE_FILE}"
EXPORT = f"{EXPORT_DIR}/{EXPORT_FILE}"
EXPORTED_GRAPH = f"{EXPORT_DIR}/{EXPORT_GRAPH}"
FUSION = f"{FUSION_DIR}/{FUSION_FILE}"
FUSED = f"{FUSION_DIR}/{FUSED_GRAPH}"
BASELINE = f"{QUANTIZE_DIR}/{BASELINE_DIR}"
SEARCH = f"{SEARCH_DIR}/{SEARCH_FILE}"


def checkpoint(backend: str) -> str:
    return f"{TRAIN_DIR}/{backend}/{CHECKPOINT_DIR}"


def fusion_candidate(name: str) -> str:
    """The file of the fusion stage's candidate ``name`` (a fusion family left out; ``full``: all of them)."""
    return FUSED_GRAPH if name == "full" else f"model_fused_{name}.onnx"


def quantize_dir(name: str) -> str:
    return f"{QUANTIZE_DIR}/{name}"


STAGE_DIRS = {"train": TRAIN_DIR, "export": EXPORT_DIR, "fusion": FUSION_DIR, "quantize": QUANTIZE_DIR,
              "search": SEARCH_DIR}

STAGE_FILES = {"compare": COMPARE_FILE, "export": EXPORT_FILE, "fusion": FUSION_FILE, "quantize": QUANTIZE_FILE,
               "search": SEARCH_FILE}

# where a stage's result is read from, the layout's place first, then the older places (globs)
RESULT_PLACES: dict[str, tuple[str, ...]] = {
    "compare": (COMPARE, COMPARE_FILE),
    "export": (EXPORT, EXPORT_FILE, f"{INFERENCE_DIR}/{EXPORT_FILE}", f"{BROWSER_DIR}/{EXPORT_FILE}"),
    "fusion": (FUSION, f"{EXPORT_DIR}/{FUSION_FILE}", FUSION_FILE, f"{INFERENCE_DIR}/{FUSION_FILE}"),
    # quantize/<preset>/quantize.json and re-quantizations below them, never the search's candidates
    "quantize": (f"{QUANTIZE_DIR}/**/{QUANTIZE_FILE}", QUANTIZE_FILE),
    "search": (SEARCH, SEARCH_FILE),
}

# a folder with one of these names, this many levels above a result file's folder, is a stage
# folder of a run: the run root is its parent (train/<backend>/checkpoint, quantize/<name>/<re-run>)
_STAGE_NAMES_AT = (
    {TRAIN_DIR, EXPORT_DIR, FUSION_DIR, QUANTIZE_DIR, SEARCH_DIR, INFERENCE_DIR, BROWSER_DIR, FIGURES_DIR},
    {TRAIN_DIR, QUANTIZE_DIR, SEARCH_DIR},
    {TRAIN_DIR, QUANTIZE_DIR, SEARCH_DIR},
)


def root_by_name(folder: str | os.PathLike) -> Optional[Path]:
    """The run root by folder names alone (``RUN/train/eager/checkpoint`` gives ``RUN``); None outside a stage folder."""
    folder = Path(os.path.abspath(folder))
    chain = [folder, *list(folder.parents)[:2]]
    for names, c in zip(_STAGE_NAMES_AT, chain):
        if c.name in names and c.parent != c:
            return c.parent
    return None


def root_for_file(path: str | os.PathLike) -> Path:
    """The run root of a result file: its stage folder's parent, else its own folder (the older flat layout)."""
    path = Path(os.path.abspath(path))
    return root_by_name(path.parent) or path.parent


def newest(paths: list[Path]) -> Optional[Path]:
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def result_files(root: str | os.PathLike, any_folder: bool = True) -> dict[str, Path]:
    """``{stage: newest result file}`` in :data:`RESULT_PLACES` (``any_folder``: else any ``<root>/*/<stage file>``)."""
    root = Path(root)
    found: dict[str, Path] = {}
    for stage, places in RESULT_PLACES.items():
        candidates = [p for place in places for p in root.glob(place) if p.is_file()]
        if any_folder and stage != "quantize" and not candidates:  # any stage folder of an older run
            candidates = [p for p in root.glob(f"*/{STAGE_FILES[stage]}") if p.is_file()
                          and not p.parent.name.startswith(".")]
        path = newest(candidates)
        if path is not None:
            found[stage] = path
    return found
