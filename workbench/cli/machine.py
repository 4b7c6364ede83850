"""``workbench machine``: this machine's profile (CPU, instruction sets, matmul throughput), cached, and a busy check."""

from __future__ import annotations

import argparse
import sys

from ..core import serial
from .common import fail, print_json, output_flags
from .flags import cli_only


def _positive_threads(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--threads must be a positive whole number, got {text!r}; "
                                         "leave it out for the workbench's default (one per usable CPU)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--threads must be a positive whole number, got {value}; "
                                         "leave it out for the workbench's default (one per usable CPU)")
    return value


def _cmd_machine(args) -> int:
    from ..perf.machine_profile import MachineError, check_load, machine_profile

    try:
        if args.refresh and not args.json:
            print("measuring this machine's matrix-multiply throughput through ONNX Runtime (a few seconds)...",
                  flush=True)
        profile = machine_profile(threads=args.threads, refresh=args.refresh)
    except MachineError as exc:
        return fail(str(exc))
    load = check_load(profile)
    if args.json:
        print_json({**serial.to_dict(profile), "key": profile.key, "int8_over_fp32": round(profile.int8_over_fp32, 3),
                     "isa": profile.isa_text(), "load": load, "contended": load.contended})
    else:
        print(profile.text())
        if load.contended:
            print(f"warning: {load.text()}", file=sys.stderr)
            print("  timings taken now would be low and are flagged as contended"
                  + ("; the profile just measured may be low too: --refresh again when the machine is quiet"
                     if args.refresh else ""), file=sys.stderr)
        else:
            print(f"  {load.text()}")
    return 0


def add_machine(sub) -> None:
    p = sub.add_parser("machine", help="this machine's CPU, instruction sets and FP32/INT8 matrix-multiply throughput "
                                       "through ONNX Runtime (cached; --refresh re-measures)")
    output_flags(p, None, new_runs=False, json="print the profile (fp32_gops, int8_gops, ...) and the load check as JSON")
    cli_only(p, "--refresh", action="store_true", help="measure again instead of reading the cached profile")
    cli_only(p, "--threads", type=_positive_threads, default=None,
             help="intra-op threads to measure with (default: one per usable CPU, what the workbench times with)")
    p.set_defaults(func=_cmd_machine)
