"""Speed compared the one way every stage compares it: interleaved, paired, against the floor, with a load check.

:func:`time_interleaved` is the one timing primitive (interleaved rounds in one process, so load that
comes and goes hits every variant alike); :func:`time_callables` and :func:`time_side_by_side` build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

from ..core.latency import LatencyStats, Ratio, interleaved, paired_ratio
from .machine_profile import LoadCheck, MachineProfile, check_load, combine_checks, machine_profile, wait_for_calm
from ..runtime.device import normalize_device
from ..runtime.ortinfer import BoundRunner, ShapeLatency, check_shapes, make_feed, make_session, synthetic_batch, torch_threads

# the fewest interleaved rounds taken, whatever the timing settings ask (an interval needs pairs)
MIN_ROUNDS = 3
# a timing taken on a busy machine is taken again at most this many more times, each after up to CALM_WAIT_S s of waiting for calm
RETIMES = 1
CALM_WAIT_S = 10.0

T = TypeVar("T")


def measure_quietly(measure: Callable[[], T], profile: Optional[MachineProfile], notes: list[str], *, what: str = "the timing",
                    retimes: int = RETIMES, calm_wait_s: float = CALM_WAIT_S) -> tuple[T, Optional[LoadCheck]]:
    """``measure()`` between two load checks; on a busy CPU, wait for calm and measure again (``retimes`` more
    at most), each try a line in ``notes``: a busy moment costs a wait, not the figures."""
    if profile is None:
        return measure(), None
    before = check_load(profile)
    tries = 1 + max(0, int(retimes))
    for attempt in range(1, tries + 1):
        result = measure()
        load = combine_checks(before, check_load(profile))
        if not load.contended:
            if attempt > 1:
                notes.append(f"{what}: timed again ({attempt} tries) after other work used the CPU; this try: {load.text()}")
            return result, load
        if attempt == tries:
            break
        notes.append(f"{what}: try {attempt} taken while other work used the CPU ({'; '.join(load.reasons)}): waiting up to "
                     f"{calm_wait_s:g} s for the machine to calm down, then timing again")
        before = wait_for_calm(profile, calm_wait_s)
    if tries > 1:
        notes.append(f"{what}: still taken under load after {tries} tries; its speed is not stated as measured")
    return result, load


@dataclass(frozen=True)
class Rounds:
    stats: dict[str, LatencyStats]
    ratios: dict[str, Ratio]  # name -> base / it, every name but the base

    def median_ms(self, name: str) -> float:
        return self.stats[name].median_ms


@dataclass(frozen=True)
class Timed:
    groups: dict[Any, Rounds]
    load: Optional[LoadCheck]
    notes: list[str] = field(default_factory=list)

    @property
    def contended(self) -> bool:
        return bool(self.load and self.load.contended)


def time_interleaved(groups: Mapping[Any, Mapping[str, Callable[[], Any]]], base: str, *, rounds: int = 20, repeats: int = 3,
                     warmup: int = 3, max_seconds: Optional[float] = None, profile: Optional[MachineProfile] = None,
                     retimes: int = RETIMES, calm_wait_s: float = CALM_WAIT_S, pytorch_threads: Optional[int] = None,
                     notes: Optional[list[str]] = None) -> Timed:
    """Interleaved rounds per group (key -> name -> one call), PyTorch held to ``pytorch_threads`` threads."""
    notes = notes if notes is not None else []
    names = list(dict.fromkeys(n for fns in groups.values() for n in fns))
    missing = [k for k, fns in groups.items() if base not in fns]
    if not groups or missing:
        raise ValueError(f"base {base!r} is not one of the variants timed: {names}" + (f" (in {missing})" if missing else ""))
    rounds = max(MIN_ROUNDS, int(rounds))

    def measure() -> dict[Any, Rounds]:
        out = {}
        for key, fns in groups.items():
            with torch_threads(pytorch_threads):
                stats = interleaved(dict(fns), rounds=rounds, repeats=repeats, warmup=warmup, max_seconds=max_seconds)
            out[key] = Rounds(stats, {n: paired_ratio(stats[base].samples_ms, st.samples_ms) for n, st in stats.items() if n != base})
        return out

    timed, load = measure_quietly(measure, profile, notes, what=" and ".join(names), retimes=retimes, calm_wait_s=calm_wait_s)
    return Timed(timed, load, notes)


@dataclass(frozen=True)
class Speed:
    name: str
    base: str
    batch: int
    seq: int
    ms: float
    base_ms: float
    ratio: Ratio
    floor_ms: Optional[float] = None
    base_floor_ms: Optional[float] = None

    @property
    def of_floor(self) -> Optional[float]:
        return self.floor_ms / self.ms if self.floor_ms and self.ms > 0 else None


@dataclass(frozen=True)
class SpeedRun:
    latency: dict[str, list[ShapeLatency]]
    speeds: list[Speed]
    load: Optional[LoadCheck]
    profile_key: str = ""
    notes: list[str] = field(default_factory=list)
    threads: Optional[int] = None
    cpu: str = ""  # the profile's instruction sets, when there was one

    @property
    def contended(self) -> bool:
        return bool(self.load and self.load.contended)

    def speed(self, name: str, shape: Optional[Sequence[int]] = None) -> Speed:
        for s in self.speeds:
            if s.name == name and (shape is None or (s.batch, s.seq) == tuple(shape)):
                return s
        raise KeyError(f"no speed for {name!r} at {shape}; timed: {[(s.name, s.batch, s.seq) for s in self.speeds]}")


def graph_floor(path, batch: int, seq: int, profile: MachineProfile) -> Optional[float]:
    from .work import floor_for, graph_work

    return floor_for(graph_work(path, batch, seq), profile).floor_ms


def graph_floors(graphs: Mapping[str, Any], batch: int, seq: int, profile: Optional[MachineProfile], notes: list[str]) -> dict[str, float]:
    out = {}
    for n, path in graphs.items() if profile is not None else ():
        try:
            out[n] = graph_floor(path, batch, seq, profile)
        except Exception as exc:  # noqa: BLE001 - a floor that cannot be counted is said, not fatal
            notes.append(f"no floor for {n} at {batch}x{seq}: {exc}")
    return out


def time_side_by_side(
    graphs: Mapping[str, Any],
    base: str,
    shapes: Sequence[Sequence[int]] = ((1, 128),),
    *,
    warmup: int = 3,
    rounds: int = 20,
    repeats: int = 3,
    threads: Optional[int] = None,
    max_seconds: Optional[float] = None,
    vocab_size: int = 1000,
    device: str = "cpu",
    torch_models: Optional[Mapping[str, Any]] = None,
    floors: bool = True,
    load_check: bool = True,
    profile: Optional[MachineProfile] = None,
    graph_optimization: Optional[Mapping[str, str]] = None,
    retimes: int = RETIMES,
    calm_wait_s: float = CALM_WAIT_S,
) -> SpeedRun:
    """ONNX graphs and PyTorch models timed side by side; floors and the load check on the CPU only (the profile is the CPU's)."""
    import gc

    torch_models = dict(torch_models or {})
    names = [*graphs, *torch_models]
    if base not in names:
        raise ValueError(f"base {base!r} is not one of the variants timed: {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must be unique, got {names}")
    device = normalize_device(device)
    on_cpu = device == "cpu"
    shapes = check_shapes(shapes)
    notes: list[str] = []
    if on_cpu and (floors or load_check):
        profile = profile or machine_profile(threads)

    levels = dict(graph_optimization or {})
    # spinning during a run, stopped when it returns (make_session's default): an idle session's
    # workers busy-waiting after its run would take the cores from the variant timed next in the round
    sessions = {n: make_session(p, threads=threads, device=device, graph_optimization=levels.get(n, "all"))
                for n, p in graphs.items()}
    groups = {}
    for batch, seq in shapes:
        batch_arrays = synthetic_batch(batch, seq, vocab_size)
        groups[(batch, seq)] = {**_session_runners(sessions, batch_arrays, device), **_torch_runners(torch_models, batch_arrays)}
    run = time_callables(groups, base, graphs, profile=profile if on_cpu else None, floors=floors, load_check=load_check,
                         threads=threads, pytorch_threads=threads if torch_models else None, rounds=rounds, repeats=repeats,
                         warmup=warmup, max_seconds=max_seconds, retimes=retimes, calm_wait_s=calm_wait_s, notes=notes)
    groups.clear()
    sessions.clear()  # the sessions go before the next timing starts
    gc.collect()
    return run


def time_callables(groups: Mapping[tuple[int, int], Mapping[str, Callable[[], Any]]], base: str, graphs: Optional[Mapping[str, Any]] = None,
                   *, profile: Optional[MachineProfile] = None, floors: bool = True, load_check: bool = True,
                   threads: Optional[int] = None, pytorch_threads: Optional[int] = None, rounds: int = 20, repeats: int = 3,
                   warmup: int = 3, max_seconds: Optional[float] = None, retimes: int = RETIMES, calm_wait_s: float = CALM_WAIT_S,
                   notes: Optional[list[str]] = None) -> SpeedRun:
    """Callables per (batch, seq) timed by :func:`time_interleaved`; ``graphs`` (name -> ONNX path) get their floor."""
    notes = notes if notes is not None else []
    timed = time_interleaved(groups, base, rounds=rounds, repeats=repeats, warmup=warmup, max_seconds=max_seconds,
                             profile=profile if load_check else None, retimes=retimes, calm_wait_s=calm_wait_s,
                             pytorch_threads=pytorch_threads, notes=notes)
    names = list(dict.fromkeys(n for fns in groups.values() for n in fns))
    samples: dict[str, list[ShapeLatency]] = {n: [] for n in names}
    speeds: list[Speed] = []
    for (batch, seq), r in timed.groups.items():
        floor = graph_floors(graphs or {}, batch, seq, profile if floors else None, notes)
        for n in names:
            samples[n].append(ShapeLatency(batch, seq, r.stats[n], floor_ms=floor.get(n)))
        speeds += [Speed(name=n, base=base, batch=batch, seq=seq, ms=r.median_ms(n), base_ms=r.median_ms(base), ratio=ratio,
                         floor_ms=floor.get(n), base_floor_ms=floor.get(base)) for n, ratio in r.ratios.items()]
    return SpeedRun(latency=samples, speeds=speeds, load=timed.load, profile_key=profile.key if profile is not None else "",
                    notes=notes, threads=threads, cpu=profile.isa_text() if profile is not None else "")


def _session_runners(sessions: Mapping[str, Any], batch_arrays: dict, device: str) -> dict[str, Callable[[], Any]]:
    fns: dict[str, Callable[[], Any]] = {}
    for n, session in sessions.items():
        feed = make_feed(session, batch_arrays)
        if device != "cpu":
            fns[n] = BoundRunner(session, feed, device).run
        else:
            out_name = session.get_outputs()[0].name
            fns[n] = (lambda s=session, f=feed, o=out_name: s.run([o], f))
    return fns


def _torch_runners(torch_models: Mapping[str, Any], batch_arrays: dict) -> dict[str, Callable[[], Any]]:
    fns: dict[str, Callable[[], Any]] = {}
    if not torch_models:
        return fns
    import torch

    from ..data.batches import model_inputs

    for n, model in torch_models.items():
        module = getattr(model, "model", model)
        module.eval()
        enc = model_inputs(module, {k: torch.from_numpy(v) for k, v in batch_arrays.items()})

        def run_torch(m=module, e=enc):
            with torch.inference_mode():
                return m(**e)
        fns[n] = run_torch
    return fns
