"""Where the inference stages run, and what ONNX Runtime did with that. Placement is read from ONNX Runtime's
profile (verbose logging goes to stderr, which Python cannot capture cleanly) and the optimized graph's Memcpy nodes.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional, Sequence

CPU_PROVIDER = "CPUExecutionProvider"
CUDA_PROVIDER = "CUDAExecutionProvider"
DEVICES = ("cpu", "cuda")
MEMCPY_OPS = ("MemcpyToHost", "MemcpyFromHost")
# Shape-massaging ops the CUDA EP deliberately leaves on the CPU (small int64 tensors); they are
# not compute nodes, so they do not by themselves block CUDA graphs (inference_session.cc).
SHAPE_OPS = ("Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Reshape", "ConstantOfShape",
             "Range", "Equal", "Where", "Expand", "Cast", "ReduceProd", "NonZero")
ORT_DISTS = ("onnxruntime-gpu", "onnxruntime-training", "onnxruntime-training-cpu", "onnxruntime")
GPU_INFER_HINT = ("use the inference GPU environment: `make setup-gpu-infer` (onnxruntime-gpu, its own lock "
                  "requirements/constraints-gpu-infer.txt)")


class DeviceError(ValueError):
    """A device that was asked for and cannot be used; the message says what is missing and what to do."""


# ---- the device choice -----------------------------------------------------------------------
def normalize_device(device: Any) -> str:
    """``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (case and spaces ignored); anything else is an error."""
    text = str(getattr(device, "value", device)).strip().lower()
    if text in DEVICES or re.fullmatch(r"cuda:\d+", text):
        return text
    raise DeviceError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def device_index(device: str) -> int:
    d = normalize_device(device)
    return int(d.split(":")[1]) if ":" in d else 0


@dataclass(frozen=True)
class CudaFacts:
    """What decides whether CUDA inference can run here (gathered by :func:`cuda_facts`)."""

    ort_providers: tuple[str, ...] = ()
    ort_dists: dict[str, str] = field(default_factory=dict)  # installed onnxruntime* packages and versions
    ort_import_error: str = ""
    torch_version: str = ""
    torch_cuda_build: str = ""  # torch.version.cuda ("" for a CPU build of torch)
    torch_cuda_available: bool = False
    device_count: int = 0
    device_names: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()  # "9.0" per device

    @property
    def cuda_provider_built(self) -> bool:
        return CUDA_PROVIDER in self.ort_providers


def _dist_version(name: str) -> Optional[str]:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def cuda_facts() -> CudaFacts:
    dists = {d: v for d in ORT_DISTS if (v := _dist_version(d))}
    providers: tuple[str, ...] = ()
    ort_error = ""
    try:
        import onnxruntime

        providers = tuple(onnxruntime.get_available_providers())
    except ImportError as exc:
        ort_error = str(exc)
    tv, tcuda, avail, count, names, caps = "", "", False, 0, (), ()
    try:
        import torch

        tv = torch.__version__
        tcuda = torch.version.cuda or ""
        avail = bool(torch.cuda.is_available())
        if avail:
            count = torch.cuda.device_count()
            names = tuple(torch.cuda.get_device_name(i) for i in range(count))
            caps = tuple("{}.{}".format(*torch.cuda.get_device_capability(i)) for i in range(count))
    except ImportError:
        pass
    return CudaFacts(providers, dists, ort_error, tv, tcuda, avail, count, names, caps)


def cuda_problem(facts: CudaFacts, device: str = "cuda") -> Optional[str]:
    """Why ``device`` cannot be used with these facts, None when it can."""
    if facts.ort_import_error:
        return f"CUDA was asked for ({device}) but onnxruntime does not import ({facts.ort_import_error}); {GPU_INFER_HINT}"
    installed = ", ".join(f"{d} {v}" for d, v in facts.ort_dists.items()) or "no onnxruntime package"
    if not facts.cuda_provider_built:
        cpu_builds = [d for d in facts.ort_dists if d in ("onnxruntime", "onnxruntime-training-cpu")]
        what = (f"the installed ONNX Runtime ({installed}) is a CPU build" if cpu_builds
                else f"the installed ONNX Runtime ({installed}) has no {CUDA_PROVIDER}")
        return (f"CUDA was asked for ({device}) but {what}: its providers are {list(facts.ort_providers)}. "
                f"CUDA inference needs the onnxruntime-gpu package: {GPU_INFER_HINT}; or, for CUDA training too, "
                "`make setup-gpu` (onnxruntime-training 1.19.2, CUDA 12, Python 3.10/3.11 only). "
                "Or run with --device cpu")
    if not facts.torch_version:
        return (f"CUDA was asked for ({device}): {CUDA_PROVIDER} is built in ({installed}) but torch is not installed, "
                "so no CUDA device can be checked; install the environment's torch (see README: Environments)")
    if not facts.torch_cuda_available:
        build = (f"torch {facts.torch_version} is a CPU build (torch.version.cuda is None): install a CUDA build of torch"
                 if not facts.torch_cuda_build else
                 f"torch {facts.torch_version} (CUDA {facts.torch_cuda_build}) sees no CUDA device: "
                 "check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES")
        return (f"CUDA was asked for ({device}) and {CUDA_PROVIDER} is built in ({installed}), but no CUDA device is "
                f"available: {build}. Or run with --device cpu")
    idx = device_index(device)
    if idx >= facts.device_count:
        return (f"CUDA device {idx} was asked for but only {facts.device_count} device(s) are visible: "
                f"use cuda:0..cuda:{facts.device_count - 1}")
    return None


def require_device(device: Any, facts: Optional[CudaFacts] = None) -> str:
    d = normalize_device(device)
    if d == "cpu":
        return d
    problem = cuda_problem(facts if facts is not None else cuda_facts(), d)
    if problem:
        raise DeviceError(problem)
    return d


def session_providers(device: Any, cuda_graph: bool = False) -> tuple[list[str], list[dict]]:
    """(providers, provider_options): CUDA first, the CPU for nodes CUDA has no kernel for."""
    d = normalize_device(device)
    if d == "cpu":
        if cuda_graph:
            raise DeviceError("CUDA graphs need device='cuda': the CPU provider has no graph capture")
        return [CPU_PROVIDER], [{}]
    opts = {"device_id": str(device_index(d))}
    if cuda_graph:
        opts["enable_cuda_graph"] = "1"
    return [CUDA_PROVIDER, CPU_PROVIDER], [opts, {}]


# ---- placement ------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodePlacement:
    name: str
    op_type: str
    provider: str


@dataclass(frozen=True)
class CaptureRefusal:
    kind: str  # nodes_not_on_cuda | control_flow | shapes | needs_cuda | capture_failed | unknown
    reason: str
    fix: str
    error: str  # ONNX Runtime's own text


@dataclass(frozen=True)
class PlacementReport:
    """Where one session's nodes ran, the copies ONNX Runtime inserted, and whether a CUDA graph captured it."""

    device: str
    session_providers: list[str]
    nodes_by_provider: dict[str, int]
    cpu_nodes: list[NodePlacement]  # on the CPU although the session asked for CUDA (empty on the CPU)
    cpu_ops: dict[str, int]
    cpu_compute_nodes: list[NodePlacement]  # cpu_nodes that are not shape bookkeeping or copies
    memcpy_nodes: dict[str, int]  # MemcpyToHost / MemcpyFromHost inserted by ONNX Runtime
    graph_capture: Optional[bool] = None  # True captured, False refused, None not tried
    capture_refusal: Optional[CaptureRefusal] = None
    notes: list[str] = field(default_factory=list)

    @property
    def memcpy_total(self) -> int:
        return sum(self.memcpy_nodes.values())

    def summary(self) -> str:
        if self.device == "cpu":
            line = f"cpu: all {sum(self.nodes_by_provider.values())} nodes on the CPU provider (nothing to place elsewhere)"
        else:
            where = ", ".join(f"{p} {n}" for p, n in self.nodes_by_provider.items())
            ops = ", ".join(f"{o} {n}" for o, n in self.cpu_ops.items()) or "none"
            line = (f"{self.device}: {where}; on the CPU: {ops} ({len(self.cpu_compute_nodes)} compute); "
                    f"Memcpy nodes inserted: {self.memcpy_total}")
        if self.graph_capture is True:
            line += "; CUDA graph captured"
        elif self.capture_refusal is not None:
            line += f"; CUDA graph refused: {self.capture_refusal.reason}"
        return line


