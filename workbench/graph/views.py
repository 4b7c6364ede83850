"""Fusion reports as text: a JSON-ready :func:`summary` and a plain-text :func:`table`."""

from __future__ import annotations

from typing import Optional

from .export import ExportResult
from .fusion import FusionReport


def _ms(latency) -> dict[str, float]:
    return {f"{s.batch}x{s.seq}": s.stats.median_ms for s in latency}


def summary(report: FusionReport) -> dict:
    """A compact, JSON-ready summary (the full report, provenance included, is in fusion.json)."""
    speed = report.speedups() if report.pytorch_latency else {}
    return {
        "source": str(report.source_path),
        "fused_path": str(report.fused_path) if report.fused_path else None,
        "reference": report.reference,
        "all_passed": report.all_passed,
        "expected_fusions": report.expected_fusions,
        "variants": [{
            "name": v.name.value, "path": str(v.path), "session_optimization": v.session_optimization,
            "node_count": v.node_count, "fused_ops": v.fused_ops, "size_mib": v.size_mib,
            "nodes_removed": v.nodes_removed, "nodes_added": v.nodes_added,
            "validation": {"passed": v.validation.passed, "max_abs_diff": v.validation.max_abs_diff,
                           "label_agreement": v.validation.label_agreement, "message": v.validation.message},
            "median_ms": _ms(v.latency),
            "speedup_vs_pytorch": speed.get(v.name.value, {}),
        } for v in report.variants],
        "pytorch_median_ms": _ms(report.pytorch_latency),
        "diagnoses": [{"fusion": d.fusion, "expected": d.expected, "found": d.found, "cause": d.cause, "fix": d.fix}
                      for d in report.diagnoses],
        "notes": report.notes,
        "device": report.device,
        "placement": {name: {"summary": p.summary(), "nodes_by_provider": p.nodes_by_provider, "cpu_ops": p.cpu_ops,
                             "memcpy_nodes": p.memcpy_nodes, "graph_capture": p.graph_capture,
                             "capture_refusal": (p.capture_refusal.kind + ": " + p.capture_refusal.reason)
                             if p.capture_refusal else None} for name, p in report.placement.items()},
        "cuda_graph_median_ms": {name: _ms(lat) for name, lat in report.cuda_graph_latency.items()},
        "pytorch_peers_median_ms": {name: _ms(lat) for name, lat in report.pytorch_peers.items()},
        "choice": choice_summary(report),
    }


def choice_summary(report: FusionReport) -> Optional[dict]:
    """The fusion choice, JSON-ready, every candidate with it (None for a report written before the choice existed)."""
    c = report.choice
    if c is None:
        return None
    return {"mode": c.mode, "chosen": c.chosen, "path": str(c.path) if c.path else None, "reason": c.reason,
            "margin": c.margin, "contended": bool(c.load and c.load.contended),
            "candidates": [{
                "name": k.name, "left_out": k.left_out, "kept": k.path is not None, "fused_ops": dict(k.fused_ops),
                "node_count": k.node_count, "session_disabled": list(k.session_disabled),
                "validation_passed": bool(k.validation and k.validation.passed),
                "max_abs_diff": k.validation.max_abs_diff if k.validation else None,
                "median_ms": _ms(k.latency),
                "speedup_vs_full": {shape: {"value": r.value, "lo": r.lo, "hi": r.hi} for shape, r in k.ratios.items()},
            } for k in c.candidates]}


def choice_lines(report: FusionReport) -> list[str]:
    c = report.choice
    if c is None:
        return []
    lines = [f"fusion choice ({c.mode}): {c.reason}"]
    for k in c.candidates:
        fused = ", ".join(f"{op} {n}" for op, n in k.fused_ops.items()) or "nothing fused"
        speed = "; ".join(f"{shape} {r.text()}" for shape, r in k.ratios.items())
        ok = "" if k.validation is None or k.validation.passed else ", FAILED validation"
        lines.append(f"  {'*' if k.name == c.chosen else ' '} {k.name:<20} {k.node_count:>5} nodes{ok}: {fused}"
                     + (f"; vs full {speed}" if speed else ""))
    return lines


