"""This machine's matrix-multiply throughput, measured through ONNX Runtime, and whether other work is on the CPU now.

Through ONNX Runtime because a graph's floor is its work over what *its kernels* do here (a NumPy
peak measures other kernels). Kernels run slower on few rows (VNNI EPYC INT8: about half its
1024-row figure at 16-32 rows), so a shape's floor takes its own row count's figure. Other work
lowers the figures (one spinning process on one of two cores takes about a third of FP32: docs/measuring.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import numpy as np
import psutil

from ..core import serial
from ..core.home import workbench_home
from ..core.latency import measure
from ..core.threads import requested_threads
from ..runs.atomic import atomic_write_json
from .gemm import KERNELS, LAYER_GEMMS, MachineError, chain_macs, gemm_chain, gemm_feed, gemm_session, measure_gops

PROFILE_VERSION = 3  # 3: throughput at 16 and 32 rows too (the floor at short texts)
CONTENTION_THRESHOLD = 0.85  # probe below 85% of the profile's FP32 throughput => contended
STEAL_THRESHOLD = 0.05  # a slow probe with 5% or more of the CPU time stolen is blamed on the host
# each recorded flag: the /proc/cpuinfo flags of which any one sets it
CPU_FLAGS = {"avx2": ("avx2",), "avx512f": ("avx512f",), "avx512_vnni": ("avx512_vnni",), "avx_vnni": ("avx_vnni",),
             "amx": ("amx_int8", "amx_tile"), "bf16": ("avx512_bf16", "amx_bf16")}
FLAG_KEYS = tuple(CPU_FLAGS)
# M = batch * seq: short texts at batch 1 (16, 32 rows), 1x128, and 8x128
PROFILE_TOKENS = (16, 32, 128, 1024)
PROBE_TOKENS = 128


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---- the CPU -----------------------------------------------------------------------------------
def read_cpuinfo() -> tuple[str, set[str]]:
    """(model name, flags) of the first CPU in /proc/cpuinfo."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    first: dict[str, str] = {}
    for key, sep, value in (line.partition(":") for line in lines):
        if sep:
            first.setdefault(key.strip(), value.strip())
    model = first.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    return model, set(first.get("flags", "").split())


def cpu_model_and_flags() -> tuple[str, dict[str, bool]]:
    model, flags = read_cpuinfo()
    return model, {key: not flags.isdisjoint(names) for key, names in CPU_FLAGS.items()}


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask; a container's CPU set)."""
    return len(psutil.Process().cpu_affinity()) or 1


def default_threads() -> int:
    """``OMP_NUM_THREADS`` where set (PyTorch runs with that many too), else one per CPU."""
    return requested_threads() or max(1, usable_cpus())


def _check_threads(threads) -> int:
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise MachineError(f"threads must be a positive whole number, got {threads!r}; "
                           f"leave it unset for the workbench's default ({default_threads()} here)")
    return threads


