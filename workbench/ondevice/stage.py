"""On-device training: the stage, ``run_ondevice(model, OnDeviceConfig, out) -> OnDeviceResult``."""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from .. import runs
from ..runs import layout
from ..graph import ExportConfig, ExportResult, file_size_mib, model_info, op_histogram
from ..runtime.ortinfer import torch_threads
from .artifacts import build_artifacts, cap_ir_version, quiet_onnxruntime, training_api
from .config import ARTIFACTS_DIR, EXPORT_TOLERANCE, TRAINED_CHECKPOINT, TRAINED_MODEL_DIR, OnDeviceConfig, OnDeviceError
from .data import make_batches, load_ondevice_model
from .loops import OrtTrainer, TorchTrainer
from .memory import measure_isolated
from .result import OnDeviceResult, SideCost
from .web import write_page

ProgressFn = Callable[[int, int, str], None]


def _environment(threads: int) -> dict[str, Any]:
    import platform

    from ..perf.machine_profile import read_cpuinfo

    _, flags = read_cpuinfo()
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "avx512_bf16")
    return {"cpu": platform.processor() or platform.machine(), "flags": [f for f in wanted if f in flags],
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "logical_cores": os.cpu_count(), "threads": threads}


def check_model(model: str | os.PathLike) -> None:
    """A built-in name, or a folder with a supported sequence classifier; else ModelError (one line)."""
    from ..models.load import BUILTIN_MODELS, check_classifier, check_model_type, resolve_model_path

    if str(model) not in BUILTIN_MODELS:
        check_model_type(resolve_model_path(str(model)))  # the weights file too
        check_classifier(resolve_model_path(str(model)))


def run_ondevice(model: str | os.PathLike, cfg: Optional[OnDeviceConfig] = None, out_dir: str | os.PathLike | None = None,
                 *, data=None, progress: Optional[ProgressFn] = None, stop=None) -> OnDeviceResult:
    """Build the artifacts, train on the device and in PyTorch eager on the same batches, compare, export the
    trained model for inference; save ``ondevice.json``. A stopped run still exports what was trained."""
    import torch

    from ..data.load import DataConfig, load_data
    from ..graph import data_classes
    model = str(model)
    cfg = cfg or OnDeviceConfig()
    started = time.perf_counter()
    check_model(model)  # ModelError: one line, before any data is loaded
    out = Path(out_dir) if out_dir is not None else runs.default_out(layout.ONDEVICE_DIR)
    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = load_data(DataConfig(source=cfg.data, max_train=cfg.max_train, max_eval=max(cfg.validation_examples, 64)))
    classes = data_classes(data) or sorted({str(x) for x in data["train"]["label"]})
    loaded = load_ondevice_model(model, cfg, classes)
    if loaded.num_labels != len(classes):
        raise OnDeviceError(f"the model has {loaded.num_labels} classes but the data has {len(classes)} ({classes}); "
                            "give a model fine-tuned on these classes, or data with the model's classes")
    if len(data["train"]) < cfg.batch_size:
        raise OnDeviceError(f"the training split has {len(data['train'])} examples, fewer than one batch of {cfg.batch_size}")
    notes: list[str] = []
    initial = {n: p.detach().clone() for n, p in loaded.model.named_parameters()}

    # 1. artifacts
    art = build_artifacts(loaded, cfg, out / ARTIFACTS_DIR, data["train"]["text"][:2])
    notes.extend(art.notes)
    batches = make_batches(loaded, data["train"], cfg)
    input_names = [k for k in batches[0] if k != "labels"]
    # the web page: the same artifacts (the initial checkpoint) and the same batches, for onnxruntime-web
    page = write_page(out, cfg, loaded, data, batches, classes)

    # 2. both loops, interleaved step by step in this process (same load on both), same thread count
    threads = cfg.threads or torch.get_num_threads()
    with torch_threads(threads):
        return _train_and_export(model, cfg, out, data, classes, loaded, initial, art, batches, input_names, threads, notes,
                                 started, progress, stop, page)


