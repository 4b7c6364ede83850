"""The chosen graph ready to ship in ``<run>/chosen/``, written as one unit: the graph, its tokenizer, ``labels.json``,
``settings.json`` (what a runtime must reproduce; ONNX Runtime's own operators, which no other runtime runs) and
``predict.py`` (onnxruntime, tokenizers, numpy). ``tokenizers`` alone must first give the ids the workbench's gave."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Optional

from .. import runs
from ..runs import layout

GRAPH_NAME = layout.EXPORT_GRAPH  # the same file name as every graph of a run
TOKENIZER_FILE = "tokenizer.json"
SETTINGS_VERSION = 1
# the operator domains of ONNX Runtime's own kernels (contrib ops): no other runtime implements them
ORT_DOMAINS = ("com.microsoft", "com.ms.")
INPUTS_FED = ("input_ids", "attention_mask", "token_type_ids")  # what predict.py can feed


class ShipError(RuntimeError):
    """The chosen graph cannot be shipped as asked (the message says what and what to do)."""


@dataclass(frozen=True)
class ShippedGraph:
    out_dir: Path
    precision: str  # "int8" or "fp32"
    variant: str  # the search candidate's name
    contrib_ops: list[str]
    settings: dict

    @property
    def text(self) -> str:
        ops = ", ".join(self.contrib_ops) or "none"
        what = "the INT8 variant" if self.precision == "int8" else "the FP32 graph (no INT8 variant was chosen)"
        return f"shipped {what} {self.variant} into {self.out_dir}: predict.py, settings.json; ONNX Runtime's own operators: {ops}"


def _subgraph_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _subgraph_nodes(attr.g)
            for g in attr.graphs:
                yield from _subgraph_nodes(g)


def graph_facts(path: str | os.PathLike) -> dict:
    """What a graph needs, from its file (weights not loaded): inputs, output, opsets, contrib ops, external data."""
    import onnx
    from onnx import helper

    model = onnx.load(str(path), load_external_data=False)
    nodes = list(_subgraph_nodes(model.graph)) + [n for f in model.functions for n in f.node]
    own = sorted({n.op_type for n in nodes if n.domain.startswith(ORT_DOMAINS)})
    weights = {t.name for t in model.graph.initializer}
    inputs = [{"name": i.name, "dtype": helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type).name}
              for i in model.graph.input if i.name not in weights]
    external = sorted({kv.value for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
                       for kv in t.external_data if kv.key == "location"})
    return {"inputs": inputs, "output": model.graph.output[0].name, "contrib_ops": own, "external_data": external,
            "opsets": {(o.domain or "ai.onnx"): int(o.version) for o in model.opset_import}}


def tokenizer_settings(tokenizer, max_length: int) -> dict:
    """How the workbench's (Hugging Face) tokenizer pads and truncates, for ``settings.json``."""
    return {
        "padding": {"strategy": "longest in the batch", "side": getattr(tokenizer, "padding_side", "right") or "right",
                    "pad_id": int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
                    "pad_type_id": int(getattr(tokenizer, "pad_token_type_id", 0) or 0)},
        "truncation": {"max_length": int(max_length), "side": getattr(tokenizer, "truncation_side", "right") or "right"},
    }


def check_tokenizer(tokenizer_json: str, hf_tokenizer, texts: list[str], max_length: int, side: str) -> int:
    """How many texts ``tokenizers`` alone (as predict.py sets it up) tokenizes as the workbench's tokenizer did;
    :class:`ShipError` at the first that differs."""
    from tokenizers import Tokenizer

    alone = Tokenizer.from_str(tokenizer_json)
    alone.no_padding()
    alone.enable_truncation(max_length, direction=side)
    for start in range(0, len(texts), 512):
        chunk = texts[start:start + 512]
        want = hf_tokenizer(chunk, truncation=True, max_length=max_length, padding=False)["input_ids"]
        got = [e.ids for e in alone.encode_batch(chunk)]
        for text, w, g in zip(chunk, want, got):
            if list(w) != list(g):
                raise ShipError(f"tokenizer.json alone tokenizes {text[:80]!r} as {g[:12]}..., the model's tokenizer as {w[:12]}...: "
                                "predict.py would not reproduce the scores; ship the graph with transformers' tokenizer instead")
    return len(texts)


def _tokenizer_json(tokenizer_dir: Path, tokenizer) -> str:
    path = tokenizer_dir / TOKENIZER_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if not getattr(tokenizer, "is_fast", False):
        raise ShipError(f"the tokenizer in {tokenizer_dir} is a slow (Python) tokenizer with no {TOKENIZER_FILE}: the tokenizers "
                        "library cannot read it; save the model's fast tokenizer there (AutoTokenizer(..., use_fast=True))")
    return tokenizer.backend_tokenizer.to_str()


