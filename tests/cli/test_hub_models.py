"""``--model ORG/NAME``, a Hugging Face Hub id, through the real CLI in a subprocess whose environment
points huggingface_hub at a cache filled locally (tests/helpers/hub_cache.py) and keeps it offline
(``HF_HUB_OFFLINE=1``): the cached model is audited from its snapshot folder; an id neither cached nor
reachable is refused in one line, exit 2, before any stage runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.hub_cache import COMMIT, MINILM_ID, fill_hub_cache, hub_env


def cli(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=timeout)


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("hf-home")
    fill_hub_cache(home / "hub")
    return home


def test_an_id_neither_cached_nor_reachable_is_one_line_and_exit_2_before_any_stage(hf_home, tmp_path):
    out = tmp_path / "audit"
    r = cli("audit", "--model", "nobody/no-such-model", "--data", "builtin", "--quick", "--out", out, env=hub_env(hf_home))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stdout == "", r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'nobody/no-such-model'" in lines[0] and "hf download nobody/no-such-model" in lines[0], r.stderr
    assert str(hf_home / "hub") in lines[0] and "HF_HUB_OFFLINE" in lines[0]
    assert not out.exists()  # refused before the audit made anything (no stage, no export)


@pytest.mark.slow
def test_the_embedding_audit_of_a_cached_hub_id_reads_its_snapshot_folder_offline(hf_home, tmp_path):
    texts = [f"review number {i} of a film about {w}" for i, w in enumerate(["ships", "cats", "war", "love", "rain", "space"])]
    pd.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts}).to_csv(tmp_path / "corpus.csv", index=False)
    pd.DataFrame({"query": ["a film about ships", "a film about cats"], "relevant": ["d0", "d1"]}).to_csv(tmp_path / "pairs.csv",
                                                                                                        index=False)
    out = tmp_path / "audit"
    r = cli("audit", "--model", MINILM_ID, "--data", tmp_path / "corpus.csv", "--queries", tmp_path / "pairs.csv",
            "--presets", "dynamic", "--no-speed", "--n-boot", "100", "--quick", "--out", out, env=hub_env(hf_home))
    assert r.returncode in (0, 3), r.stdout[-2000:] + r.stderr[-2000:]
    snapshot = hf_home / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / COMMIT
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["folder"] == str(snapshot.resolve())
    assert summary["model"]["pooling"] == "mean" and summary["model"]["dimension"] == 384
    assert summary["title"].endswith("all-MiniLM-L6-v2")  # the repo's name, not the snapshot's commit hash
    assert f"embedding model {snapshot}" in r.stdout
