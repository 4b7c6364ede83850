"""This machine's floor: what its CPU is, what ONNX Runtime's matrix multiply reaches on it, and
whether something else is using it right now.

- :func:`machine_profile` -> :class:`MachineProfile`: the CPU model, the instruction sets that
  decide speed (AVX2, AVX-512, AVX-512 VNNI, AVX-VNNI, AMX, bf16), the cores, and the FP32 and
  INT8 matrix-multiply throughput measured **through ONNX Runtime itself**, with the kernels the
  graphs run (``MatMul``; ``DynamicQuantizeMatMul``, what dynamic INT8 graphs run;
  ``QLinearMatMul``, what static QDQ graphs run after ONNX Runtime fuses them) at a transformer's
  shapes (MiniLM's: hidden 384, feed-forward 1536) for several token counts, with the workbench's
  thread count. A few seconds; cached per CPU, flags, threads and ONNX Runtime version under
  ``$ORT_WORKBENCH_HOME`` (default ``~/.cache/ort-workbench``)/``machine/``; ``refresh`` measures again.
- :func:`check_load` -> :class:`LoadCheck`: a short GEMM probe against the profile, the load average
  and the CPU time other processes took during the probe. Before and after every timing block;
  :func:`combine_checks` joins them. When the probe runs below :data:`CONTENTION_THRESHOLD` of
  the profile or other processes compete, the figures are flagged as taken under load.

Throughputs are in GOP/s: billions of operations a second, two per multiply-add.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# Below this fraction of the profile's FP32 throughput, the short probe says something else is
# using the CPU (one busy core on this 2-core machine took the probe to ~70%; quiet runs stayed
# above 90%).
CONTENTION_THRESHOLD = 0.85
# Other processes using more than this many cores (CPU seconds per second) during the probe compete.
OTHER_CPU_LIMIT = 0.25
# MiniLM's weight GEMMs: (K, N) of Q/K/V/output (384x384), the feed-forward in (384x1536) and out
# (1536x384); measured at these token counts (M = batch x sequence).
GEMM_KN = ((384, 384), (384, 1536), (1536, 384))
TOKEN_COUNTS = (32, 128, 1024)
PROFILE_VERSION = 1
FLAG_NAMES = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx", "bf16")


class MachineError(ValueError):
    """A bad request to the machine profile (one line naming the value and the fix)."""


@dataclass(frozen=True)
class MachineProfile:
    cpu_model: str
    flags: dict[str, bool]
    cores: int
    threads: int
    ort_version: str
    fp32_gops: float  # at 128 tokens (M = 128), the figure quoted
    int8_gops: float  # DynamicQuantizeMatMul at 128 tokens
    qdq_int8_gops: Optional[float]  # QLinearMatMul at 128 tokens (static QDQ)
    measured_at: str
    shapes: list[list[int]]  # the (M, K, N) measured
    # throughput by token count: {"fp32": {"32": gops, "128": ..., "1024": ...}, "int8": ..., "qdq_int8": ...}
    by_tokens: dict[str, dict[str, float]] = field(default_factory=dict)
    key: str = ""
    version: int = PROFILE_VERSION
    # other processes' CPU use while it was measured (cores' worth); a profile measured under load
    # is used but not cached (it would lower every floor)
    other_cpu: float = 0.0

    @property
    def int8_over_fp32(self) -> float:
        return self.int8_gops / self.fp32_gops if self.fp32_gops > 0 else float("nan")

    def gops(self, kind: str, tokens: Optional[int] = None) -> float:
        """Throughput of ``kind`` ("fp32", "int8", "qdq_int8") at ``tokens`` rows (interpolated in
        log(tokens) between the measured counts, clamped at the ends); the 128-token figure when
        ``tokens`` is None."""
        table = {int(k): float(v) for k, v in (self.by_tokens.get(kind) or {}).items() if v}
        base = {"fp32": self.fp32_gops, "int8": self.int8_gops, "qdq_int8": self.qdq_int8_gops or self.int8_gops}[kind]
        if tokens is None or not table:
            return base
        import math

        points = sorted(table)
        if tokens <= points[0]:
            return table[points[0]]
        if tokens >= points[-1]:
            return table[points[-1]]
        for lo, hi in zip(points, points[1:]):
            if lo <= tokens <= hi:
                w = (math.log(tokens) - math.log(lo)) / (math.log(hi) - math.log(lo))
                return table[lo] + w * (table[hi] - table[lo])
        return base

    def isa_text(self) -> str:
        """The instruction sets that decide speed, present and absent, in words."""
        f = self.flags
        have = [name for key, name in (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX-512 VNNI"),
                                       ("avx_vnni", "AVX-VNNI"), ("amx", "AMX"), ("bf16", "bf16")) if f.get(key)]
        missing = []
        if not f.get("avx512f"):
            missing.append("AVX-512")
        if not (f.get("avx512_vnni") or f.get("avx_vnni")):
            missing.append("VNNI")
        if not f.get("amx"):
            missing.append("AMX")
        if not f.get("bf16"):
            missing.append("bf16")
        text = " + ".join(have) if have else "no AVX2"
        return text + ("; no " + ", no ".join(missing) if missing else "")

    @property
    def has_vnni(self) -> bool:
        return bool(self.flags.get("avx512_vnni") or self.flags.get("avx_vnni") or self.flags.get("amx"))

    def describe(self) -> str:
        """One paragraph: the CPU, its flags, and the measured throughputs."""
        qdq = f", static QDQ INT8 (QLinearMatMul) {self.qdq_int8_gops:.0f}" if self.qdq_int8_gops else ""
        return (f"{self.cpu_model}, {self.cores} CPUs, {self.threads} threads; {self.isa_text()}; ONNX Runtime "
                f"{self.ort_version}: FP32 MatMul {self.fp32_gops:.0f} GOP/s, INT8 DynamicQuantizeMatMul "
                f"{self.int8_gops:.0f} GOP/s ({self.int8_over_fp32:.2f}x FP32){qdq} at 128 tokens x MiniLM's GEMMs "
                f"(measured {self.measured_at})")


@dataclass(frozen=True)
class LoadCheck:
    contended: bool
    reasons: list[str]
    loadavg_1m: float
    probe_fp32_gops: Optional[float]
    probe_fraction: Optional[float]
    other_cpu: Optional[float]  # cores' worth of CPU other processes used during the probe
    at: str

    def text(self) -> str:
        if not self.contended:
            probe = f"GEMM probe at {100 * self.probe_fraction:.0f}% of the profile, " if self.probe_fraction else ""
            return f"quiet: {probe}load average {self.loadavg_1m:.2f}"
        return "taken under load: " + "; ".join(self.reasons)


# ---- the CPU -------------------------------------------------------------------------------------
def cpu_facts() -> tuple[str, dict[str, bool]]:
    """(model name, the speed-deciding flags) from /proc/cpuinfo (lscpu's source)."""
    model, flags = "unknown CPU", set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform

        return platform.processor() or "unknown CPU", {k: False for k in FLAG_NAMES}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
            model = re.sub(r"\s+", " ", value.strip())
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, {
        "avx2": "avx2" in flags,
        "avx512f": "avx512f" in flags,
        "avx512_vnni": "avx512_vnni" in flags,
        "avx_vnni": "avx_vnni" in flags,
        "amx": bool({"amx_int8", "amx_tile"} & flags),
        "bf16": bool({"avx512_bf16", "amx_bf16"} & flags),
    }


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads() -> int:
    """The intra-op thread count the workbench times with when none is given: every CPU this
    process may use (what ONNX Runtime and PyTorch pick on a machine without SMT)."""
    return available_cores()


def check_threads(threads, what: str = "threads") -> int:
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise MachineError(f"{what} must be a whole number of at least 1, got {threads!r}; "
                           f"this machine has {available_cores()} CPUs")
    return threads


# ---- measuring -----------------------------------------------------------------------------------
def _session(model_bytes: bytes, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.log_severity_level = 3
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def gemm_model(kind: str, m: int, k: int, n: int) -> bytes:
    """A one-node graph ``A[m,k] x W[k,n]`` with the kernel ``kind`` runs: ``fp32`` (MatMul),
    ``int8`` (com.microsoft DynamicQuantizeMatMul: FP32 in, INT8 weights, what dynamic INT8 graphs
    run) or ``qdq_int8`` (QLinearMatMul u8 x s8: what static QDQ graphs run once ONNX Runtime fuses
    their Q/DQ pairs)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes = [], []
    if kind == "fp32":
        inits.append(numpy_helper.from_array(rng.standard_normal((k, n), dtype=np.float32), "W"))
        nodes.append(helper.make_node("MatMul", ["A", "W"], ["C"]))
        a_type, c_type = TensorProto.FLOAT, TensorProto.FLOAT
    elif kind == "int8":
        inits += [numpy_helper.from_array(rng.integers(-127, 127, (k, n), dtype=np.int8), "W"),
                  numpy_helper.from_array(np.full((n,), 0.01, np.float32), "W_scale"),
                  numpy_helper.from_array(np.zeros((n,), np.int8), "W_zp")]
        nodes.append(helper.make_node("DynamicQuantizeMatMul", ["A", "W", "W_scale", "W_zp"], ["C"], domain="com.microsoft"))
        a_type, c_type = TensorProto.FLOAT, TensorProto.FLOAT
    elif kind == "qdq_int8":
        inits += [numpy_helper.from_array(rng.integers(-127, 127, (k, n), dtype=np.int8), "W"),
                  numpy_helper.from_array(np.array(0.02, np.float32), "a_scale"),
                  numpy_helper.from_array(np.array(128, np.uint8), "a_zp"),
                  numpy_helper.from_array(np.array(0.01, np.float32), "w_scale"),
                  numpy_helper.from_array(np.array(0, np.int8), "w_zp"),
                  numpy_helper.from_array(np.array(0.05, np.float32), "c_scale"),
                  numpy_helper.from_array(np.array(128, np.uint8), "c_zp")]
        nodes.append(helper.make_node("QLinearMatMul", ["A", "a_scale", "a_zp", "W", "w_scale", "w_zp", "c_scale", "c_zp"], ["C"]))
        a_type, c_type = TensorProto.UINT8, TensorProto.UINT8
    else:
        raise MachineError(f"kernel kind must be fp32, int8 or qdq_int8, got {kind!r}")
    graph = helper.make_graph(nodes, f"gemm_{kind}", [helper.make_tensor_value_info("A", a_type, [m, k])],
                              [helper.make_tensor_value_info("C", c_type, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def _input(kind: str, m: int, k: int):
    import numpy as np

    rng = np.random.default_rng(1)
    if kind == "qdq_int8":
        return rng.integers(0, 255, (m, k), dtype=np.uint8)
    return rng.standard_normal((m, k), dtype=np.float32)


def measure_gops(kind: str, tokens: int, threads: int, seconds: float = 0.25, kn=GEMM_KN) -> float:
    """GOP/s of ``kind`` over MiniLM's three GEMM shapes at ``tokens`` rows: every shape's best time
    (after a warm-up) over about ``seconds`` each, added up as one layer's weight GEMMs are."""
    total_ops, total_s = 0.0, 0.0
    for k, n in kn:
        session = _session(gemm_model(kind, tokens, k, n), threads)
        feed = {"A": _input(kind, tokens, k)}
        for _ in range(3):
            session.run(None, feed)
        best, start = float("inf"), time.perf_counter()
        runs = 0
        while runs < 5 or time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            session.run(None, feed)
            best = min(best, time.perf_counter() - t0)
            runs += 1
            if runs >= 2000:
                break
        total_ops += 2.0 * tokens * k * n
        total_s += best
    return total_ops / total_s / 1e9


def _cache_dir(cache_dir: Optional[Path]) -> Path:
    from .home import workbench_home

    return Path(cache_dir) if cache_dir is not None else workbench_home() / "machine"


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def profile_key(cpu_model: str, flags: dict[str, bool], threads: int, ort_version: str) -> str:
    blob = json.dumps([PROFILE_VERSION, cpu_model, sorted(k for k, v in flags.items() if v), threads, ort_version])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def measure_profile(threads: Optional[int] = None, seconds: float = 0.25) -> MachineProfile:
    """Measure this machine now (a few seconds); see :func:`machine_profile` for the cached one."""
    threads = check_threads(threads)
    model, flags = cpu_facts()
    version = _ort_version()
    by_tokens: dict[str, dict[str, float]] = {}
    exclude = _own_family()
    before, t0 = _other_cpu_seconds(exclude), time.perf_counter()
    for kind in ("fp32", "int8", "qdq_int8"):
        by_tokens[kind] = {str(m): round(measure_gops(kind, m, threads, seconds), 2) for m in TOKEN_COUNTS}
    after, wall = _other_cpu_seconds(exclude), max(time.perf_counter() - t0, 1e-6)
    other = sum(max(0.0, after[p][1] - before[p][1]) for p in after if p in before) / wall
    return MachineProfile(
        cpu_model=model, flags=flags, cores=available_cores(), threads=threads, ort_version=version,
        fp32_gops=by_tokens["fp32"]["128"], int8_gops=by_tokens["int8"]["128"], qdq_int8_gops=by_tokens["qdq_int8"]["128"],
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        shapes=[[m, k, n] for m in TOKEN_COUNTS for k, n in GEMM_KN], by_tokens=by_tokens,
        key=profile_key(model, flags, threads, version), other_cpu=round(other, 2))


def machine_profile(threads: Optional[int] = None, refresh: bool = False, cache_dir: Optional[Path] = None) -> MachineProfile:
    """This machine's profile for ``threads`` (default :func:`default_threads`): read from the cache
    when it was measured on this CPU, with these flags, thread count and ONNX Runtime version;
    measured (and cached) otherwise or with ``refresh``. A profile measured while the machine was
    busy is not cached (it would lower every floor): it is returned with its load check noted."""
    from . import serial
    from .runs import atomic_write_json

    threads = check_threads(threads)
    model, flags = cpu_facts()
    key = profile_key(model, flags, threads, _ort_version())
    path = _cache_dir(cache_dir) / f"{key}.json"
    if path.is_file() and not refresh:
        try:
            return serial.from_dict(MachineProfile, json.loads(path.read_text()))
        except (ValueError, TypeError, KeyError):
            pass  # an unreadable cache entry is measured again and replaced
    profile = measure_profile(threads)
    if profile.other_cpu > OTHER_CPU_LIMIT:
        return profile  # measured while other work ran: used now, measured again next time
    try:
        atomic_write_json(path, serial.to_dict(profile))
    except OSError:
        pass  # a read-only cache: the profile is still measured and used
    return profile


# ---- is the machine busy? ------------------------------------------------------------------------
def _other_cpu_seconds(exclude: set[int]) -> dict[int, tuple[str, float]]:
    import psutil

    out = {}
    for proc in psutil.process_iter(["pid", "name"]):
        if proc.info["pid"] in exclude:
            continue
        try:
            t = proc.cpu_times()
            out[proc.info["pid"]] = (proc.info["name"] or "?", t.user + t.system)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def _own_family() -> set[int]:
    import psutil

    me = psutil.Process()
    try:
        return {me.pid, *(c.pid for c in me.children(recursive=True))}
    except psutil.Error:
        return {me.pid}


def check_load(profile: MachineProfile, probe: bool = True, seconds: float = 0.3) -> LoadCheck:
    """Is something else using the CPU now? A short FP32 GEMM probe (about ``seconds``) compared
    with the profile, the CPU time other processes (not this one or its children) took meanwhile,
    and the load average."""
    reasons: list[str] = []
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    exclude = _own_family()
    before = _other_cpu_seconds(exclude)
    t0 = time.perf_counter()
    gops = fraction = None
    if probe:
        gops = measure_gops("fp32", 128, profile.threads, seconds=seconds / 3)
        reference = profile.gops("fp32", 128)
        fraction = gops / reference if reference > 0 else None
    else:
        time.sleep(seconds)
    wall = max(time.perf_counter() - t0, 1e-6)
    after = _other_cpu_seconds(exclude)
    used = {pid: (after[pid][0], after[pid][1] - before[pid][1]) for pid in after if pid in before}
    other = sum(max(0.0, d) for _, d in used.values()) / wall
    if fraction is not None and fraction < CONTENTION_THRESHOLD:
        reasons.append(f"the GEMM probe ran at {100 * fraction:.0f}% of this machine's profile "
                       f"({gops:.0f} vs {profile.gops('fp32', 128):.0f} GOP/s)")
    if other > OTHER_CPU_LIMIT:
        top = sorted(((d, name, pid) for pid, (name, d) in used.items() if d > 0), reverse=True)[:3]
        names = ", ".join(f"{name} (pid {pid}) {d / wall:.1f}" for d, name, pid in top)
        reasons.append(f"other processes used {other:.1f} of {profile.cores} CPUs meanwhile ({names})")
    return LoadCheck(contended=bool(reasons), reasons=reasons, loadavg_1m=round(load1, 2),
                     probe_fp32_gops=round(gops, 1) if gops is not None else None,
                     probe_fraction=round(fraction, 3) if fraction is not None else None,
                     other_cpu=round(other, 2), at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


def combine_checks(*checks: Optional[LoadCheck]) -> Optional[LoadCheck]:
    """One verdict from the checks taken before and after a timing block: contended when any was."""
    present = [c for c in checks if c is not None]
    if not present:
        return None
    reasons = []
    for when, c in zip(("before", "after", "later"), present):
        reasons += [f"{when} timing: {r}" for r in c.reasons]
    fractions = [c.probe_fraction for c in present if c.probe_fraction is not None]
    gops = [c.probe_fp32_gops for c in present if c.probe_fp32_gops is not None]
    others = [c.other_cpu for c in present if c.other_cpu is not None]
    return LoadCheck(contended=any(c.contended for c in present), reasons=reasons,
                     loadavg_1m=max(c.loadavg_1m for c in present),
                     probe_fp32_gops=min(gops) if gops else None, probe_fraction=min(fractions) if fractions else None,
                     other_cpu=max(others) if others else None, at=present[-1].at)


def profile_text(profile: MachineProfile, load: Optional[LoadCheck] = None) -> str:
    """What ``workbench machine`` and the doctor print."""
    rows = [f"CPU          {profile.cpu_model}",
            f"flags        {profile.isa_text()}",
            f"CPUs         {profile.cores} (timing with {profile.threads} threads)",
            f"ORT          onnxruntime {profile.ort_version}",
            "throughput   GOP/s (2 ops per multiply-add), MiniLM's GEMMs through ONNX Runtime:"]
    for kind, label in (("fp32", "FP32 MatMul"), ("int8", "INT8 DynamicQuantizeMatMul"), ("qdq_int8", "INT8 QLinearMatMul (static QDQ)")):
        table = profile.by_tokens.get(kind) or {}
        rows.append(f"  {label:<32} " + "  ".join(f"{t:>5} tokens {float(v):7.1f}" for t, v in sorted(table.items(), key=lambda kv: int(kv[0]))))
    rows.append(f"INT8 / FP32  {profile.int8_over_fp32:.2f}x at 128 tokens" +
                ("" if profile.has_vnni else " (no VNNI: CPUs with VNNI or AMX run INT8 GEMMs 2-4x faster than FP32)"))
    rows.append(f"measured     {profile.measured_at}")
    if load is not None:
        rows.append(f"now          {load.text()}")
    return "\n".join(rows)
