"""The Ray pool's fault settings and its one-line failure, with a stand-in Ray (no processes): the actor
pool asks Ray to start a lost actor again and run its batches again a bounded number of times, a pool
that still fails is one line naming the graph, what Ray said and what to do, and a batch returned twice
is refused rather than silently kept. The real thing, a worker host killed while scoring, is in
tests/unit/audit/test_audit_hosts.py."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest


class _Died(Exception):
    """Stands in for ray.exceptions.ActorDiedError (a RayError)."""


@pytest.fixture
def fake_ray(monkeypatch):
    state = types.SimpleNamespace(kwargs=None, rows=None, error=None)

    class Dataset:
        def map_batches(self, fn, **kwargs):
            state.kwargs = kwargs
            return self

        def iter_rows(self):  # the rows as Ray hands them over, or the pool's failure part-way
            if state.error is not None:
                raise state.error
            yield from state.rows

    ray = types.ModuleType("ray")
    ray.exceptions = types.SimpleNamespace(RayError=_Died)
    ray.data = types.SimpleNamespace(from_items=lambda items: Dataset(), ActorPoolStrategy=lambda size: ("pool", size),
                                     exceptions=types.SimpleNamespace(SystemException=RuntimeError))
    monkeypatch.setitem(sys.modules, "ray", ray)
    return state


TEXTS = [["a", "b"] for _ in range(3)]  # three batches of two texts


def _score(path="g.onnx"):
    from workbench.runtime.engine import RayPool

    return RayPool(actors=2, threads=1).run_texts(path, TEXTS, tokenizer=None, max_length=8, featurize=None)


def test_lost_actors_are_started_again_and_their_batches_run_again_a_bounded_number_of_times(fake_ray):
    from workbench.runtime.engine import ACTOR_RESTARTS, TASK_RETRIES

    fake_ray.rows = [{"k": k, "out": np.full((2, 2), k, np.float32)} for k in (2, 0, 1)]
    out = _score()
    assert [float(o[0, 0]) for o in out] == [0.0, 1.0, 2.0]  # back in order
    kw = fake_ray.kwargs
    # Ray Data's defaults are -1 (for ever): a pool that keeps losing actors would never fail
    assert kw["max_restarts"] == ACTOR_RESTARTS and kw["max_task_retries"] == TASK_RETRIES
    assert 1 <= TASK_RETRIES and 1 <= ACTOR_RESTARTS
    assert kw["compute"] == ("pool", 2)


def test_a_pool_that_still_fails_is_one_line_naming_the_graph_and_what_to_do(fake_ray):
    from workbench.runtime.session import InferenceError

    fake_ray.error = _Died("The actor died unexpectedly before finishing this task.\n\tclass_name: MapWorker\n\tpid: 42")
    with pytest.raises(InferenceError) as err:
        _score("/runs/a/quantize/model.onnx")
    text = str(err.value)
    assert len(text.splitlines()) == 1
    assert "scoring model.onnx" in text and "_Died: The actor died unexpectedly before finishing this task." in text
    assert "ray status" in text and "--engine local" in text and "pid: 42" not in text


def test_a_batch_returned_twice_is_refused(fake_ray):
    from workbench.runtime.session import InferenceError

    fake_ray.rows = [{"k": k, "out": np.zeros((2, 2), np.float32)} for k in (0, 1, 1, 2)]
    with pytest.raises(InferenceError, match="returned batch 1 of 3 twice"):
        _score()


@pytest.mark.parametrize("address", [None, "10.0.0.5:6379"])
def test_ray_that_does_not_start_or_answer_is_one_line_and_what_it_started_is_shut_down(fake_ray, monkeypatch, address):
    from workbench.runtime import engine

    calls = []

    def init(**kw):
        calls.append("init")
        raise Exception("The current node timed out during startup. This could happen because ...\nTraceback: more")

    ray = sys.modules["ray"]
    ray.init, ray.is_initialized, ray.shutdown = init, lambda: False, lambda: calls.append("shutdown")
    monkeypatch.setattr(engine, "check_engine", lambda cfg, timeout=3.0: None)  # nothing listens at the address
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(engine.EngineError) as err:
        with engine.scoring_engine(engine.EngineConfig("ray", ray_address=address)):
            pytest.fail("the block ran without Ray")
    text = str(err.value)
    assert len(text.splitlines()) == 1 and "The current node timed out during startup." in text and "Traceback" not in text
    assert ("the cluster at 10.0.0.5:6379" if address else "a local Ray instance on 127.0.0.1") in text
    assert "--engine local" in text
    assert calls[0] == "init" and "shutdown" in calls
