"""Models named by their Hugging Face Hub id: resolved to the snapshot folder in a Hub cache filled
locally (tests/helpers/hub_cache.py), offline; not cached and offline, one line naming the id and how
to fetch it. The download branch runs against a stand-in for huggingface_hub's snapshot_download."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import constants

from tests.helpers.hub_cache import COMMIT, MINILM_ID, fill_hub_cache
from workbench.models.hub import IGNORE_PATTERNS, hub_folder, is_hub_id, model_source
from workbench.models.load import ModelError, minilm_path, resolve_model_path


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    hub = tmp_path_factory.mktemp("hf") / "hub"
    fill_hub_cache(hub)
    return hub


@pytest.fixture
def offline_cache(hub, monkeypatch) -> Path:
    """huggingface_hub reads this cache, offline (its constants are read when it is imported: set them as the env would)."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub


def test_a_cached_id_is_its_snapshot_folder_with_the_packaged_files(offline_cache):
    snapshot = offline_cache / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / COMMIT
    assert hub_folder(MINILM_ID) == snapshot
    assert model_source(MINILM_ID) == str(snapshot)
    assert resolve_model_path(MINILM_ID) == snapshot
    assert (snapshot / "model.safetensors").read_bytes()[:64] == (minilm_path() / "model.safetensors").read_bytes()[:64]


def test_the_embedding_folder_reader_and_the_task_read_the_cached_folder(offline_cache):
    from workbench.embed import check_task_of, read_folder

    info = read_folder(MINILM_ID)
    assert info.folder == (offline_cache / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / COMMIT).resolve()
    assert info.pooling == "mean" and info.normalize and info.output_dimension == 384
    assert check_task_of(MINILM_ID) == "embedding"


def test_built_in_names_and_existing_paths_come_back_unchanged(offline_cache, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "name").mkdir(parents=True)  # a folder written like an id: the folder wins
    for name in ("minilm", "tiny", "org/name", str(tmp_path / "missing"), "./runs/x"):
        assert model_source(name) == name
    assert is_hub_id(MINILM_ID) and is_hub_id("gpt2")
    assert not any(is_hub_id(s) for s in ("/abs/path", "./rel", "a/b/c", "a--b/c", "../up", "~/m", "name."))


def test_not_cached_and_offline_is_one_line_naming_the_id_and_the_fix(offline_cache):
    with pytest.raises(ModelError) as info:
        model_source("nobody/no-such-model")
    line = str(info.value)
    assert "\n" not in line and "'nobody/no-such-model'" in line, line
    assert "hf download nobody/no-such-model" in line and "HF_HUB_OFFLINE" in line and str(offline_cache) in line


def test_the_environment_saying_offline_is_respected_when_huggingface_hub_was_imported_online(hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _stand_in(downloaded=None))
    with pytest.raises(ModelError, match="hf download nobody/no-such-model"):
        hub_folder("nobody/no-such-model", cache_dir=hub)


def _stand_in(downloaded, error: Exception | None = None):
    calls: list[dict] = []

    def snapshot_download(repo_id, **kw):
        calls.append({"repo_id": repo_id, **kw})
        if kw.get("local_files_only"):
            raise huggingface_hub.errors.LocalEntryNotFoundError("not in the cache")
        if error is not None:
            raise error
        return str(downloaded)

    snapshot_download.calls = calls
    return snapshot_download


def test_online_a_missing_id_is_downloaded_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    fake = _stand_in(downloaded=tmp_path / "snap")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    assert hub_folder("org/model", cache_dir=tmp_path) == tmp_path / "snap"
    assert [c.get("local_files_only", False) for c in fake.calls] == [True, False]
    assert all(c["repo_id"] == "org/model" and c["cache_dir"] == tmp_path and c["ignore_patterns"] == list(IGNORE_PATTERNS)
               for c in fake.calls)


def test_online_a_failed_download_is_one_line_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    fake = _stand_in(None, error=OSError("404 Client Error: Repository Not Found for url\nmore detail"))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    with pytest.raises(ModelError) as info:
        hub_folder("org/model", cache_dir=tmp_path)
    line = str(info.value)
    assert "\n" not in line and "'org/model'" in line and "Repository Not Found" in line and "hf auth login" in line


def test_the_embedding_session_and_a_plan_file_take_the_cached_folder(offline_cache):
    from workbench.sessions.base import InputError
    from workbench.sessions.embed import EmbedSession
    from workbench.workflows.plan import PlanError, plan_config

    snapshot = str(offline_cache / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / COMMIT)
    assert EmbedSession(model=MINILM_ID).model == snapshot
    with pytest.raises(InputError, match="hf download nobody/no-such-model"):
        EmbedSession(model="nobody/no-such-model")
    cfg, _ = plan_config({"quick": True, "config": {"fine-tune": {"model": MINILM_ID}}})
    assert cfg.train.model == snapshot
    with pytest.raises(PlanError, match=r"config\.fine-tune: model 'nobody/no-such-model' .*hf download"):
        plan_config({"quick": True, "config": {"fine-tune": {"model": "nobody/no-such-model"}}})
