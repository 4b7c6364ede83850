"""Facts about the machine and the packages, for the report's environment section."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform

from .schema import PACKAGES

CPU_FLAGS_OF_INTEREST = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


def cpu_facts() -> dict:
    """CPU model, the instruction-set flags that decide INT8/bf16 speed, cores, load average."""
    from ..perf.machine_profile import read_cpuinfo, usable_cpus

    model, flags = read_cpuinfo()
    usable = usable_cpus()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {"model": model, "flags": [f for f in CPU_FLAGS_OF_INTEREST if f in flags], "logical_cores": os.cpu_count() or 0,
            "usable_cores": usable, "load_average": load, "vnni": bool({"avx512_vnni", "avx_vnni"} & flags)}


def environment_facts(doctor=None) -> dict:
    import sys

    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = md.version(name)
        except md.PackageNotFoundError:
            if name not in ("onnxruntime-training", "onnxruntime-training-cpu"):
                packages[name] = None
    threads = int(sys.modules["torch"].get_num_threads()) if "torch" in sys.modules else None
    env = {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_facts(),
           "packages": packages, "torch_threads": threads, "doctor": []}
    if doctor is not None:
        env["doctor"] = [{"name": c.name, "status": c.status, "value": c.value, "fix": c.fix} for c in doctor.checks]
        env["doctor_ok"] = bool(doctor.ok)
    return env