# ---- the profile -------------------------------------------------------------------------------
@dataclass(frozen=True)
class MachineProfile:
    cpu_model: str
    flags: dict[str, bool]
    cores: int
    threads: int
    ort_version: str
    fp32_gops: float
    int8_gops: float
    qdq_int8_gops: Optional[float]
    measured_at: str
    shapes: list[list[int]]
    # GOP/s per kernel per token count M ({"fp32": {"128": ..}}); fp32_gops etc. are the best of these
    by_tokens: dict[str, dict[str, float]] = field(default_factory=dict)
    # other work was runnable while it was measured: used, never cached (it would lower every floor)
    measured_under_load: bool = False

    @property
    def has_vnni(self) -> bool:
        return bool(self.flags.get("avx512_vnni") or self.flags.get("avx_vnni") or self.flags.get("amx"))

    @property
    def key(self) -> str:
        return profile_key(self.cpu_model, self.flags, self.threads, self.ort_version)

    @property
    def int8_over_fp32(self) -> float:
        return self.int8_gops / self.fp32_gops

    def isa_text(self) -> str:
        f = self.flags
        vnni = [n for k, n in (("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI")) if f.get(k)]
        vector = "AVX-512" if f.get("avx512f") else "AVX2 + FMA" if f.get("avx2") else ""
        have = [n for n in (vector, *vnni, "AMX" if f.get("amx") else "", "bf16" if f.get("bf16") else "") if n]
        lack = [n for n, absent in (("AVX2", not vector), ("AVX-512", not f.get("avx512f")), ("VNNI", not vnni),
                                    ("AMX", not f.get("amx")), ("bf16", not f.get("bf16"))) if absent]
        return (" + ".join(have) or "no vector extensions") + ("; no " + ", no ".join(lack) if lack else "")

    def gops_at(self, kernel: str, rows: int) -> float:
        """Interpolated in log(rows) between the measured row counts; the best figure above them."""
        best = {"fp32": self.fp32_gops, "int8": self.int8_gops, "qdq_int8": self.qdq_int8_gops}
        if kernel not in best:
            raise MachineError(f"kernel must be one of {list(best)}, got {kernel!r}")
        if rows < 1:
            raise MachineError(f"rows must be a positive whole number, got {rows!r}")
        points = sorted((int(m), float(v)) for m, v in (self.by_tokens.get(kernel) or {}).items() if v)
        if not points:
            return best[kernel]
        if rows >= points[-1][0]:
            return max(v for _, v in points)
        return float(np.interp(math.log(rows), [math.log(m) for m, _ in points], [v for _, v in points]))

    def probe_reference_gops(self) -> float:
        return float(self.by_tokens.get("fp32", {}).get(str(PROBE_TOKENS)) or self.fp32_gops)

    def text(self) -> str:
        qdq = f"{self.qdq_int8_gops:.0f}" if self.qdq_int8_gops else "n/a"
        return (f"machine: {self.cpu_model}, {self.cores} CPUs usable; {self.isa_text()}\n"
                f"  ONNX Runtime {self.ort_version}, {self.threads} intra-op threads, measured {self.measured_at}\n"
                f"  FP32 MatMul {self.fp32_gops:.0f} GFLOP/s; INT8 DynamicQuantizeMatMul {self.int8_gops:.0f} GOP/s "
                f"({self.int8_over_fp32:.2f}x FP32); static QDQ QLinearMatMul {qdq} GOP/s{self._rows_text()}")

    def _rows_text(self) -> str:
        ms = sorted({int(m) for v in self.by_tokens.values() for m in v})
        if len(ms) < 2:
            return ""
        names = (("fp32", "FP32"), ("int8", "INT8"), ("qdq_int8", "QDQ"))
        rows = "; ".join(f"{n} " + " / ".join(f"{self.by_tokens[k][str(m)]:.0f}" if str(m) in self.by_tokens[k] else "n/a"
                                               for m in ms)
                         for k, n in names if self.by_tokens.get(k))
        return (f"\n  by rows (M = batch x tokens) {' / '.join(map(str, ms))}: {rows} GOP/s "
                "(the floor of a shape uses its own row count's figure)")


