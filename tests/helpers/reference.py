"""A small committed reference for the audits (tests/fixtures/reference): a classifier and a
sentence-embedding model of a few tens of KB each, their data, and what a fixed-seed audit of each
gave: every row's predicted class (and FP32 logits), every slice's accuracy or NDCG@10.

    .venv/bin/python -m helpers.reference --models     # (cd tests) once: the models and the data
    .venv/bin/python -m helpers.reference --expected   # (cd tests) what the audits give today, on this stack
    .venv-current/bin/python -m helpers.reference --expected   # (cd tests) and on the current stack

The test (tests/unit/audit/test_reference.py) runs the same audits and compares. The quantized graphs
are made with this module's pinned preset options (7-bit weights, as on a CPU without VNNI), so the
graphs and their integer arithmetic are the same on every CPU; what may differ between CPUs is the
order of float sums, hence logits compared within a tolerance and classes compared exactly.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "reference"
CLASSIFIER = HERE / "classifier"
EMBEDDER = HERE / "embedder"
CLASSIFIER_DATA = HERE / "reviews.csv"
CORPUS = HERE / "corpus.csv"
PAIRS = HERE / "pairs.csv"
EXPECTED = HERE / "expected.json"
PRESETS = ("dynamic", "dynamic-per-channel")
SEED = 0

WORDS = ("the a film book service trip meal song was is felt not but honestly i think this that our "
         "awful terrible boring dreadful bad okay average ordinary fine plain great wonderful excellent superb lovely "
         ", . ! ? :").split()


def vocab() -> list[str]:
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    return list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + letters + ["##" + c for c in letters]
                              + [f"w{i:03d}" for i in range(130)]))  # 200+ ids: synthetic timing batches draw from the first 200


def _tokenizer(folder: Path):
    from transformers import BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab()) + "\n", encoding="utf-8")
    return BertTokenizer(str(folder / "vocab.txt"), do_lower_case=True)


def _bert_config(**kw):
    from transformers import BertConfig

    return BertConfig(vocab_size=len(vocab()), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, **kw)


def make_classifier():
    """The tiny 3-class classifier of the audit tests, on this module's small vocabulary, trained a few seconds."""
    import torch
    from transformers import BertForSequenceClassification

    from helpers.audit_fixtures import CLASSES, make_rows, write_csv

    torch.manual_seed(SEED)
    tok = _tokenizer(CLASSIFIER)
    model = BertForSequenceClassification(_bert_config(num_labels=3, id2label=dict(enumerate(CLASSES)),
                                                       label2id={c: i for i, c in enumerate(CLASSES)}))
    rows = make_rows(480, seed=100)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(SEED)
    model.train()
    for _ in range(150):
        idx = torch.randint(0, len(rows), (32,), generator=g).tolist()
        enc = tok([rows[i]["review"] for i in idx], padding=True, truncation=True, max_length=32, return_tensors="pt")
        loss = model(**enc, labels=torch.tensor([CLASSES.index(rows[i]["sentiment"]) for i in idx])).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    model.save_pretrained(str(CLASSIFIER))
    tok.save_pretrained(str(CLASSIFIER))
    write_csv(CLASSIFIER_DATA, make_rows(240, seed=7))
    return model


def make_embedder(classifier) -> None:
    """The classifier's encoder with mean pooling and normalization, saved as a sentence-transformers folder,
    and a retrieval task over keyword sentences: a query names a subject and a class word; the relevant
    documents are the sentences about that subject in that class."""
    from sentence_transformers import SentenceTransformer, models

    from helpers.audit_fixtures import CLASSES, SUBJECTS, WORDS as CLASS_WORDS, make_rows

    base = HERE / "_base"
    tok = _tokenizer(base)
    classifier.bert.save_pretrained(str(base))
    tok.save_pretrained(str(base))
    word = models.Transformer(str(base), max_seq_length=32)
    SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), pooling_mode="mean"),
                                 models.Normalize()], device="cpu").save(str(EMBEDDER))
    import shutil

    shutil.rmtree(base)
    import pandas as pd

    docs = make_rows(200, seed=11)
    pd.DataFrame([{"id": r["id"], "text": r["review"]} for r in docs]).to_csv(CORPUS, index=False)
    rng = random.Random(SEED)
    pairs = []
    for subject in SUBJECTS:
        for label in CLASSES:
            query = f"{subject} {rng.choice(CLASS_WORDS[label])}"
            for r in docs:
                if r["sentiment"] == label and subject in r["review"]:
                    pairs.append({"query": query, "relevant": r["id"], "kind": label})
    pd.DataFrame(pairs).to_csv(PAIRS, index=False)


