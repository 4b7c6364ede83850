"""Speed of embedding variants the way users meet it: texts in, embeddings out (tokenizing included),
against ``SentenceTransformer.encode`` with the same threads, at the data's median length, batch 1
and 32. Timed by the workbench's one timing primitive (:func:`workbench.perf.speed.time_interleaved`:
interleaved rounds in one process, paired ratios with bootstrap intervals, a load check before and
after and a retime when it finds the machine busy), each ONNX graph with its floor from its
multiply-adds at this machine's measured throughput (:func:`workbench.perf.speed.graph_floors`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from ..core.latency import Ratio
from .folder import EmbedError

ST_ENCODE = "sentence-transformers encode (PyTorch FP32)"


@dataclass(frozen=True)
class EmbedSpeed:
    name: str
    batch: int
    tokens: int
    ms_per_text: float
    ms_per_batch: float
    speedup: float  # over the base, median of paired rounds (saved flat: its interval is lo-hi)
    lo: float
    hi: float
    floor_ms: Optional[float] = None  # per batch
    rounds: int = 0  # paired rounds behind the ratio (0: the base itself, or saved before it was kept)
    vs_fp32: Optional[Ratio] = None  # the speed-up over the FP32 graph from the same rounds (None: it was not timed)

    @property
    def of_floor(self) -> Optional[float]:
        return self.floor_ms / self.ms_per_batch if self.floor_ms else None

    @property
    def ratio(self) -> Ratio:
        """The speed-up over the base as the workbench's one ratio type."""
        return Ratio(self.speedup, self.lo, self.hi, self.rounds)


@dataclass(frozen=True)
class EmbedSpeedRun:
    base: str
    threads: int
    speeds: list[EmbedSpeed]
    load: str = ""
    contended: bool = False
    cpu: str = ""
    notes: list[str] = field(default_factory=list)

    def get(self, name: str, batch: int) -> EmbedSpeed:
        for s in self.speeds:
            if s.name == name and s.batch == batch:
                return s
        raise KeyError(f"no timing for {name!r} at batch {batch}")


def median_length_texts(tokenizer, texts: Sequence[str], max_length: int, n: int) -> tuple[list[str], int]:
    """``n`` texts of the data's median token length (the nearest lengths when fewer have it exactly),
    and that median."""
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise EmbedError("timing needs texts: the data holds none")
    lengths = np.array([len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]])
    med = int(np.median(lengths))
    order = np.argsort(np.abs(lengths - med), kind="stable")
    picked = [texts[i] for i in order[:n]]
    while len(picked) < n:
        picked += picked[: n - len(picked)]
    return picked, med


def time_embedders(fns_by_batch: Mapping[int, Mapping[str, Callable[[], object]]], base: str, tokens: int, threads: int,
                   graphs: Optional[Mapping[str, str]] = None, rounds: int = 15, repeats: int = 3, warmup: int = 3,
                   max_seconds: Optional[float] = 60.0, floors: bool = True, load_check: bool = True,
                   retimes: Optional[int] = None, calm_wait_s: Optional[float] = None, fp32: str = "fp32") -> EmbedSpeedRun:
    """Time the callables (name -> one encode call of a batch) per batch size in interleaved rounds;
    ratios against ``base``. ``graphs`` (name -> ONNX path) get a floor. Figures taken on a busy machine are
    taken again (:func:`workbench.perf.speed.measure_quietly`; ``retimes``/``calm_wait_s``, default its own). Where
    the FP32 graph (``fp32``) was timed too, each callable's speed-up over it comes from the same rounds."""
    from ..perf.machine_profile import machine_profile
    from ..core.latency import paired_ratio
    from ..perf.speed import CALM_WAIT_S, RETIMES, graph_floors, time_interleaved

    for batch, fns in fns_by_batch.items():
        if base not in fns:
            raise EmbedError(f"base {base!r} is not one of the timed variants {list(fns)}")
    profile = machine_profile(threads) if (floors or load_check) else None
    timed = time_interleaved(fns_by_batch, base, rounds=rounds, repeats=repeats, warmup=warmup, max_seconds=max_seconds,
                             profile=profile if load_check else None, retimes=RETIMES if retimes is None else retimes,
                             calm_wait_s=CALM_WAIT_S if calm_wait_s is None else calm_wait_s, pytorch_threads=threads)
    speeds: list[EmbedSpeed] = []
    for batch, r in timed.groups.items():
        floor = graph_floors(dict(graphs or {}), batch, tokens, profile if floors else None, timed.notes)
        for name, st in r.stats.items():
            ratio = r.ratios.get(name, Ratio(1.0, 1.0, 1.0, 0))
            over = paired_ratio(r.stats[fp32].samples_ms, st.samples_ms) if fp32 in r.stats and name != fp32 else None
            speeds.append(EmbedSpeed(name, batch, tokens, st.median_ms / batch, st.median_ms, ratio.value, ratio.lo, ratio.hi,
                                     floor.get(name), ratio.rounds, over))
    load = timed.load
    return EmbedSpeedRun(base=base, threads=threads, speeds=speeds, load=load.text() if load else "",
                         contended=timed.contended, cpu=profile.isa_text() if profile else "", notes=timed.notes)


def st_encoder(folder, threads: int):
    """``SentenceTransformer`` on the CPU (eager PyTorch FP32, as users run it)."""
    from sentence_transformers import SentenceTransformer

    import torch

    torch.set_num_threads(threads)
    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


def encode_fns(encoders: Mapping[str, object], st_model, texts_by_batch: Mapping[int, Sequence[str]]) -> dict:
    """Per batch size, name -> a callable encoding that batch: ONNX encoders' ``encode_batch`` and
    ``st_model.encode`` (when given) under :data:`ST_ENCODE`."""
    out: dict[int, dict[str, Callable[[], object]]] = {}
    for batch, texts in texts_by_batch.items():
        texts = list(texts)
        fns: dict[str, Callable[[], object]] = {}
        if st_model is not None:
            fns[ST_ENCODE] = (lambda m=st_model, t=texts, b=batch: m.encode(t, batch_size=b, convert_to_numpy=True,
                                                                            show_progress_bar=False))
        for name, enc in encoders.items():
            fns[name] = (lambda e=enc, t=texts: e.encode_batch(t))
        out[batch] = fns
    return out