@dataclass
class _SideBySide:
    """Both loops' per-step losses and times (ms), and whether a stop request ended them early."""

    ort_losses: list[float] = field(default_factory=list)
    pt_losses: list[float] = field(default_factory=list)
    ort_ms: list[float] = field(default_factory=list)
    pt_ms: list[float] = field(default_factory=list)
    stopped: bool = False


def _train_side_by_side(ort_trainer, torch_trainer, batches, progress: Optional[ProgressFn], stop) -> _SideBySide:
    """One on-device step then one PyTorch step per batch, interleaved in this process (same load on both)."""
    run = _SideBySide()
    for i, batch in enumerate(batches):
        if stop is not None and stop.is_set():
            run.stopped = True
            break
        for trainer, losses, ms in ((ort_trainer, run.ort_losses, run.ort_ms), (torch_trainer, run.pt_losses, run.pt_ms)):
            t0 = time.perf_counter()
            losses.append(trainer.step(batch))
            ms.append((time.perf_counter() - t0) * 1000)
        if progress is not None:
            progress(i + 1, len(batches), f"loss on-device {run.ort_losses[-1]:.4f}, PyTorch {run.pt_losses[-1]:.4f}")
    if not run.ort_losses:
        raise OnDeviceError("stopped before the first step: nothing was trained")
    return run


def _loss_parity(cfg: OnDeviceConfig, run: _SideBySide, notes: list[str]) -> tuple[float, float, str]:
    """(largest per-step loss difference, the tolerance, what the comparison rests on); a diverged run is infinitely apart."""
    max_diff = max(abs(a - b) for a, b in zip(run.ort_losses, run.pt_losses))
    tol = cfg.effective_tolerance
    basis = (f"fp32, dropout off, same batches, same trainable set and the same AdamW update: per-step losses compared "
             f"within {tol:g}" + (" (given)" if cfg.tolerance is not None else
                                   " (170x the largest drift measured, 5x below the smallest defect measured: 2x lr)"))
    if not all(math.isfinite(x) for x in run.ort_losses + run.pt_losses):
        notes.append("a loss was NaN or infinite: training diverged (lower the learning rate)")
        max_diff = float("inf")
    return max_diff, tol, basis


def _compare_weights(state_params, art, loaded, initial: dict) -> tuple[dict[str, np.ndarray], float, float, bool]:
    """(trained weights, largest difference from PyTorch's, how far they moved, frozen weights untouched)."""
    ort_trained = {n: np.asarray(state_params[n].data) for n in art.trainable_tensors}
    pt_params = dict(loaded.model.named_parameters())
    weights_diff = max(float(np.abs(ort_trained[n] - pt_params[n].detach().numpy()).max()) for n in ort_trained)
    moved = max(float(np.abs(ort_trained[n] - initial[n].numpy()).max()) for n in ort_trained)
    frozen_ok = all(np.array_equal(np.asarray(state_params[n].data), initial[n].numpy())
                    for n in initial if n not in ort_trained and n in state_params)
    return ort_trained, weights_diff, moved, frozen_ok


def _agreement_with_pytorch(export: ExportResult, loaded, data, tol: float, notes: list[str]):
    """The on-device inference graph validated against the model trained in PyTorch eager."""
    from ..graph import select_examples, validate_onnx
    from ..runtime.ortinfer import torch_predict_dataset

    vcfg = export.config
    examples = select_examples(data, vcfg)
    pt_reference = torch_predict_dataset(loaded.model, loaded.tokenizer, examples, vcfg.max_length, vcfg.validation_batch_size)
    agreement = validate_onnx(Path(export.onnx_path), pt_reference, loaded.tokenizer, examples,
                              replace(vcfg, tolerance=max(10 * tol, EXPORT_TOLERANCE)),
                              what="the on-device inference graph (vs the model trained in PyTorch eager)")
    if any(n == "Dropout" for n in export.op_histogram):
        notes.append("the inference graph keeps Dropout nodes (probability 0, a no-op at inference)")
    return agreement


