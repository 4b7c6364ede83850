"""Where a graph's scoring batches run: here (engine ``local``) or on a pool of Ray actors (``ray``), inside
:func:`scoring_engine`. With ``ray`` each :class:`GraphActor` tokenizes with the local path's own function, so
both engines feed the graph the same arrays. Ray is imported only here, inside functions.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import numpy as np

from .progress import RowCounter, graph_label

ENGINES = ("local", "ray")
RAY_ADDRESS_ENV = "RAY_ADDRESS"
LOCAL_HOST = "127.0.0.1"
RAY_INSTALL = "pip install 'ort-workbench[scale]' (ray[data])"


class EngineError(ValueError):
    """An engine setting that cannot be used (one line: what was given and what to do)."""


@dataclass(frozen=True)
class EngineConfig:
    """Where scoring runs (each field's help says how)."""

    engine: str = field(default="local", metadata={"help": "local (this process) or ray (a pool of Ray actors)"})
    ray_address: Optional[str] = field(default=None, metadata={"help": (
        "the Ray cluster to connect to (default: $RAY_ADDRESS, else a local Ray instance on 127.0.0.1)")})
    ray_actors: Optional[int] = field(default=None, metadata={"help": "actors in the pool (default: Ray's CPUs / ray_threads)"})
    ray_threads: int = field(default=1, metadata={"help": "ONNX Runtime threads (and Ray CPUs) of each actor"})

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise EngineError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.ray_address is not None and self.engine != "ray":
            raise EngineError(f"ray_address {self.ray_address!r} is for engine ray; the engine is {self.engine!r}")
        for name, value in (("ray_actors", self.ray_actors), ("ray_threads", self.ray_threads)):
            if (value is not None or name == "ray_threads") and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise EngineError(f"{name} must be a whole number of at least 1, got {value!r}")

    def address(self) -> Optional[str]:
        if self.engine != "ray":
            return None
        return self.ray_address or os.environ.get(RAY_ADDRESS_ENV) or None


def host_port(address: str) -> Optional[tuple[str, int]]:
    """``(host, port)`` of ``host:port`` or ``ray://host:port`` (None for ``auto`` and other forms Ray resolves itself)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def check_engine(cfg: EngineConfig, timeout: float = 3.0) -> None:
    """What can be checked before any stage runs: Ray importable, the cluster's port answering (nothing sent)."""
    if cfg.engine != "ray":
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        raise EngineError(f"engine ray needs Ray, which is not installed: {RAY_INSTALL}") from None
    address = cfg.address()
    target = host_port(address) if address else None
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=timeout).close()
    except OSError as exc:
        raise EngineError(f"ray_address {address!r}: nothing answers at {target[0]}:{target[1]} ({exc.strerror or exc}); "
                          f"start the cluster (ray start --head) or leave the address out for a local Ray instance") from None


class GraphActor:
    """One Ray Data actor: one session of ``graph``, each batch featurized here by the local path's function."""

    def __init__(self, graph: str, threads: int, tokenizer: Any, max_length: int,
                 featurize: Callable[..., Mapping[str, np.ndarray]]) -> None:
        from .session import make_session

        self.session = make_session(graph, threads=threads)
        self.output = self.session.get_outputs()[0].name
        self.tokenizer, self.max_length, self.featurize = tokenizer, int(max_length), featurize

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        from .ortinfer import make_feed

        outs = []
        for j in range(len(batch["k"])):
            feed = make_feed(self.session, self.featurize(self.tokenizer, [str(t) for t in batch["text"][j]], self.max_length))
            outs.append(self.session.run([self.output], feed)[0])
        return {"k": np.asarray(batch["k"]), "out": np.stack(outs)}


# Restarts per actor and retries per batch: a pool that keeps losing actors fails in one line instead of
# retrying for ever (Ray Data's own default is no limit).
ACTOR_RESTARTS = 4
TASK_RETRIES = 4


