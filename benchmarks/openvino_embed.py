"""OpenVINO in the embedding benchmark: sentence-transformers' ``backend="openvino"`` (FP32) and its static INT8
(``export_static_quantized_openvino_model``: NNCF's post-training quantization through optimum-intel, calibrated on
texts of the benchmark's corpus), run with the OpenVINO environment's Python (scripts/setup_openvino_env.sh).

OpenVINO cannot be loaded in the workbench's process (optimum-intel needs transformers 5, the training stack has
4.57), so this file has two halves:

- the worker (``--serve``, in the OpenVINO environment; nothing from the workbench is imported): copies the model
  folder, exports it to OpenVINO IR and quantizes it, then answers requests, one JSON line each on stdin: ``texts``
  (keep a batch of texts under an id), ``run`` (``encode`` that batch with one model, nothing sent back: what the
  timing calls), ``embed`` (encode a file of texts, embeddings written as .npy: what the scoring calls), ``ping``
  (the pipe's own round trip), ``quit``. Its first line out is the export's record (versions, paths, seconds);
  everything the libraries print goes to ``--log``;
- the client (:class:`OpenVinoWorker`, in the benchmark's process: standard library and NumPy only), whose
  encoders have the ``encode(texts, batch_size)`` and ``encode_batch(texts)`` every encoder of
  ``benchmarks/bench_embed.py`` has, so the OpenVINO rows are scored on the same task and timed in the same
  interleaved rounds as every other variant (each timed call includes one pipe round trip, recorded beside).

    .venv-openvino/bin/python benchmarks/openvino_embed.py --model FOLDER --out DIR --calibration texts.json \
        [--threads 2] [--samples 128] --serve
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

FP32, INT8 = "fp32", "int8"
INT8_FILE = "openvino/openvino_model_qint8_quantized.xml"  # what export_static_quantized_openvino_model writes
PACKAGES = ("sentence-transformers", "optimum-intel", "optimum", "openvino", "nncf", "transformers", "torch")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


class OpenVinoError(RuntimeError):
    """The OpenVINO worker could not start, export or answer; the message says why (the end of its log)."""


# ---- the client (the benchmark's process) ------------------------------------------------------
class OpenVinoWorker:
    """The worker process in the OpenVINO environment, started by :meth:`start`; :meth:`encoder` gives an encoder
    for one of its models (``"fp32"``, ``"int8"``)."""

    def __init__(self, proc: subprocess.Popen, log: Path, work: Path) -> None:
        self.proc, self.log, self.work = proc, log, work
        self.info = self._reply()
        self._ids: dict[tuple[str, ...], str] = {}
        self._calls = 0

    @classmethod
    def start(cls, python: str | os.PathLike, model: str | os.PathLike, work: str | os.PathLike, calibration: list[str],
              threads: int) -> "OpenVinoWorker":
        """Start the worker: it exports and quantizes ``model`` into ``work`` (calibrated on ``calibration``), then
        waits for requests. Raises :class:`OpenVinoError` when it cannot."""
        work = Path(work).resolve()
        work.mkdir(parents=True, exist_ok=True)
        cal = work / "calibration.json"
        cal.write_text(json.dumps(list(calibration)))
        log = work / "openvino.log"
        cmd = [str(python), str(Path(__file__).resolve()), "--model", str(model), "--out", str(work), "--calibration", str(cal),
               "--threads", str(threads), "--samples", str(len(calibration)), "--serve"]
        with open(log, "w") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
                                    env={**os.environ, **OFFLINE})
        return cls(proc, log, work)

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:] if self.log.is_file() else []
            raise OpenVinoError(f"the OpenVINO worker exited (code {code}): {' | '.join(tail)} (all of it: {self.log})")
        reply = json.loads(line)
        if not reply.get("ok", False):
            raise OpenVinoError(f"the OpenVINO worker failed: {reply.get('error')}")
        return reply

    def call(self, **request) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def batch_id(self, texts) -> str:
        """The id the worker keeps ``texts`` under (sent the first time only)."""
        key = tuple(texts)
        if key not in self._ids:
            self._ids[key] = str(len(self._ids))
            self.call(op="texts", id=self._ids[key], texts=list(key))
        return self._ids[key]

    def encoder(self, model: str) -> "RemoteEncoder":
        return RemoteEncoder(self, model)

    def round_trip_ms(self, n: int = 200) -> float:
        """The median of ``n`` pings: what the pipe adds to each timed call."""
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            self.call(op="ping")
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call(op="quit")
            except (OpenVinoError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class RemoteEncoder:
    """One of the worker's models as an encoder: ``encode`` returns the embeddings (through a .npy file),
    ``encode_batch`` encodes a batch there and returns nothing (the timing's call)."""

    def __init__(self, worker: OpenVinoWorker, model: str) -> None:
        self.worker, self.model = worker, model
        self._lines: dict[str, str] = {}

    def encode(self, texts, batch_size: int = 32):
        import numpy as np

        self.worker._calls += 1
        stem = self.worker.work / f"embed_{self.model}_{self.worker._calls}"
        Path(f"{stem}.json").write_text(json.dumps(list(texts)))
        self.worker.call(op="embed", model=self.model, texts_file=f"{stem}.json", out=f"{stem}.npy", batch=int(batch_size))
        out = np.load(f"{stem}.npy")
        for suffix in (".json", ".npy"):
            Path(f"{stem}{suffix}").unlink()
        return out.astype(np.float32, copy=False)

    def encode_batch(self, texts) -> None:
        bid = self.worker.batch_id(texts)
        line = self._lines.get(bid)
        if line is None:
            line = self._lines[bid] = json.dumps({"op": "run", "model": self.model, "id": bid}) + "\n"
        proc = self.worker.proc
        proc.stdin.write(line)
        proc.stdin.flush()
        if proc.stdout.readline() != '{"ok": true}\n':
            raise OpenVinoError(f"the OpenVINO worker did not encode batch {bid} with {self.model} (see {self.worker.log})")


# ---- the worker (the OpenVINO environment) -----------------------------------------------------
def export(model: str, out: Path, calibration: Path, samples: int) -> dict:
    """Copy ``model`` into ``out/model``, export it to OpenVINO IR (``backend="openvino"``) and write its static INT8
    version calibrated on the first ``samples`` texts of ``calibration``; returns the record."""
    import importlib.metadata as md

    from optimum.intel import OVQuantizationConfig
    from sentence_transformers import SentenceTransformer, export_static_quantized_openvino_model

    work = out / "model"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(model, work)  # the export writes openvino/ into the model folder: never into the package's
    data = out / "calibration"
    data.mkdir(parents=True, exist_ok=True)
    texts = json.loads(calibration.read_text())[:samples]
    (data / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    t0 = time.perf_counter()
    fp32 = SentenceTransformer(str(work), backend="openvino", device="cpu", local_files_only=True)
    fp32.save(str(work))  # keeps openvino/openvino_model.xml beside the weights
    t1 = time.perf_counter()
    # a local folder as the calibration "dataset": its train split, column "text"
    export_static_quantized_openvino_model(fp32, OVQuantizationConfig(num_samples=len(texts)), str(work),
                                           dataset_name=str(data), dataset_config_name="default", dataset_split="train",
                                           column_name="text")
    t2 = time.perf_counter()
    return {"versions": {p: md.version(p) for p in PACKAGES}, "model_folder": str(work),
            "fp32_graph": str(work / "openvino" / "openvino_model.xml"), "int8_graph": str(work / INT8_FILE),
            "calibration_texts": len(texts), "export_seconds": t1 - t0, "quantize_seconds": t2 - t1,
            "quantization": "export_static_quantized_openvino_model, OVQuantizationConfig(num_samples=N) defaults"}


def load(record: dict, threads: int) -> dict:
    """Both models as users load them, on ``threads`` inference threads with OpenVINO's latency hint."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    ov_config = {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY"}
    kw = {"backend": "openvino", "device": "cpu", "local_files_only": True}
    return {FP32: SentenceTransformer(record["model_folder"], model_kwargs={"ov_config": ov_config}, **kw),
            INT8: SentenceTransformer(record["model_folder"], model_kwargs={"ov_config": ov_config, "file_name": INT8_FILE}, **kw)}


def serve(models: dict, requests, replies) -> None:
    """Answer one JSON line per request until ``quit`` or the end of ``requests``."""
    import numpy as np

    kept: dict[str, list[str]] = {}
    for line in requests:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "texts":
                kept[req["id"]] = list(req["texts"])
            elif op == "run":
                texts = kept[req["id"]]
                models[req["model"]].encode(texts, batch_size=len(texts), convert_to_numpy=True, show_progress_bar=False)
            elif op == "embed":
                texts = json.loads(Path(req["texts_file"]).read_text())
                emb = models[req["model"]].encode(texts, batch_size=req["batch"], convert_to_numpy=True, show_progress_bar=False)
                np.save(req["out"], np.asarray(emb, dtype=np.float32))
            elif op not in ("ping", "quit"):
                raise ValueError(f"unknown op {op!r}")
            replies.write('{"ok": true}\n')
        except Exception as exc:  # noqa: BLE001 - said to the client, which stops with it
            replies.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        replies.flush()
        if op == "quit":
            return


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a sentence-transformers folder")
    p.add_argument("--out", required=True, help="folder for the copy, its OpenVINO IR and the calibration texts")
    p.add_argument("--calibration", required=True, help="a JSON list of texts to calibrate the INT8 model on")
    p.add_argument("--samples", type=int, default=128, help="calibration texts used (the first N)")
    p.add_argument("--threads", type=int, default=2, help="OpenVINO's inference threads")
    p.add_argument("--serve", action="store_true", help="after the export, answer requests on stdin")
    a = p.parse_args(argv)
    replies = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol's channel; the libraries' prints go to stderr
    os.dup2(2, 1)
    try:
        record = export(a.model, Path(a.out), Path(a.calibration), a.samples)
        models = load(record, a.threads) if a.serve else {}
    except Exception as exc:  # noqa: BLE001 - the client's one line says it
        replies.write(json.dumps({"ok": False, "error": f"export: {type(exc).__name__}: {exc}"}) + "\n")
        return 1
    (Path(a.out) / "openvino.json").write_text(json.dumps(record, indent=2))
    replies.write(json.dumps({"ok": True, **record}) + "\n")
    if a.serve:
        serve(models, sys.stdin, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