def _step_costs(model, cfg: OnDeviceConfig, out: Path, art, batches, input_names, classes, threads, run: _SideBySide,
                notes: list[str]) -> tuple[SideCost, SideCost]:
    """Each side's cost: step time from the interleaved loop, memory from one fresh process per side."""
    ort_cost = SideCost("onnxruntime.training.api", statistics.median(run.ort_ms[1:] or run.ort_ms), [round(x, 3) for x in run.ort_ms])
    pt_cost = SideCost("pytorch eager", statistics.median(run.pt_ms[1:] or run.pt_ms), [round(x, 3) for x in run.pt_ms])
    if not cfg.measure_memory:
        notes.append("peak memory not measured (measure_memory=False)")
        return ort_cost, pt_cost
    iso = measure_isolated(model, art, cfg, batches, input_names, classes, out / ".measure", threads)
    ort_cost, pt_cost = (replace(cost, peak_rss_mib=round(m["peak_rss_mib"], 1), rss_growth_mib=round(m["rss_growth_mib"], 1),
                                 setup_s=round(m["setup_s"], 3), isolated_median_step_ms=round(m["median_step_ms"], 3))
                         for cost, m in ((ort_cost, iso["ort"]), (pt_cost, iso["eager"])))
    notes.append("peak memory: process RSS (psutil, sampled every 10 ms) of a fresh process per side running the same "
                 f"{min(cfg.memory_steps, len(batches))} steps; both processes import torch (onnxruntime.training "
                 "imports ORTModule), so compare the growth during the steps as well as the peak")
    return ort_cost, pt_cost


def _train_and_export(model, cfg, out, data, classes, loaded, initial, art, batches, input_names, threads, notes, started,
                      progress, stop, page) -> OnDeviceResult:
    ort_trainer = OrtTrainer(Path(art.folder), cfg.lr, input_names, threads)
    torch_trainer = TorchTrainer(loaded, art.trainable_tensors, cfg)
    run = _train_side_by_side(ort_trainer, torch_trainer, batches, progress, stop)
    max_diff, tol, basis = _loss_parity(cfg, run, notes)

    # 3. trained weights: on-device vs PyTorch, frozen ones untouched
    ort_trained, weights_diff, moved, frozen_ok = _compare_weights(ort_trainer.state.parameters, art, loaded, initial)
    ckpt = out / TRAINED_CHECKPOINT
    _, _, CheckpointState, _, _ = training_api()
    with runs.atomic_path(ckpt) as tmp:
        CheckpointState.save_checkpoint(ort_trainer.state, str(tmp))

    # 4. back to an inference graph, written as an export the later stages read
    inf_dir, trained_dir = out / layout.INFERENCE_DIR, out / TRAINED_MODEL_DIR
    export = export_trained(
        ort_trainer.module, loaded, cfg, data, classes, ort_trained, initial, inf_dir, trained_dir,
        f"{loaded.name}+ondevice", "the on-device inference graph (vs PyTorch with the on-device-trained weights)",
        "onnxruntime.training.api (Python)")
    agreement = _agreement_with_pytorch(export, loaded, data, tol, notes)

    # 5. cost: step time from the interleaved loop, memory from one fresh process per side
    del ort_trainer
    ort_cost, pt_cost = _step_costs(model, cfg, out, art, batches, input_names, classes, threads, run, notes)
    result = OnDeviceResult(
        config=cfg, model_source=str(loaded.source), class_names=[str(c) for c in classes], artifacts=art,
        ondevice_losses=run.ort_losses, pytorch_losses=run.pt_losses, max_loss_diff=max_diff, tolerance=tol,
        loss_parity=bool(max_diff <= tol), parity_basis=basis, ondevice=ort_cost, pytorch=pt_cost,
        weights_max_abs_diff=weights_diff, weights_moved=moved, frozen_unchanged=bool(frozen_ok),
        inference_path=Path(export.onnx_path), inference_dir=inf_dir.resolve(), validation=export.validation,
        agreement_with_pytorch_training=agreement, trained_checkpoint=ckpt.resolve(), trained_model_dir=trained_dir.resolve(),
        stopped=run.stopped, seconds=time.perf_counter() - started, environment=_environment(threads), notes=notes,
        web_page=page.page, web_note=page.note, model=model)
    runs.save_result(result, out / layout.ONDEVICE_FILE)
    return result


