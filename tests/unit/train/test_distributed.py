"""The same loop under torchrun with DistributedDataParallel (gloo, 2 processes, tiny model)."""

from __future__ import annotations

import pytest

from workbench.train.distributed import run_distributed
from workbench.train import TrainConfig, TrainConfigError


@pytest.mark.slow  # a long run for make test-fast: 10 s each on 2 cores
@pytest.mark.parametrize("backend", ["eager", "ortmodule"])
def test_two_ranks_end_with_identical_weights(tmp_path, backend, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a run folder relative to the caller's directory, wherever that is
    d = run_distributed(TrainConfig.quick(max_steps=4, eval_every=0, save_graphs=False), backend, nproc=2, run_dir="ddp")
    assert (tmp_path / "ddp" / backend / "train.json").is_file() and (tmp_path / "ddp" / backend / "rank1.json").is_file()
    assert d.process_group_backend == "gloo" and d.run.world_size == 2
    assert d.run.status == "ok" and d.run.executed_in_onnxruntime is (backend == "ortmodule")
    assert [r.rank for r in d.ranks] == [0, 1] and all(r.steps == 4 for r in d.ranks)
    assert all(r.weights_sha256 != r.initial_weights_sha256 for r in d.ranks)  # it trained
    assert d.identical_weights, [r.weights_sha256 for r in d.ranks]
    # each rank saw its own half of every global batch of 32
    assert d.ranks[0].final_loss != d.ranks[1].final_loss
    assert all(s.examples == 32 for s in d.run.steps)


def test_compile_is_not_offered_under_ddp(tmp_path):
    with pytest.raises(TrainConfigError, match="eager.*ortmodule"):
        run_distributed(TrainConfig.quick(), "compile", run_dir=tmp_path)