def table(report: FusionReport) -> str:
    """The report as a plain-text table: one row per variant, medians per shape with speed-ups."""
    shapes = [(s[0], s[1]) for s in report.shapes]
    timed = bool(report.pytorch_latency) or any(v.latency for v in report.variants)
    w = max([13] + [len(v.name.value) for v in report.variants])
    head = f"{'variant':<{w}} {'session':<9} {'nodes':>5} {'MiB':>6} {'max|Δ|':>9} {'ok':>3}"
    if timed:
        head += "".join(f" {f'{b}x{s} ms':>12}" for b, s in shapes)
    lines = [head, "-" * len(head)]
    base = {(s.batch, s.seq): s.stats.median_ms for s in report.pytorch_latency}

    def cells(lat) -> str:
        got = {(s.batch, s.seq): s.stats.median_ms for s in lat}
        out = ""
        for shape in shapes:
            ms = got.get(shape)
            if ms is None:
                out += f" {'-':>12}"
            elif shape in base:
                out += f" {f'{ms:.2f} {base[shape] / ms:.2f}x':>12}"
            else:
                out += f" {f'{ms:.2f}':>12}"
        return out

    blank = f" {'':>5} {'':>6} {'':>9} {'':>3}"  # nodes, MiB, max|Δ| and ok: a graph's, not PyTorch's
    for name, lat in (({"eager": report.pytorch_latency} if report.pytorch_latency else {}) | report.pytorch_peers).items():
        lines.append(f"{'pytorch':<{w}} {name:<9}{blank}" + cells(lat))
    for v in report.variants:
        row = (f"{v.name.value:<{w}} {v.session_optimization:<9} {v.node_count:>5} {v.size_mib:>6.1f} "
               f"{v.validation.max_abs_diff:>9.2g} {'yes' if v.validation.passed else 'NO':>3}")
        lines.append(row + (cells(v.latency) if timed else ""))
        if v.name.value in report.cuda_graph_latency:
            lines.append(f"{'  + CUDA graph':<{w}} {'':<9}{blank}" + cells(report.cuda_graph_latency[v.name.value]))
    if report.device != "cpu":
        lines.append(f"\ndevice: {report.device} (ONNX Runtime with I/O binding: inputs and outputs on the device)")
        for name, p in report.placement.items():
            lines.append(f"placement {name}: {p.summary()}")
            if p.capture_refusal is not None:
                lines.append(f"  CUDA graph refused ({p.capture_refusal.kind}): {p.capture_refusal.error}\n  fix: {p.capture_refusal.fix}")
    if report.fused_path is not None:
        counts = ", ".join(f"{k} {n}" for k, n in report.fused_op_counts.items()) or "none"
        lines.append(f"\nfused by the transformer optimizer: {counts}")
    lines += choice_lines(report)
    if timed and report.pytorch_latency:
        lines.append("(ms: median per batch; x: speed-up over PyTorch eager measured in this run, interleaved rounds)")
    for sp in report.speed:
        floor = f", {100 * sp.of_floor:.0f}% of its floor {sp.floor_ms:.2f} ms" if sp.of_floor else ""
        lines.append(f"  {sp.name} at {sp.batch}x{sp.seq}: {sp.ratio.text()} vs {sp.base}{floor}")
    if report.load is not None and report.load.contended:
        lines.append(f"WARNING: timing {report.load.text()}; the speed-ups above are not measured facts")
    for d in report.diagnoses:
        lines.append(f"\nMISSING {d.fusion}: expected {d.expected}, found {d.found}\n  cause: {d.cause}\n  fix:   {d.fix}")
    for n in report.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def export_text(result: ExportResult) -> str:
    """An export in a few lines: model, opset, size, top ops, inputs, and the validation against PyTorch."""
    top = ", ".join(f"{op} {n}" for op, n in list(result.op_histogram.items())[:8])
    return "\n".join([
        f"exported {result.model_name} ({result.attn_implementation} attention, opset {result.opset}) "
        f"in {result.export_seconds:.1f} s",
        f"graph:      {result.onnx_path} ({result.size_mib:.1f} MiB, {result.node_count} nodes: {top}, ...)",
        f"inputs:     {', '.join(result.input_names)} (what {result.model_info.model_type or 'the model'}'s forward() takes)",
        f"validation: {result.validation.message}",
    ])
