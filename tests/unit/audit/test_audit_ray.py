"""The audit's scoring on Ray (``--engine ray``): the same audit run locally and on a local Ray
instance scores every row alike (same class, logits and embeddings within 1e-5), and so gives the same
per-slice figures and verdict; Ray is started on 127.0.0.1 with no dashboard and nothing of it is left
running after; a bad engine or an unreachable cluster is one line and exit code 2 before any stage."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from helpers import recorded_audit
from helpers.audit_fixtures import make_rows, train_tiny_classifier, write_csv

TOL = recorded_audit.TOL


def _raylets() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "raylet"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def _wait_gone(pids: set[int], seconds: float = 60.0) -> dict[int, str]:
    """Those of ``pids`` still running after ``seconds``, with their command lines. On 2 busy cores one Ray process
    once outlived ``ray.shutdown()`` by over 20 s and was gone minutes later: slow to exit, not left behind."""
    deadline = time.time() + seconds
    left = pids & _raylets()
    while left and time.time() < deadline:
        time.sleep(0.5)
        left = pids & _raylets()
    return {p: Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:300]
            for p in left if Path(f"/proc/{p}").exists()}


def _recorder(fn, pooled, calls: list):
    """``fn`` wrapped (a plain function, so a method stays a method): each call's result is recorded in
    ``calls`` beside whether it ran on a Ray pool."""

    def recorded(*args, **kwargs):
        out = fn(*args, **kwargs)
        calls.append((pooled(args, kwargs), np.asarray(out)))
        return out

    return recorded


def _run_recorded(argv: list[str], target, attr: str, pooled):
    """``workbench`` with ``argv``, ``target.attr`` recorded; ray.init's keyword arguments recorded too.
    Returns (exit code, recorded calls, ray.init calls, raylet pids that appeared during the run, stderr)."""
    import contextlib
    import io

    import ray

    from workbench.cli import main

    inits, calls = [], []
    real_init = ray.init
    before = _raylets()
    seen: set[int] = set()

    def spy_init(*args, **kwargs):
        inits.append(kwargs)
        out = real_init(*args, **kwargs)
        seen.update(_raylets() - before)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(target, attr, _recorder(getattr(target, attr), pooled, calls))
        mp.setattr(ray, "init", spy_init)
        mp.delenv("RAY_ADDRESS", raising=False)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(argv)
    return code, calls, inits, seen, err.getvalue()


# ---- the classifier's audit -------------------------------------------------------------------
@pytest.fixture(scope="module", params=["csv", "parquet"])
def classifier_runs(tmp_path_factory, request):
    """The same audit (one dynamic preset, loose budgets, speed guard off) run locally and with --engine ray,
    on the rows as a CSV file and as a Parquet file."""
    import pandas as pd

    from workbench.runtime import ortinfer

    tmp = tmp_path_factory.mktemp("audit-ray")
    model = train_tiny_classifier(tmp / "classifier")
    data = write_csv(tmp / "reviews.csv", make_rows(120, seed=7))
    if request.param == "parquet":
        data = tmp / "reviews.parquet"
        pd.read_csv(tmp / "reviews.csv").to_parquet(data, index=False)
    runs = {}
    for engine in ("local", "ray"):
        out = tmp / engine
        argv = ["audit", "--model", str(model), "--data", str(data), "--text-column", "review", "--label-column", "sentiment",
                "--slice-column", "channel", "--out", str(out), "--quick", "--presets", "dynamic", "--budget-overall", "0.99",
                "--budget-slice", "0.99", "--min-speedup", "0", "--engine", engine]
        if engine == "ray":
            argv += ["--ray-actors", "2"]
        code, calls, inits, seen, err = _run_recorded(argv, ortinfer, "predict_dataset", lambda a, k: k.get("pool") is not None)
        runs[engine] = {"code": code, "calls": calls, "inits": inits, "raylets": seen, "stderr": err,
                        "summary": json.loads((out / "summary.json").read_text())}
    return runs


@pytest.mark.slow
@pytest.mark.heavy  # the module's two audits (one on a Ray instance started for it) take over 60 s on 2 cores
@pytest.mark.timeout(900)
def test_ray_scores_every_row_as_the_local_engine_does(classifier_runs):
    local, ray_run = classifier_runs["local"], classifier_runs["ray"]
    assert local["code"] == ray_run["code"] == 0, ray_run["summary"]["verdict"]
    # the FP32 graph and the INT8 variant each scored every row on the pool; the batch-dependence check stays local
    assert not any(pooled for pooled, _ in local["calls"])
    assert sum(pooled for pooled, _ in ray_run["calls"]) == 2
    assert len(local["calls"]) == len(ray_run["calls"])
    n = local["summary"]["data"]["rows_scored"]
    for (_, a), (_, b) in zip(local["calls"], ray_run["calls"]):
        assert a.shape == b.shape
        assert (a.argmax(-1) == b.argmax(-1)).all()
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL)
    assert [c.shape[0] for pooled, c in ray_run["calls"] if pooled] == [n, n]


@pytest.mark.slow
@pytest.mark.heavy  # the module's two audits (one on a Ray instance started for it) take over 60 s on 2 cores
@pytest.mark.timeout(900)
def test_ray_gives_the_same_slices_and_verdict(classifier_runs):
    a, b = classifier_runs["local"]["summary"], classifier_runs["ray"]["summary"]
    recorded_audit.assert_same_figures(a, b)
    assert "on Ray" in b["quantization"][0]["scoring"]["note"]


@pytest.mark.slow
@pytest.mark.heavy  # the module's two audits (one on a Ray instance started for it) take over 60 s on 2 cores
@pytest.mark.timeout(900)
def test_both_engines_draw_each_graphs_rows_rate_and_actors(classifier_runs):
    n = classifier_runs["local"]["summary"]["data"]["rows_scored"]
    for engine, where in (("local", "this process"), ("ray", "2 Ray actor(s)")):
        lines = classifier_runs[engine]["stderr"].splitlines()
        for graph in ("FP32", "dynamic"):
            done = [ln for ln in lines if ln.strip().startswith(f"scoring {graph} [") and f"] {n}/{n} rows, " in ln]
            assert done and done[-1].endswith(f" rows/s, {where}"), (engine, graph, lines)
            assert any(f"scoring {graph} [" in ln and f"] 0/{n} rows, " in ln for ln in lines), (engine, graph)


@pytest.mark.slow
@pytest.mark.heavy  # the module's two audits (one on a Ray instance started for it) take over 60 s on 2 cores
@pytest.mark.timeout(900)
def test_ray_is_started_on_127_0_0_1_without_a_dashboard_and_stopped_after(classifier_runs):
    import ray

    run = classifier_runs["ray"]
    assert len(run["inits"]) == 1
    kw = run["inits"][0]
    assert kw["_node_ip_address"] == "127.0.0.1" and kw["include_dashboard"] is False and "address" not in kw
    assert kw["num_cpus"] == 2  # two actors of one thread
    assert run["raylets"], "no raylet was seen while the audit ran: the check below would prove nothing"
    assert not ray.is_initialized()
    left = _wait_gone(run["raylets"])
    assert not left, f"a Ray process the audit started is still running: {left}"
    assert classifier_runs["local"]["inits"] == []  # local never touches Ray


@pytest.mark.slow
@pytest.mark.heavy  # a local Ray instance started and stopped, the tiny graph scored on it and here: over 60 s on 2 cores
@pytest.mark.timeout(600)
def test_the_pool_pads_text_batches_on_its_workers_and_streams_back_progress(exported_tiny, quick_data, monkeypatch):
    from workbench.embed.encode import OnnxEncoder
    from workbench.runtime import engine
    from workbench.runtime.ortinfer import predict_dataset, scoring_batches
    from workbench.runtime.progress import scoring_progress
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    tok, ds, path = exported_tiny.load_tokenizer(), quick_data["test"], exported_tiny.onnx_path
    texts = list(ds["text"])
    seen: list = []
    with engine.scoring_engine(engine.EngineConfig("ray", ray_actors=2)) as pool, scoring_progress(seen.append, every_s=0):
        on_ray = predict_dataset(path, tok, ds, 128, 16, pool=pool, label="FP32")
        emb_ray = OnnxEncoder(path, tok, 128, pool=pool, label="enc").encode(texts, 8)
    here = predict_dataset(path, tok, ds, 128, 16)
    emb_here = OnnxEncoder(path, tok, 128).encode(texts, 8)
    assert (on_ray.argmax(-1) == here.argmax(-1)).all()
    np.testing.assert_allclose(on_ray, here, rtol=0, atol=TOL)
    np.testing.assert_allclose(emb_ray, emb_here, rtol=0, atol=TOL)
    fp32 = [p for p in seen if p.graph == "FP32"]
    rows = [p.rows for p in fp32]
    assert rows[0] == 0 and rows[-1] == len(ds) and rows == sorted(rows)
    # the batches come back in any order, each counted once: the steps are the batches' sizes
    assert sorted(np.diff(rows).tolist()) == sorted(len(b) for b in scoring_batches(tok, ds, 128, 16))
    assert all(p.actors == 2 and p.total == len(ds) for p in fp32)
    assert [p.rows for p in seen if p.graph == "enc"][-1] == len(texts)


# ---- the embedding model's audit ----------------------------------------------------------------
@pytest.fixture(scope="module")
def embedding_runs(tmp_path_factory):
    from helpers.embed_fixtures import make_tiny_st_folder

    from workbench.embed import encode

    tmp = tmp_path_factory.mktemp("embed-ray")
    folder = make_tiny_st_folder(tmp / "st")
    rows = [{"text": r["review"], "channel": r["channel"]} for r in make_rows(40, seed=3)]
    import pandas as pd

    pd.DataFrame(rows).to_csv(tmp / "corpus.csv", index=False)
    runs = {}
    for engine in ("local", "ray"):
        out = tmp / engine
        argv = ["audit", "--model", str(folder), "--data", str(tmp / "corpus.csv"), "--slice-column", "channel",
                "--presets", "dynamic", "--no-speed", "--quick", "--out", str(out), "--engine", engine]
        code, calls, inits, seen, err = _run_recorded(argv, encode.OnnxEncoder, "encode", lambda a, k: a[0].pool is not None)
        runs[engine] = {"code": code, "calls": calls, "inits": inits, "raylets": seen, "stderr": err,
                        "summary": json.loads((out / "summary.json").read_text())}
    return runs


@pytest.mark.slow
@pytest.mark.heavy  # the module's two audits (one on a Ray instance started for it) take over 60 s on 2 cores
@pytest.mark.timeout(900)
def test_ray_encodes_the_corpus_as_the_local_engine_does(embedding_runs):
    import ray

    local, ray_run = embedding_runs["local"], embedding_runs["ray"]
    assert local["code"] == ray_run["code"]
    # the export's validation encodes here in both runs; the corpus, with each of the three graphs (fp32, fused,
    # dynamic), on the pool
    assert [p for p, _ in local["calls"]] == [False] * 4
    assert [p for p, _ in ray_run["calls"]] == [False, True, True, True]
    for (_, a), (_, b) in zip(local["calls"], ray_run["calls"], strict=True):
        assert a.shape == b.shape and a.shape[0] == 40
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL)
    recorded_audit.assert_same_embedding_figures(local["summary"], ray_run["summary"])
    kw = ray_run["inits"][0]
    assert kw["_node_ip_address"] == "127.0.0.1" and kw["include_dashboard"] is False
    assert not ray.is_initialized() and not _wait_gone(ray_run["raylets"])


# ---- bad settings: one line, exit 2, before any stage --------------------------------------------
@pytest.mark.parametrize("task", ["classification", "embedding"])
@pytest.mark.parametrize("flags, says", [
    (["--engine", "spark"], "engine must be one of local, ray, got 'spark'"),
    (["--engine", "ray", "--ray-address", "127.0.0.1:1"], "nothing answers at 127.0.0.1:1"),
    (["--ray-address", "127.0.0.1:1"], "is for engine ray"),
    (["--engine", "ray", "--ray-threads", "0"], "--ray-threads must be a whole number of at least 1"),
])
def test_a_bad_engine_or_an_unreachable_cluster_is_one_line_and_exit_2(tmp_path, capsys, task, flags, says):
    from workbench.cli import main

    (tmp_path / "data.csv").write_text("text,label\na,b\n")
    out = tmp_path / "out"
    code = main(["audit", "--model", str(tmp_path / "no-model"), "--data", str(tmp_path / "data.csv"), "--task", task,
                 "--out", str(out), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and len(err.splitlines()) == 1, err
    assert not out.exists()  # no stage ran: nothing written


def test_ray_address_from_the_environment_is_checked_too(tmp_path, capsys, monkeypatch):
    from workbench.cli import main

    monkeypatch.setenv("RAY_ADDRESS", "ray://127.0.0.1:1")
    (tmp_path / "data.csv").write_text("text,label\na,b\n")
    code = main(["audit", "--model", str(tmp_path / "no-model"), "--data", str(tmp_path / "data.csv"), "--task", "classification",
                 "--engine", "ray"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "'ray://127.0.0.1:1': nothing answers at 127.0.0.1:1" in err and len(err.splitlines()) == 1


# ---- the engine's life: shut down however the run ends (a stand-in Ray, no processes) -----------
@pytest.fixture
def fake_ray(monkeypatch):
    state = types.SimpleNamespace(initialized=False, inits=[], shutdowns=0)

    def init(**kw):
        state.inits.append(kw)
        state.initialized = True

    def shutdown():
        state.shutdowns += 1
        state.initialized = False

    mod = types.ModuleType("ray")
    mod.init, mod.shutdown, mod.is_initialized = init, shutdown, lambda: state.initialized
    mod.cluster_resources = lambda: {"CPU": 4.0}
    monkeypatch.setitem(sys.modules, "ray", mod)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return state


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_ray_is_shut_down_when_the_run_is_interrupted_or_fails(fake_ray, error):
    from workbench.runtime.engine import EngineConfig, active_pool, scoring_engine

    with pytest.raises(error):
        with scoring_engine(EngineConfig("ray", ray_threads=2)) as pool:
            assert active_pool() is pool and pool.actors == 2 and pool.threads == 2  # 4 CPUs / 2 threads
            raise error()
    assert fake_ray.shutdowns == 1 and not fake_ray.initialized and active_pool() is None
    assert fake_ray.inits[0]["_node_ip_address"] == "127.0.0.1" and fake_ray.inits[0]["include_dashboard"] is False


def test_a_ray_already_running_in_the_process_is_used_and_left_running(fake_ray):
    from workbench.runtime.engine import EngineConfig, scoring_engine

    fake_ray.initialized = True
    with scoring_engine(EngineConfig("ray", ray_actors=3)) as pool:
        assert pool.actors == 3
    assert fake_ray.inits == [] and fake_ray.shutdowns == 0 and fake_ray.initialized


def test_local_scoring_imports_no_ray():
    code = ("import sys\nfrom workbench.runtime.engine import EngineConfig, scoring_engine\n"
            "with scoring_engine(EngineConfig()) as pool:\n    assert pool is None\nassert 'ray' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[3])