def _said(exc: BaseException) -> str:
    """What Ray said: the first line of its error, cut to 300 characters (its tracebacks run to pages)."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")[:300]


def pool_failure(graph: str | os.PathLike, exc: BaseException) -> str:
    """One line for a pool that could not score ``graph``: what Ray said and what to do."""
    return (f"the Ray pool stopped while scoring {Path(graph).name}: {type(exc).__name__}: {_said(exc)}; "
            f"a node or actor was lost more often than the pool retries ({TASK_RETRIES} times per batch) or the graph "
            "failed on the actors: check the cluster (ray status) and run again, or score here with --engine local")


@dataclass(frozen=True)
class RayPool:
    """The ``ray`` engine inside :func:`scoring_engine`: ``actors`` actors of ``threads`` threads each."""

    actors: int
    threads: int

    @property
    def text(self) -> str:
        return f"on Ray, {self.actors} actor(s) of {self.threads} thread(s)"

    def run_texts(self, graph: str | os.PathLike, texts: Sequence[Sequence[str]], tokenizer: Any, max_length: int,
                  featurize: Callable[..., Mapping[str, np.ndarray]], label: Optional[str] = None) -> list[np.ndarray]:
        """The graph's first output for each batch of texts, in order; only texts go out, only outputs come back."""
        import ray

        if not texts:
            return []
        items = [{"k": k, "text": [str(t) for t in batch]} for k, batch in enumerate(texts)]
        actors = min(self.actors, len(items))
        ds = ray.data.from_items(items).map_batches(
            GraphActor, fn_constructor_kwargs={"graph": str(graph), "threads": self.threads, "tokenizer": tokenizer,
                                               "max_length": int(max_length), "featurize": featurize},
            compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=self.threads, batch_size=1, batch_format="numpy",
            max_restarts=ACTOR_RESTARTS, max_task_retries=TASK_RETRIES)
        return gather_in_order(ds, len(items), RowCounter(graph_label(graph, label), sum(len(b) for b in texts), actors), graph)


def gather_in_order(ds: Any, n: int, counter: Optional[RowCounter] = None, graph: str | os.PathLike = "") -> list[np.ndarray]:
    """The outputs of a scoring dataset streamed back, each put at its position ``k`` and counted."""
    import ray

    from .session import InferenceError

    out: list[Optional[np.ndarray]] = [None] * n
    try:
        for row in ds.iter_rows():
            k, part = int(row["k"]), np.asarray(row["out"])
            if out[k] is not None:
                raise InferenceError(f"the Ray pool returned batch {k} of {n} twice: its results are not used")
            out[k] = part
            if counter is not None:
                counter.add(len(part))
    except (ray.exceptions.RayError, ray.data.exceptions.SystemException) as exc:  # a lost actor, node or graph
        raise InferenceError(pool_failure(graph, exc)) from exc
    missing = [k for k, o in enumerate(out) if o is None]
    if missing:
        raise InferenceError(f"the Ray pool returned no output for {len(missing)} of {n} batches")
    return out  # type: ignore[return-value]


_ACTIVE: contextvars.ContextVar[Optional[RayPool]] = contextvars.ContextVar("workbench_scoring_pool", default=None)


def active_pool() -> Optional[RayPool]:
    return _ACTIVE.get()


def _start_or_connect(ray: Any, cfg: EngineConfig, level: int) -> None:
    """``ray.init`` for the run: the cluster at ``cfg.address()``, else a local instance; one line if it fails."""
    address = cfg.address()
    try:
        if address:
            ray.init(address=address, logging_level=level, log_to_driver=False)
        else:
            cpus = (cfg.ray_actors or max(1, (os.cpu_count() or 1) // cfg.ray_threads)) * cfg.ray_threads
            ray.init(num_cpus=cpus, include_dashboard=False, _node_ip_address=LOCAL_HOST, logging_level=level,
                     log_to_driver=False)
    except Exception as exc:  # Ray says why in many types (a node that did not start in time, a refused token, ...)
        ray.shutdown()  # what it started before failing
        where = f"connect to the cluster at {address}" if address else f"start a local Ray instance on {LOCAL_HOST}"
        raise EngineError(f"engine ray could not {where}: {type(exc).__name__}: {_said(exc)}; run again (a busy "
                          "machine can make Ray's start time out), check the cluster (ray status) or use --engine local") from None


@contextlib.contextmanager
def scoring_engine(cfg: Optional[EngineConfig] = None, log: Callable[[str], None] = lambda line: None) -> Iterator[Optional[RayPool]]:
    """None for ``local``, else the :class:`RayPool`; a Ray already initialized here (a notebook's) is left running."""
    cfg = cfg if cfg is not None else EngineConfig()
    if cfg.engine == "local":
        yield None
        return
    check_engine(cfg, timeout=3.0)
    import logging

    import ray

    ours = not ray.is_initialized()
    token = None
    try:
        if ours:
            _start_or_connect(ray, cfg, logging.WARNING)
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # its progress lines off the run's log
        cpus = int(ray.cluster_resources().get("CPU", 1))
        pool = RayPool(actors=cfg.ray_actors or max(1, cpus // cfg.ray_threads), threads=cfg.ray_threads)
        address = cfg.address()
        where = ("the Ray already running in this process" if not ours else
                 f"the cluster at {address}" if address else f"a local Ray instance on {LOCAL_HOST} ({cpus} CPUs, no dashboard)")
        log(f"scoring {pool.text}, {where}")
        token = _ACTIVE.set(pool)
        yield pool
    finally:
        if token is not None:
            _ACTIVE.reset(token)
        if ours:
            ray.shutdown()