def export_trained(module, loaded, cfg: OnDeviceConfig, data, classes, trained: dict[str, np.ndarray],
                   initial: dict[str, Any], inf_dir: Path, trained_dir: Path, model_name: str, what: str, trained_in: str = ""):
    """The trained ``module`` as an inference export in ``inf_dir``, validated against PyTorch holding the
    same weights (saved in ``trained_dir``); ``loaded.model``'s own weights are put back afterwards."""
    import torch

    from ..graph import EXAMPLES_FILE, EXPORT_FILE, ONNX_FILE, REFERENCE_FILE, TOKENIZER_DIR
    from ..graph import save_tokenizer, select_examples, validate_onnx, write_examples
    from ..graph.facts import graph_inputs
    from ..runtime.ortinfer import torch_predict_dataset

    inf_dir.mkdir(parents=True, exist_ok=True)
    inf_path = inf_dir / ONNX_FILE
    with runs.atomic_path(inf_path) as tmp, quiet_onnxruntime():
        module.export_model_for_inferencing(str(tmp), ["logits"])
    proto, _ = cap_ir_version(inf_path)
    held = {n: p.detach().clone() for n, p in loaded.model.named_parameters()}
    with torch.no_grad():
        for n, p in loaded.model.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(trained[n])) if n in trained else initial[n])
    with runs.atomic_dir(trained_dir) as tmp:
        loaded.model.save_pretrained(str(tmp))
        loaded.tokenizer.save_pretrained(str(tmp))
    vcfg = ExportConfig.strict(opset=cfg.opset, max_length=cfg.max_length, validation_examples=cfg.validation_examples,
                               tolerance=EXPORT_TOLERANCE)
    vcfg = replace(vcfg, validation_split="validation" if "validation" in data else "test")
    examples = select_examples(data, vcfg)
    try:
        reference = torch_predict_dataset(loaded.model, loaded.tokenizer, examples, vcfg.max_length, vcfg.validation_batch_size)
        validation = validate_onnx(inf_path, reference, loaded.tokenizer, examples, vcfg, what=what)
    finally:
        with torch.no_grad():
            for n, p in loaded.model.named_parameters():
                p.copy_(held[n])
    tok_dir = save_tokenizer(loaded.tokenizer, inf_dir / TOKENIZER_DIR)
    ex_path = write_examples(inf_dir / EXAMPLES_FILE, examples)
    ref_path = runs.atomic_write_npy(inf_dir / REFERENCE_FILE, reference)
    export = ExportResult(
        onnx_path=inf_path.resolve(), model_source=str(trained_dir.resolve()), model_name=model_name,
        opset=cfg.opset, input_names=graph_inputs(proto),
        output_names=["logits"], validation=validation, size_mib=file_size_mib(inf_path), node_count=len(proto.graph.node),
        op_histogram=op_histogram(proto), attn_implementation=str(loaded.attn_implementation),
        class_names=[str(c) for c in classes], max_length=cfg.max_length, model_info=model_info(loaded),
        tokenizer_dir=tok_dir.resolve(), examples_path=ex_path.resolve(), reference_logits_path=ref_path.resolve(),
        export_seconds=0.0, config=vcfg, trained_in=trained_in)
    runs.save_result(export, inf_dir / EXPORT_FILE)
    return export
