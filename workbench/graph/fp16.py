"""The FP16 variant of the fused graph, and how it is validated against FP32.

:func:`convert_fp16` converts the fused graph with ``keep_io_types=True``: int64 inputs and float32 logits
keep their types, with Casts at the boundary (:func:`fp16_structure` checks that on the file).

The FP16 graph runs on the CPU too (checked with onnxruntime 1.19.2 on the tiny model and MiniLM):
InsertCastTransformer wraps every node without a float16 CPU kernel in Casts, so tensors *between* nodes are
float16 and the arithmetic inside is float32. That measures most of the drift; CUDA kernels also round inside
some nodes (softmax, half-precision accumulations), hence room over the CPU figure in :data:`FP16_TOLERANCE`.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .. import runs
from .facts import as_model
from .validate import compare_logits
from .variants import transformers_optimizer

# float16's unit roundoff is 2**-11 = 4.9e-4: one rounding of a logit of 4 moves it by up to 2e-3. Measured on
# the CPU provider, MiniLM-L6 briefly fine-tuned, 32 reviews at 64 tokens: max |Δ logit| 2.0e-3; tiny 1e-5.
# 0.05 leaves about 25x room for CUDA's own rounding and longer sequences, two orders of magnitude below a
# decision-changing margin (|logit| ~ 2-5). Labels may flip only on near-ties: at least 99% must agree.
FP16_TOLERANCE = 0.05
FP16_MIN_LABEL_AGREEMENT = 0.99
FLOAT, FLOAT16 = 1, 10  # onnx.TensorProto element types


class Fp16Error(RuntimeError):
    """The FP16 conversion failed or produced a graph that breaks the keep-io-types contract."""


@dataclass(frozen=True)
class Fp16Structure:
    input_types: dict[str, int]
    output_types: dict[str, int]
    initializer_types: dict[int, int]  # element type -> count
    cast_nodes: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def fp16_structure(model_or_path, fp32_model_or_path=None) -> Fp16Structure:
    """Check the keep-io-types contract: no float16 graph input or output, every float weight stored as float16."""
    g = as_model(model_or_path).graph
    inputs = {i.name: i.type.tensor_type.elem_type for i in g.input}
    outputs = {o.name: o.type.tensor_type.elem_type for o in g.output}
    inits = dict(Counter(t.data_type for t in g.initializer))
    problems = []
    for kind, items in (("input", inputs), ("output", outputs)):
        for name, t in items.items():
            if t == FLOAT16:
                problems.append(f"graph {kind} {name!r} is float16; keep_io_types=True should keep it float32")
    if fp32_model_or_path is not None:
        ref = as_model(fp32_model_or_path).graph
        for kind, want, got in (("input", {i.name: i.type.tensor_type.elem_type for i in ref.input}, inputs),
                                ("output", {o.name: o.type.tensor_type.elem_type for o in ref.output}, outputs)):
            for name, t in want.items():
                if got.get(name) != t:
                    problems.append(f"graph {kind} {name!r} has element type {got.get(name)}, the FP32 graph {t}")
    if not inits.get(FLOAT16):
        problems.append("no float16 initializers: the weights were not converted")
    if inits.get(FLOAT):
        problems.append(f"{inits[FLOAT]} float32 initializer(s) left (expected every float weight in float16)")
    casts = sum(1 for n in g.node if n.op_type == "Cast")
    return Fp16Structure(inputs, outputs, inits, casts, problems)


def convert_fp16(fused_path: str | os.PathLike, dst: str | os.PathLike, model_type: str = "bert",
                 num_heads: int = 0, hidden_size: int = 0, use_gpu: bool = True, *, fp32_model=None) -> Fp16Structure:
    """Write the FP16 variant of ``fused_path`` to ``dst`` and return its structure; ``use_gpu`` keeps CUDA fusions."""
    optimize_model, _ = transformers_optimizer(Fp16Error)
    try:
        model = optimize_model(str(fused_path), model_type=model_type, num_heads=num_heads, hidden_size=hidden_size,
                               opt_level=0, use_gpu=use_gpu)
        model.convert_float_to_float16(keep_io_types=True)
    except Exception as exc:
        raise Fp16Error(f"converting {fused_path} to float16 failed: {type(exc).__name__}: {exc}") from exc
    structure = fp16_structure(model.model, fp32_model if fp32_model is not None else fused_path)
    if not structure.ok:
        raise Fp16Error(f"the FP16 graph of {fused_path} breaks the keep-io-types contract: {'; '.join(structure.problems)}")
    with runs.atomic_path(Path(dst)) as tmp:
        model.save_model_to_file(str(tmp))
    return structure


def validate_fp16(fp16_logits, fp32_logits, tolerance: float = FP16_TOLERANCE, where: str = "cpu"):
    """The FP16 graph's logits against the FP32 fused graph's, with FP16's tolerance; ``where`` (the device) goes in the message."""
    what = f"the FP16 graph (run on {where}{'; float16 storage, float32 arithmetic per node' if where == 'cpu' else ''})"

    v = compare_logits(fp16_logits, fp32_logits, tolerance, FP16_MIN_LABEL_AGREEMENT, what=what)
    return dataclasses.replace(v, message=f"{what} vs the FP32 fused graph: {v.message}")