def pinned_machine():
    """The preset options every CPU builds the reference's graphs with: 7-bit weights (no u8s8 saturation anywhere)."""
    from workbench.quant.config import MachineDefaults

    return MachineDefaults(True, "7-bit weights, pinned by the committed reference so every CPU builds the same graphs")


def classifier_figures(out: Path) -> dict[str, Any]:
    """A fixed-seed audit of the committed classifier into ``out``: every row's FP32 logits; per preset, every
    row's class under FP32 and under the variant, and each slice's accuracy under both."""
    import numpy as np

    from workbench.audit import AuditConfig, run_audit
    from workbench.quant.baseline import BASELINE_FILE
    from workbench.runs import layout

    cfg = AuditConfig(data=str(CLASSIFIER_DATA), text_column="review", label_column="sentiment", slice_columns=("channel",),
                      presets=PRESETS, budget_overall=0.5, budget_slice=0.5, min_speedup=0.0, quick=True, n_boot=200,
                      seed=SEED, max_length=32, node_error_samples=0)
    result = run_audit(str(CLASSIFIER), cfg, out, log=lambda line: None)
    summary = json.loads(Path(result.summary_path).read_text())
    quant = out / layout.QUANTIZE_DIR
    baseline = json.loads((out / layout.BASELINE / BASELINE_FILE).read_text())
    figures: dict[str, Any] = {"fp32_logits": np.load(out / baseline["eval_sets"][0]["fp32_logits_path"]).round(6).tolist(),
                               "within_budget": sorted(r["name"] for r in summary["quantization"] if r["within_budget"]),
                               "variants": {}}
    for row in summary["quantization"]:
        report = json.loads((quant / row["name"] / layout.QUANTIZE_FILE).read_text())["report"]
        figures["variants"][row["name"]] = {
            "fp32_classes": report["reference_pred"], "int8_classes": report["candidate_pred"],
            "accuracy": {s["slice"]: [s["fp32_accuracy"], s["int8_accuracy"]] for s in [row["overall"], *row["slices"]]}}
    return figures


def embedder_figures(out: Path) -> dict[str, Any]:
    """A fixed-seed embedding audit of the committed model into ``out``: per graph (the fused FP32 graph and
    each variant) and per query slice, NDCG@10, recall@10 and MRR@10."""
    from workbench.embed.audit import EmbedAuditConfig, run_embed_audit

    cfg = EmbedAuditConfig(data=str(CORPUS), queries=str(PAIRS), slice_columns=("kind",), presets=PRESETS,
                           n_boot=200, seed=SEED, time_speed=False, reference_check=False, min_speedup=0.0)
    result = run_embed_audit(str(EMBEDDER), cfg, out, log=lambda line: None)
    summary = json.loads(Path(result.summary_path).read_text())
    return {"within_budget": sorted(v["name"] for v in summary["evaluation"]["variants"] if v["meets_budget"]),
            "variants": {v["name"]: {s["name"]: s["variant"] for s in v["retrieval"]["slices"]}
                         for v in summary["evaluation"]["variants"]}}


def pinned_machine_defaults(flags=None):
    """What every CPU builds the reference's graphs with: 7-bit weights, so no u8s8 product saturates anywhere
    and the quantized graphs, and their integer sums, are the same on every CPU."""
    from workbench.quant.config import MachineDefaults

    return MachineDefaults(True, "7-bit weights, pinned by the committed reference so every CPU builds the same graphs")


def stack() -> str:
    """The key of this stack's reference: ONNX Runtime's and torch's versions (major.minor), which make the graphs."""
    import onnxruntime
    import torch

    ort, pt = (".".join(v.split("+")[0].split(".")[:2]) for v in (onnxruntime.__version__, torch.__version__))
    return f"onnxruntime {ort} torch {pt}"


def audit_figures(tmp: Path) -> dict[str, Any]:
    """Both fixed-seed audits, with the INT8 weights pinned (:func:`pinned_machine_defaults`)."""
    from unittest import mock

    from workbench import quant
    from workbench.quant import config

    with mock.patch.object(config, "machine_defaults", pinned_machine_defaults), \
            mock.patch.object(quant, "machine_defaults", pinned_machine_defaults):
        return {"classifier": classifier_figures(tmp / "classifier"), "embedder": embedder_figures(tmp / "embedder")}


def main(argv=None) -> int:
    import tempfile

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", action="store_true", help="write the models and the data")
    p.add_argument("--expected", action="store_true", help="write this stack's entry of expected.json from today's audits")
    args = p.parse_args(argv)
    if args.models:
        HERE.mkdir(parents=True, exist_ok=True)
        make_embedder(make_classifier())
    if args.expected:
        expected = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
        with tempfile.TemporaryDirectory() as tmp:
            expected[stack()] = audit_figures(Path(tmp))
        EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
