"""The audit's engine ``ray`` across several hosts, and what it does when one goes away.

Three hosts on this machine, each a network namespace with its own address on a private bridge
(:mod:`helpers.ray_hosts`): a Ray head with no CPUs of its own and two worker nodes. The audit's driver
runs on the head host (``ip netns exec``) with ``--engine ray --ray-address <head>:6379``, so every batch
crosses the network to an actor on a worker host; the same audit run here with ``--engine local`` gives
the reference. The embedding audit (a 40-text corpus with 20 queries) is run the same two ways on the same
cluster: the same embeddings within 1e-5 and the same retrieval figures per slice. A worker host killed
while its actors hold batches: the audit ends with every row scored once and the same figures, or fails in
one line with no half-written report. Ctrl-C during an audit on a
local Ray instance leaves no Ray process behind and no report.

These tests need root and iproute2 (``ip netns``); where a namespace cannot be made they fail, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from helpers import recorded_audit
from helpers.audit_fixtures import make_rows, train_tiny_classifier, write_csv
from helpers.ray_hosts import RayHosts, leftovers, netns_missing, short_root

REPO = Path(__file__).resolve().parents[3]
TOL = recorded_audit.TOL  # float32 rounding of the same graph on the same arrays in two processes
ACTOR = "MapWorker"  # Ray Data's actor around GraphActor: its class name and its processes' title
POOL_ERROR = "the Ray pool stopped while scoring"

pytestmark = [pytest.mark.slow, pytest.mark.hosts,
              pytest.mark.heavy,  # a three-node cluster started on 2 cores and two audits take minutes
              pytest.mark.timeout(1200)]


def _env() -> dict:
    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}


@pytest.fixture(scope="module")
def hosts(request):
    why = netns_missing()
    if why:
        pytest.fail(f"the audit's tests on several hosts need network namespaces (root, ip netns): {why}", pytrace=False)
    cluster = RayHosts(short_root(), env=_env())

    def close():
        left = cluster.close() + leftovers(cluster.tag)
        assert not left, f"not cleaned up: {left}"

    request.addfinalizer(close)
    return cluster.start()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit-hosts")
    model = train_tiny_classifier(tmp / "classifier")
    data = write_csv(tmp / "reviews.csv", make_rows(240, seed=11))
    return tmp, model, data


def _argv(inputs, out: Path, *engine: str) -> list[str]:
    _, model, data = inputs
    return ["audit", "--model", str(model), "--data", str(data), "--text-column", "review", "--label-column", "sentiment",
            "--slice-column", "channel", "--out", str(out), "--quick", "--presets", "dynamic", "--budget-overall", "0.99",
            "--budget-slice", "0.99", "--min-speedup", "0", *engine]


def _driver(record: Path, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "helpers.recorded_audit", str(record), "classifier", "--", *argv]


@pytest.fixture(scope="module")
def local_run(inputs):
    """The reference: the same audit scored in its own process (engine local), on this machine's namespace."""
    tmp = inputs[0]
    proc = subprocess.run(_driver(tmp / "local-calls", _argv(inputs, tmp / "local", "--engine", "local")), cwd=REPO,
                          env={**os.environ, **_env()}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"calls": recorded_audit.calls(tmp / "local-calls"), "summary": json.loads((tmp / "local" / "summary.json").read_text())}


def _cluster_argv(hosts: RayHosts, inputs, out: Path, record: Path) -> list[str]:
    argv = _argv(inputs, out, "--engine", "ray", "--ray-address", hosts.address, "--ray-actors", "2")
    return hosts.exec_argv(hosts.head, _driver(record, argv))


def _same_scores(local: dict, calls: list, summary: dict) -> None:
    """Every row scored once with each graph, the same class and logits within TOL, the same figures and verdict."""
    assert [c.shape for _, c in local["calls"]] == [c.shape for _, c in calls]
    assert sum(pooled for pooled, _ in calls) == 2  # the FP32 graph and the INT8 variant, every row on the pool
    n = local["summary"]["data"]["rows_scored"]
    assert [c.shape[0] for pooled, c in calls if pooled] == [n, n]
    for (_, a), (_, b) in zip(local["calls"], calls, strict=True):
        assert (a.argmax(-1) == b.argmax(-1)).all()
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL)
    recorded_audit.assert_same_figures(local["summary"], summary)


