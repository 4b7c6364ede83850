"""Predict with the graph in this folder: ONNX Runtime, the tokenizers library and NumPy only (no PyTorch).

    python predict.py "a text" "another text"          # one line per text: the label, then each class's probability
    printf 'a text\\nanother\\n' | python predict.py     # the texts from stdin, one per line
    from predict import predict; predict(["a text"])    # [{"label": ..., "probabilities": {...}}, ...]

``settings.json`` says what the graph needs (its inputs and their types, the maximum length, the padding,
the ONNX Runtime version it was checked with, the ONNX Runtime operators it uses); ``labels.json`` names
the classes. Texts are scored in batches sorted by token length, each padded to its own longest text,
the way the audit scored them: a dynamic INT8 graph computes its activation scales per batch, so
another batching can change a few labels.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
SETTINGS_FILE = "__SETTINGS_FILE__"  # the workbench writes its name here when it ships the graph
SETTINGS = json.loads((HERE / SETTINGS_FILE).read_text(encoding="utf-8"))
LABELS = json.loads((HERE / SETTINGS["labels"]).read_text(encoding="utf-8"))
_DTYPES = {"int64": np.int64, "int32": np.int32}
_loaded: dict = {}


def load():
    """The tokenizer (truncating, not padding) and the ONNX Runtime session, opened once."""
    if not _loaded:
        tokenizer = Tokenizer.from_file(str(HERE / SETTINGS["tokenizer"]))
        tokenizer.no_padding()  # each batch is padded below, to its own longest text
        cut = SETTINGS["truncation"]
        tokenizer.enable_truncation(cut["max_length"], direction=cut["side"])
        _loaded["tokenizer"] = tokenizer
        _loaded["session"] = ort.InferenceSession(str(HERE / SETTINGS["graph"]), providers=["CPUExecutionProvider"],
                                                  disabled_optimizers=SETTINGS.get("disabled_optimizers") or None)
    return _loaded["tokenizer"], _loaded["session"]


def feed(encodings) -> dict:
    """One batch as the graph's inputs: every row padded to the longest of the batch."""
    pad = SETTINGS["padding"]
    fields = {"input_ids": ("ids", pad["pad_id"]), "attention_mask": ("attention_mask", 0),
              "token_type_ids": ("type_ids", pad["pad_type_id"])}
    width = max(len(e.ids) for e in encodings)
    out = {}
    for spec in SETTINGS["inputs"]:
        attr, value = fields[spec["name"]]
        arr = np.full((len(encodings), width), value, dtype=_DTYPES[spec["dtype"]])
        for r, e in enumerate(encodings):
            row = getattr(e, attr)
            if pad["side"] == "left":
                arr[r, width - len(row):] = row
            else:
                arr[r, :len(row)] = row
        out[spec["name"]] = arr
    return out


def logits(texts, batch_size=None) -> np.ndarray:
    """The graph's logits for ``texts``, in their order (batches of ``batch_size``, default settings.json's)."""
    tokenizer, session = load()
    texts = [str(t) for t in texts]
    out = np.zeros((len(texts), len(LABELS)), dtype=np.float32)
    if not texts:
        return out
    encodings = tokenizer.encode_batch(texts)
    size = int(batch_size or SETTINGS["batch_size"])
    order = np.arange(len(texts))
    if SETTINGS["batch_order"] == "length" and size > 1:
        order = np.argsort(np.array([len(e.ids) for e in encodings]), kind="stable")
    for start in range(0, len(texts), size):
        idx = order[start:start + size]
        out[idx] = session.run([SETTINGS["output"]], feed([encodings[i] for i in idx]))[0]
    return out


def predict(texts, batch_size=None) -> list:
    """``[{"label": name, "probabilities": {name: p, ...}}, ...]``, one per text."""
    raw = logits(texts, batch_size).astype(np.float64)
    probs = np.exp(raw - raw.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    return [{"label": LABELS[int(p.argmax())], "probabilities": {name: float(v) for name, v in zip(LABELS, p)}} for p in probs]


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    texts = args or [line.rstrip("\r\n") for line in sys.stdin if line.strip()]
    for row in predict(texts):
        print("\t".join([row["label"], *(f"{name}={p:.4f}" for name, p in row["probabilities"].items())]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
