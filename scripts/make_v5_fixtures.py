"""Write tests/fixtures/v5/: tiny BERT classifiers really saved by transformers 5 (run on the current stack).

    .venv-current/bin/python scripts/make_v5_fixtures.py [--out tests/fixtures/v5]

Two folders, a few tens of KB each, and what transformers 5 computed with them:

- ``generic_fast/``: the tokenizer is a plain fast tokenizer (``PreTrainedTokenizerFast`` over a
  WordPiece ``tokenizers`` object), which transformers 5 saves as ``"tokenizer_class":
  "TokenizersBackend"`` with ``extra_special_tokens`` as a list and no special_tokens_map.json;
- ``bert_tokenizer/``: the same model with a ``BertTokenizer``;
- ``expected.json``: the versions that saved them, and for a few texts the input ids and logits
  transformers 5 produced, which the training stack's loading is checked against.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

TEXTS = ["a good film with a great cast", "the plot is not funny at all", "bad acting , worse script !"]
WORDS = ("a an the is was not no at all very good great bad worse best film movie plot cast acting script funny "
         "boring story with and but of to it this that , . ! ? i you he she they love hate fun dull").split()
EXTRA_TOKEN = "[ENT]"  # an extra special token: what transformers 5 writes as a list


def vocab() -> list[str]:
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    # 256+ entries: the workbench times graphs on synthetic batches drawn from the first 200 ids
    return (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + letters + ["##" + c for c in letters]
            + [f"w{i:03d}" for i in range(150)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="tests/fixtures/v5")
    args = p.parse_args(argv)

    import tokenizers
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer, PreTrainedTokenizerFast

    if int(transformers.__version__.split(".")[0]) < 5:
        sys.exit(f"make_v5_fixtures: run this with transformers 5 (.venv-current/bin/python), got {transformers.__version__}")
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    words = vocab()
    ids = {w: i for i, w in enumerate(words)}
    wp = Tokenizer(WordPiece(ids, unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    wp.decoder = decoders.WordPiece()
    generic = PreTrainedTokenizerFast(tokenizer_object=wp, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                      sep_token="[SEP]", mask_token="[MASK]", model_max_length=128,
                                      extra_special_tokens=[EXTRA_TOKEN])
    vocab_file = out / "vocab.txt"
    vocab_file.write_text("\n".join(words) + "\n")
    bert_tok = BertTokenizer(vocab_file=str(vocab_file), model_max_length=128)
    vocab_file.unlink()

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(generic), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128, num_labels=2,
                        id2label={0: "rotten", 1: "fresh"}, label2id={"rotten": 0, "fresh": 1})
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():  # a head that separates the classes a little, so predictions are not all one label
        model.classifier.weight.mul_(20.0)

    expected = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                "torch": torch.__version__, "texts": TEXTS, "folders": {}}
    for name, tok in (("generic_fast", generic), ("bert_tokenizer", bert_tok)):
        folder = out / name
        model.save_pretrained(str(folder))
        tok.save_pretrained(str(folder))
        enc = tok(TEXTS, padding=True, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits
        expected["folders"][name] = {
            "tokenizer_class": json.loads((folder / "tokenizer_config.json").read_text()).get("tokenizer_class"),
            "input_ids": enc["input_ids"].tolist(), "logits": logits.tolist()}
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    sizes = {p.relative_to(out).as_posix(): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    print(f"make_v5_fixtures: transformers {transformers.__version__} wrote {out} ({sum(sizes.values()) / 1024:.0f} KB): "
          + ", ".join(f"{k} {v // 1024} KB" for k, v in sizes.items() if v > 4096))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