def kernel_events(events: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(node name, event) for each node kernel event of ONNX Runtime's profile (``cat == "Node"``, ``<node>_kernel_time``)."""
    for ev in events:
        name = str(ev.get("name", ""))
        if ev.get("cat") == "Node" and name.endswith("_kernel_time"):
            yield name[: -len("_kernel_time")], ev


def placements_from_profile(events: Sequence[Mapping[str, Any]]) -> list[NodePlacement]:
    seen: dict[str, NodePlacement] = {}
    for node, ev in kernel_events(events):
        args = ev.get("args") or {}
        seen.setdefault(node, NodePlacement(node, str(args.get("op_name", "")), str(args.get("provider", ""))))
    return list(seen.values())


def memcpy_counts(model_or_path: Any) -> dict[str, int]:
    if isinstance(model_or_path, (str, os.PathLike)):
        import onnx

        model_or_path = onnx.load(str(model_or_path), load_external_data=False)
    counts = Counter(n.op_type for n in model_or_path.graph.node if n.op_type in MEMCPY_OPS)
    return {op: counts.get(op, 0) for op in MEMCPY_OPS}


def classify_capture_error(text: str) -> CaptureRefusal:
    t = text.lower()
    if "control flow" in t:
        return CaptureRefusal("control_flow", "the graph has control-flow nodes (If/Loop/Scan), which CUDA graphs cannot hold",
                              "export without control flow (fixed shapes, no data-dependent branches)", text)
    if "have not been partitioned" in t or "have not been assigned" in t or "assigned to the default cpu ep" in t:
        return CaptureRefusal("nodes_not_on_cuda",
                              "some compute nodes were placed on the CPU (with Memcpy nodes around them), so one CUDA graph "
                              "cannot hold the whole run",
                              "use the fused graph (the transformer optimizer replaces the CPU-placed shape arithmetic), or "
                              "look at the nodes listed on the CPU and change the export", text)
    if "shape" in t and ("mismatch" in t or "different" in t or "invalid dimensions" in t):
        return CaptureRefusal("shapes", "the input shapes differ from the ones the graph was captured with",
                              "capture one session per (batch, sequence) shape", text)
    if "cuda" in t and ("not available" in t or "no cuda" in t or "cpu" in t and "graph" not in t):
        return CaptureRefusal("needs_cuda", "CUDA graphs need the CUDA execution provider on a CUDA device",
                              "run with device='cuda' in a GPU environment", text)
    if "capture" in t or "cudagraph" in t or "stream" in t:
        return CaptureRefusal("capture_failed", "the CUDA runtime failed while capturing the graph",
                              "a kernel in the graph is not capturable: time without CUDA graphs", text)
    return CaptureRefusal("unknown", "ONNX Runtime did not say why in a way this workbench recognizes", "read the error text", text)


def analyze_placement(placements: Sequence[NodePlacement], device: Any, session_providers: Sequence[str] = (),
                      memcpy: Optional[Mapping[str, int]] = None, capture_error: Optional[str] = None,
                      captured: Optional[bool] = None) -> PlacementReport:
    """The report for one session from its placements, Memcpy counts and CUDA-graph capture outcome."""
    d = normalize_device(device)
    by_provider = dict(Counter(p.provider for p in placements).most_common())
    cpu_nodes = [p for p in placements if p.provider == CPU_PROVIDER] if d != "cpu" else []
    compute = [p for p in cpu_nodes if p.op_type not in SHAPE_OPS and p.op_type not in MEMCPY_OPS]
    memcpy_nodes = dict(memcpy) if memcpy is not None else {
        op: sum(1 for p in placements if p.op_type == op) for op in MEMCPY_OPS}
    notes = []
    if d != "cpu" and CUDA_PROVIDER not in session_providers and session_providers:
        notes.append(f"the session runs on {list(session_providers)}: ONNX Runtime did not load the CUDA provider")
    if d != "cpu" and cpu_nodes and not compute:
        notes.append("only shape bookkeeping runs on the CPU (small int64 tensors); the compute is on the GPU")
    refusal = classify_capture_error(capture_error) if capture_error else None
    return PlacementReport(
        device=d, session_providers=list(session_providers), nodes_by_provider=by_provider, cpu_nodes=cpu_nodes,
        cpu_ops=dict(Counter(p.op_type for p in cpu_nodes).most_common()), cpu_compute_nodes=compute,
        memcpy_nodes=memcpy_nodes, graph_capture=False if refusal else captured, capture_refusal=refusal, notes=notes,
    )