def test_the_audit_on_a_head_and_two_worker_hosts_scores_every_row_as_here(hosts, inputs, local_run):
    tmp = inputs[0]
    out, record = tmp / "cluster", tmp / "cluster-calls"
    proc = subprocess.run(_cluster_argv(hosts, inputs, out, record), cwd=REPO, env=hosts.proc_env(), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"the cluster at {hosts.address}" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    _same_scores(local_run, recorded_audit.calls(record), summary)
    assert "on Ray" in summary["quantization"][0]["scoring"]["note"]
    # the actors ran on the worker hosts, both of them, and none on the head (it has no CPUs to give)
    ran_on = {a["ip"] for a in hosts.actors(ACTOR)}
    assert ran_on == {w.ip for w in hosts.worker_hosts}, ran_on


@pytest.fixture(scope="module")
def embedding_inputs(tmp_path_factory):
    """A tiny sentence-transformers folder, a 40-row corpus and 20 queries (each the start of one document, that
    document relevant): the embedding audit with retrieval figures, small enough to add little."""
    import pandas as pd

    from helpers.embed_fixtures import make_tiny_st_folder

    tmp = tmp_path_factory.mktemp("embed-hosts")
    folder = make_tiny_st_folder(tmp / "st")
    rows = make_rows(40, seed=3)
    pd.DataFrame([{"id": f"d{i}", "text": r["review"], "channel": r["channel"]} for i, r in enumerate(rows)]).to_csv(
        tmp / "corpus.csv", index=False)
    pd.DataFrame([{"query": " ".join(r["review"].split()[:4]), "relevant": f"d{i}"} for i, r in enumerate(rows[:20])]).to_csv(
        tmp / "pairs.csv", index=False)
    return tmp, folder, tmp / "corpus.csv"


def _embed_run(embedding_inputs, name: str, *engine: str, on=None) -> tuple[subprocess.CompletedProcess, Path]:
    """The embedding audit (one dynamic preset, no speed guard) recorded into ``<name>-calls``, here or on a host."""
    tmp, folder, corpus = embedding_inputs
    argv = ["audit", "--model", str(folder), "--data", str(corpus), "--queries", str(tmp / "pairs.csv"), "--presets", "dynamic",
            "--no-speed", "--quick", "--out", str(tmp / name), *engine]
    driver = [sys.executable, "-m", "helpers.recorded_audit", str(tmp / f"{name}-calls"), "embedding", "--", *argv]
    env = on.proc_env() if on is not None else {**os.environ, **_env()}
    argv = on.exec_argv(on.head, driver) if on is not None else driver
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-3000:]  # a verdict either way (3: no variant fits)
    return proc, tmp / name


def test_the_embedding_audit_on_a_head_and_two_worker_hosts_encodes_as_here(hosts, embedding_inputs):
    _, local = _embed_run(embedding_inputs, "embed-local", "--engine", "local")
    proc, cluster = _embed_run(embedding_inputs, "embed-cluster", "--engine", "ray", "--ray-address", hosts.address,
                               "--ray-actors", "2", on=hosts)
    assert f"the cluster at {hosts.address}" in proc.stdout
    here, there = (recorded_audit.calls(embedding_inputs[0] / f"{n}-calls") for n in ("embed-local", "embed-cluster"))
    # the export's validation encodes on the driver; the corpus and the queries, with each graph, on the pool
    assert not any(p for p, _ in here) and not there[0][0] and all(p for p, _ in there[1:]), [p for p, _ in there]
    for (_, a), (_, b) in zip(here, there, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL)
    summaries = [json.loads((out / "summary.json").read_text()) for out in (local, cluster)]
    assert "ndcg@10" in json.dumps(summaries[0]["evaluation"])  # retrieval figures to compare, per slice
    recorded_audit.assert_same_embedding_figures(*summaries)
    ran_on = {a["ip"] for a in hosts.actors(ACTOR)}  # every actor on a worker host (the head has no CPUs to give)
    assert ran_on and ran_on <= {w.ip for w in hosts.worker_hosts}, ran_on