def ship_graph(graph: str | os.PathLike, baseline, out_dir: str | os.PathLike, *, precision: str, variant: str,
               quantization: str = "", note: str = "", unfused: Optional[str | os.PathLike] = None) -> ShippedGraph:
    """Write ``graph`` with its tokenizer, labels, settings and predict.py into ``out_dir``, as one unit."""
    import onnxruntime

    graph, out = Path(graph), Path(out_dir)
    if not graph.is_file():
        raise ShipError(f"the chosen graph {graph} is not there any more: run the audit (or the search) again")
    facts = graph_facts(graph)
    unknown = [i["name"] for i in facts["inputs"] if i["name"] not in INPUTS_FED or i["dtype"] not in ("int64", "int32")]
    if unknown:
        raise ShipError(f"the graph {graph.name} takes input(s) {unknown} that predict.py cannot feed (it feeds {list(INPUTS_FED)})")
    from ..runtime.graphmeta import disabled_optimizers

    tokenizer_dir = Path(baseline.tokenizer_dir)
    hf = baseline.load_tokenizer()
    tok_settings = tokenizer_settings(hf, baseline.max_length)
    tok_json = _tokenizer_json(tokenizer_dir, hf)
    texts = [r["text"] for e in baseline.eval_sets for r in e.load_examples()]
    checked = check_tokenizer(tok_json, hf, texts, baseline.max_length, tok_settings["truncation"]["side"])
    root = out.parent  # chosen/ lies in the run folder's root
    settings = {
        "format": SETTINGS_VERSION, "graph": GRAPH_NAME, "external_data": facts["external_data"], "precision": precision,
        "variant": variant, "quantization": quantization or None, "graph_kind": baseline.graph_kind,
        "fp32_graph_kept": precision == "fp32", "note": note or None, "labels": layout.SHIP_LABELS, "tokenizer": TOKENIZER_FILE,
        "max_length": int(baseline.max_length), "inputs": facts["inputs"], "output": facts["output"], **tok_settings,
        "batch_size": int(baseline.batch_size), "batch_order": baseline.scoring_order if baseline.scoring_order == "length" else "file",
        "onnxruntime_version": onnxruntime.__version__, "opsets": facts["opsets"], "contrib_ops": facts["contrib_ops"],
        "contrib_domain": "com.microsoft" if facts["contrib_ops"] else None,
        # a fusion left out on purpose (the fusion stage's timed choice): the session must not put it back
        "disabled_optimizers": list(disabled_optimizers(graph)),
        "unfused_export": _where(unfused, root),
        "tokenizer_checked_on": checked,
    }
    with runs.atomic_dir(out) as tmp:
        shutil.copyfile(graph, tmp / GRAPH_NAME)
        for name in facts["external_data"]:
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(graph.parent / name, tmp / name)
        for f in sorted(tokenizer_dir.iterdir()):
            if f.is_file() and f.name not in (GRAPH_NAME, layout.SHIP_SETTINGS, layout.SHIP_LABELS, layout.SHIP_PREDICT):
                shutil.copyfile(f, tmp / f.name)
        (tmp / TOKENIZER_FILE).write_text(tok_json, encoding="utf-8")
        (tmp / layout.SHIP_LABELS).write_text(json.dumps(list(baseline.class_names), indent=2) + "\n", encoding="utf-8")
        (tmp / layout.SHIP_SETTINGS).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        (tmp / layout.SHIP_PREDICT).write_text(predict_template(), encoding="utf-8")
    return ShippedGraph(out, precision, variant, facts["contrib_ops"], settings)


def _where(path: Optional[str | os.PathLike], root: Path) -> Optional[str]:
    """``path`` relative to the run folder when it lies in it, else absolute; None when there is no such file."""
    if path is None or not Path(path).is_file():
        return None
    path, root = Path(path).resolve(), root.resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def predict_template() -> str:
    """The text of ``predict.py`` (the package's ``resources/ship_predict.py``, with the settings file's name)."""
    text = resources.files("workbench.resources").joinpath("ship_predict.py").read_text(encoding="utf-8")
    return text.replace("__SETTINGS_FILE__", layout.SHIP_SETTINGS)


def ship_search(search, out_dir: str | os.PathLike, *, unfused: Optional[str | os.PathLike] = None) -> ShippedGraph:
    """Ship the search's choice: its INT8 variant, or the FP32 graph it measured (settings.json says why)."""
    from .baseline import load_baseline
    from .run import load_quant_result

    int8 = [c for c in search.candidates if c.precision == "int8" and c.result_path is not None]
    if not int8:
        raise ShipError("the search holds no quantized variant: nothing was measured against the FP32 graph, nothing to ship")
    best = search.best
    if best is not None and best.precision == "int8":
        result = load_quant_result(best.result_path)
        return ship_graph(best.onnx_path, load_baseline(result.baseline_path), out_dir, precision="int8", variant=best.name,
                          quantization=best.config.label if best.config is not None else "", unfused=unfused)
    base = load_baseline(load_quant_result(int8[0].result_path).baseline_path)
    fp32 = best if best is not None else next((c for c in search.candidates if c.precision == "fp32" and c.config is None), None)
    note = ("no INT8 variant met the budget and the speed guard, so this is the FP32 graph the variants were measured against: "
            + search.message)
    return ship_graph(fp32.onnx_path if fp32 is not None else base.fp32_path, base, out_dir, precision="fp32",
                      variant=fp32.name if fp32 is not None else f"{base.graph_kind}/fp32", note=note, unfused=unfused)