def profile_key(cpu_model: str, flags: dict, threads: int, ort_version: str) -> str:
    blob = json.dumps([cpu_model, sorted(k for k, v in flags.items() if v), int(threads), ort_version])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_root(cache_dir: Optional[Path] = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(workbench_home()) / "machine"


def measure_profile(threads: Optional[int] = None, repeats: int = 7, tokens=PROFILE_TOKENS) -> MachineProfile:
    """Measured now (no cache); kernel kinds in rotation at each M, so a burst of load hits them alike."""
    import onnxruntime as ort

    threads = _check_threads(threads)
    model, flags = cpu_model_and_flags()
    others_before = runnable_others()
    by: dict[str, dict[str, float]] = {k: {} for k in KERNELS}
    for m in tokens:
        for kernel in KERNELS:
            try:
                by[kernel][str(m)] = round(measure_gops(kernel, m, threads, repeats=repeats), 2)
            except Exception:  # a build without the QDQ kernel must not lose the FP32/INT8 figures
                if kernel != "qdq_int8":
                    raise
    best = {k: (max(v.values()) if v else None) for k, v in by.items()}
    others_after = runnable_others()
    busy = any(o is not None and o + threads > usable_cpus() for o in (others_before, others_after))
    return MachineProfile(measured_under_load=busy, cpu_model=model, flags=flags, cores=usable_cpus(), threads=threads,
                          ort_version=ort.__version__, fp32_gops=best["fp32"], int8_gops=best["int8"],
                          qdq_int8_gops=best["qdq_int8"], measured_at=_now(),
                          shapes=[[m, k, n] for m in tokens for k, n in LAYER_GEMMS],
                          by_tokens={k: v for k, v in by.items() if v})


def read_cached(path: Path) -> Optional[MachineProfile]:
    try:
        data = json.loads(path.read_text())
        if data.get("version") != PROFILE_VERSION:
            return None
        names = {f.name for f in dataclasses.fields(MachineProfile)}
        return serial.from_dict(MachineProfile, {k: v for k, v in data.items() if k in names})
    except (OSError, ValueError, TypeError, KeyError):
        return None  # unreadable or from another version: measured again and rewritten


def machine_profile(threads: Optional[int] = None, refresh: bool = False,
                    cache_dir: Optional[Path] = None) -> MachineProfile:
    """Cached as JSON per (CPU model + flags, threads, ORT version) under ``$WORKBENCH_HOME/machine/``."""
    import onnxruntime as ort

    threads = _check_threads(threads)
    model, flags = cpu_model_and_flags()
    key = profile_key(model, flags, threads, ort.__version__)
    path = cache_root(cache_dir) / f"{key}.json"
    if not refresh and path.is_file():
        cached = read_cached(path)
        if cached is not None:
            return cached
    prof = measure_profile(threads)
    if prof.measured_under_load:
        return prof  # used now, measured again next time: a busy machine's figures would lower every floor
    atomic_write_json(path, {**serial.to_dict(prof), "key": key, "version": PROFILE_VERSION})
    return prof


# ---- is the machine busy now? -----------------------------------------------------------------
@dataclass(frozen=True)
class LoadCheck:
    contended: bool
    reasons: list[str]
    loadavg_1m: float
    probe_fp32_gops: Optional[float]
    probe_fraction: Optional[float]
    at: str
    others_running: Optional[int] = None  # other runnable threads/processes seen (from /proc/loadavg)
    cpus: int = 0
    steal_fraction: Optional[float] = None

    def text(self) -> str:
        if not self.contended:
            probe = f", probe at {self.probe_fraction:.0%} of the profile" if self.probe_fraction else ""
            return f"machine quiet (load average {self.loadavg_1m:.2f} on {self.cpus} CPUs{probe})"
        return "CONTENDED: figures taken while other work ran: " + "; ".join(self.reasons)


_PROBE_SESSIONS: dict[int, object] = {}
_PROBE_LOCK = threading.Lock()


def probe_gops(threads: int, seconds: float = 0.25) -> float:
    """The profile's M=128 FP32 chain in GOP/s: the median of the runs that fit in ``seconds``."""
    with _PROBE_LOCK:
        sess = _PROBE_SESSIONS.get(threads)
        if sess is None:
            sess = _PROBE_SESSIONS[threads] = gemm_session(gemm_chain("fp32", PROBE_TOKENS), threads)
    feed = gemm_feed("fp32", PROBE_TOKENS)
    stats = measure(lambda: sess.run(None, feed), warmup=1, repeats=200, max_seconds=seconds, min_repeats=5)
    return 2.0 * chain_macs(PROBE_TOKENS) / stats.median_ms / 1e6


def _own_runnable(tasks: str | os.PathLike = "/proc/self/task") -> int:
    n = 0
    for stat in Path(tasks).glob("*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "R":
                n += 1
        except (OSError, IndexError):
            continue  # a thread that ended while we read
    return max(1, n)


def runnable_others(samples: int = 5, gap_s: float = 0.01, loadavg: str | os.PathLike = "/proc/loadavg",
                    tasks: str | os.PathLike = "/proc/self/task") -> Optional[int]:
    """/proc/loadavg's running count minus this process's runnable threads, the least of a few readings.
    Ours are left out: a session that just ran spins its idle workers a moment (counted, they once made a quiet audit "busy")."""
    counts = []
    for i in range(samples):
        try:
            running = int(Path(loadavg).read_text().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        counts.append(max(0, running - _own_runnable(tasks)))
        if i + 1 < samples:
            time.sleep(gap_s)
    return min(counts)


def judge_load(profile: MachineProfile, probe: Optional[float], loadavg_1m: float,
               others_running: Optional[int], cpus: Optional[int] = None,
               steal_fraction: Optional[float] = None) -> LoadCheck:
    """The load average (it counts our own work) and steal (it names a slow probe's cause) are recorded, no reason alone."""
    cpus = int(cpus or usable_cpus())
    reasons = []
    fraction = None
    if probe is not None:
        ref = profile.probe_reference_gops()
        fraction = probe / ref if ref > 0 else None
        if fraction is not None and fraction < CONTENTION_THRESHOLD:
            if steal_fraction is not None and steal_fraction >= STEAL_THRESHOLD:
                why = (f"the host gave {steal_fraction:.0%} of this machine's CPU time to others while the probe ran "
                       "(steal: another tenant of the host)")
            elif others_running == 0:
                why = ("no other process was runnable here, so the CPUs themselves ran slower (another tenant of "
                       "this host, or a lower clock)")
            else:
                why = "other work is taking the CPUs"
            reasons.append(f"FP32 GEMM probe {probe:.0f} GFLOP/s is {fraction:.0%} of this machine's profile "
                           f"({ref:.0f}; below {CONTENTION_THRESHOLD:.0%}): {why}")
    if others_running is not None and others_running + profile.threads > cpus:
        reasons.append(f"{others_running} other runnable process(es)/thread(s) beside this one's {profile.threads} "
                       f"thread(s) on {cpus} CPUs: another process competes for the cores")
    return LoadCheck(contended=bool(reasons), reasons=reasons, loadavg_1m=round(float(loadavg_1m), 2),
                     probe_fp32_gops=None if probe is None else round(probe, 2),
                     probe_fraction=None if fraction is None else round(fraction, 3), at=_now(),
                     others_running=others_running, cpus=cpus,
                     steal_fraction=None if steal_fraction is None else round(steal_fraction, 3))


def cpu_times() -> Optional[tuple[float, float]]:
    """(steal, total) CPU seconds so far (guest left out: user and nice count it); None off Linux.
    Steal is time the host gave this VM's CPUs to another tenant: load no process list here shows."""
    try:
        t = psutil.cpu_times()
    except OSError:  # no /proc
        return None
    return (t.steal, sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)) if hasattr(t, "steal") else None


def steal_between(before: Optional[tuple[float, float]], after: Optional[tuple[float, float]]) -> Optional[float]:
    if before is None or after is None or after[1] <= before[1]:
        return None
    return max(0.0, (after[0] - before[0]) / (after[1] - before[1]))


def check_load(profile: MachineProfile, probe: bool = True) -> LoadCheck:
    others = runnable_others()  # before the probe: our own probe threads would count
    t0 = cpu_times()
    gops = probe_gops(profile.threads) if probe else None
    steal = steal_between(t0, cpu_times()) if probe else None
    return judge_load(profile, gops, os.getloadavg()[0], others, steal_fraction=steal)


def wait_for_calm(profile: MachineProfile, max_seconds: float, poll_s: float = 1.0) -> LoadCheck:
    deadline = time.monotonic() + max(0.0, float(max_seconds))
    while True:
        check = check_load(profile)
        if not check.contended or time.monotonic() >= deadline:
            return check
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def combine_checks(*checks: LoadCheck) -> LoadCheck:
    """Every reason kept, the worst probe and the highest load."""
    checks = tuple(c for c in checks if c is not None)
    if not checks:
        raise MachineError("combine_checks needs at least one LoadCheck")
    if len(checks) == 1:
        return checks[0]
    labels = ["before", "after"] if len(checks) == 2 else [f"check {i + 1}" for i in range(len(checks))]
    reasons = [f"{lab}: {r}" for lab, c in zip(labels, checks) for r in c.reasons]
    probes = [c for c in checks if c.probe_fraction is not None]
    worst = min(probes, key=lambda c: c.probe_fraction) if probes else None
    others = [c.others_running for c in checks if c.others_running is not None]
    steals = [c.steal_fraction for c in checks if c.steal_fraction is not None]
    return LoadCheck(contended=any(c.contended for c in checks), reasons=reasons, steal_fraction=max(steals) if steals else None,
                     loadavg_1m=max(c.loadavg_1m for c in checks),
                     probe_fp32_gops=worst.probe_fp32_gops if worst else None,
                     probe_fraction=worst.probe_fraction if worst else None, at=checks[-1].at,
                     others_running=max(others) if others else None, cpus=max(c.cpus for c in checks))