def _title(proc: psutil.Process) -> str:
    """A process's command line as it shows it now (Ray's workers put their actor's name there); "" once gone."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _actor_on(host) -> bool:
    return any(ACTOR in _title(psutil.Process(pid)) for pid in host.pids() if psutil.pid_exists(pid))


def _wait_for(condition, proc: subprocess.Popen, seconds: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``proc`` ends or time runs out (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _no_half_written(out: Path) -> None:
    """Nothing half-written: no atomic writer's temp file left, and a summary, if any, whole and valid JSON."""
    assert not list(out.rglob("*.tmp")), list(out.rglob("*.tmp"))
    if (out / "summary.json").exists():
        json.loads((out / "summary.json").read_text())


def test_a_worker_host_lost_while_scoring_ends_with_every_row_once_or_one_line(hosts, inputs, local_run):
    tmp = inputs[0]
    out, record, log = tmp / "lost", tmp / "lost-calls", tmp / "lost.log"
    lost = hosts.worker_hosts[-1]
    with open(log, "w") as sink:
        proc = subprocess.Popen(_cluster_argv(hosts, inputs, out, record), cwd=REPO, env=hosts.proc_env(), stdout=sink,
                                stderr=subprocess.STDOUT, text=True)
        try:
            # the trigger: an actor of the pool is up on the host (it holds or is about to hold batches)
            started = _wait_for(lambda: _actor_on(lost), proc, 600)
            assert started, "the audit ended before an actor ran on the host to lose: " + log.read_text()[-3000:]
            killed = hosts.kill_host(lost)
            assert killed and proc.poll() is None
            code = proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
            hosts.restart(lost)  # the other tests of the module have their two workers again
    text = log.read_text()
    _no_half_written(out)
    assert lost.ip in {a["ip"] for a in hosts.actors(ACTOR)}  # the pool had an actor on the host that was lost
    print(f"after losing {lost.name} while scoring, the audit ended with exit code {code}")
    if code == 0:
        _same_scores(local_run, recorded_audit.calls(record), json.loads((out / "summary.json").read_text()))
    else:
        lines = [line for line in text.splitlines() if POOL_ERROR in line]
        assert lines and all(len(line) < 1000 for line in lines), text[-3000:]
        assert "ray status" in lines[0] and "--engine local" in lines[0]


def _still_running(procs, seconds: float) -> list[tuple[int, str]]:
    """Those of ``procs`` still running after up to ``seconds`` (a zombie waiting for its parent is not running)."""
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append((p.pid, p.name()))
            except psutil.Error:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def _ended(proc: subprocess.Popen, sink, log: Path) -> str:
    """What an audit that has ended wrote ("" while it runs)."""
    if proc.poll() is None:
        return ""
    sink.close()
    return log.read_text()


START_TRIES = 3


def test_ctrl_c_during_an_audit_on_a_local_ray_instance_leaves_no_ray_process_and_no_report(inputs):
    tmp = inputs[0]
    out = tmp / "interrupted"
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **_env()}
    log = tmp / "interrupted.log"
    family: dict[int, psutil.Process] = {}

    def scoring() -> bool:
        try:
            kids = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            return False
        family.update({k.pid: k for k in kids})
        return any(ACTOR in _title(k) for k in kids)

    argv = [sys.executable, "-m", "workbench.cli", *_argv(inputs, out, "--engine", "ray", "--ray-actors", "2")]
    for _ in range(START_TRIES):
        sink = open(log, "w")
        # its own process group: Ctrl-C in a terminal reaches the whole group
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        if _wait_for(scoring, proc, 600) or "could not start a local Ray instance" not in _ended(proc, sink, log):
            break  # scoring on the pool, or the audit ended for a reason other than Ray's start timing out on a busy machine
        shutil.rmtree(out, ignore_errors=True)
    try:
        assert proc.poll() is None, "the audit ended before its Ray actors started: " + log.read_text()[-3000:]
        ray_daemons = [p for p in family.values() if any(n in _title(p) for n in ("raylet", "gcs_server"))]
        assert ray_daemons, "no raylet or gcs_server among the audit's processes: the check below would prove nothing"
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        sink.close()
    assert proc.returncode != 0, log.read_text()[-3000:]
    alive = _still_running(family.values(), 60)
    assert not alive, f"left running after Ctrl-C: {alive}"
    assert not (out / "summary.json").exists() and not (out / "report.html").exists()
    _no_half_written(out)
