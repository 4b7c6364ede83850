"""A small classifier "fine-tuned elsewhere" and a labelled file, for the audit tests: a tiny BERT
(MiniLM's tokenizer) trained for a few seconds on keyword sentences with 3 named classes, saved as
a Hugging Face folder, and a CSV with a slice column."""

from __future__ import annotations

import random
from pathlib import Path

CLASSES = ("negative", "neutral", "positive")
WORDS = {
    "negative": ["awful", "terrible", "boring", "dreadful", "bad"],
    "neutral": ["okay", "average", "ordinary", "fine", "plain"],
    "positive": ["great", "wonderful", "excellent", "superb", "lovely"],
}
SUBJECTS = ["the film", "this book", "the service", "our trip", "the meal", "that song"]
FRAMES = ["{s} was {w}.", "honestly, {s} felt {w}!", "i think {s} is {w}", "{s} was not {w}, but {w2}?", "{s}: {w}, {w2}, {w}"]


def make_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = CLASSES[i % 3]
        w, w2 = rng.choice(WORDS[label]), rng.choice(WORDS[label])
        text = rng.choice(FRAMES).format(s=rng.choice(SUBJECTS), w=w, w2=w2)
        rows.append({"review": text, "sentiment": label, "channel": rng.choice(["web", "email"]), "id": i})
    return rows


def write_csv(path: Path, rows: list[dict], label_as_id: bool = False) -> Path:
    import pandas as pd

    df = pd.DataFrame(rows)
    if label_as_id:
        df["sentiment"] = df["sentiment"].map({c: i for i, c in enumerate(CLASSES)})
    df.to_csv(path, index=False)
    return path


def train_tiny_classifier(folder: Path, steps: int = 80, seed: int = 0) -> Path:
    """Fine-tune the tiny BERT on keyword sentences (seconds) and save it with save_pretrained."""
    import torch

    from workbench.models.load import load_model

    loaded = load_model("tiny", num_labels=3, id2label=dict(enumerate(CLASSES)), dropout=False, seed=seed)
    model, tok = loaded.model, loaded.tokenizer
    rows = make_rows(480, seed=seed + 100)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    g = torch.Generator().manual_seed(seed)
    for step in range(steps):
        idx = torch.randint(0, len(rows), (32,), generator=g).tolist()
        enc = tok([rows[i]["review"] for i in idx], padding=True, truncation=True, max_length=32, return_tensors="pt")
        labels = torch.tensor([CLASSES.index(rows[i]["sentiment"]) for i in idx])
        loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder
