#!/usr/bin/env bash
# A separate environment for the embedding benchmark's anchor: sentence-transformers' own ONNX path
# (export_dynamic_quantized_onnx_model), which needs optimum-onnx and the plain onnxruntime wheel. That
# wheel and onnxruntime-training both install the `onnxruntime` module, so they cannot share the
# workbench's environment. benchmarks/bench_embed.py runs benchmarks/anchor_embed.py with this
# environment's Python (in a subprocess) to export the anchor's INT8 graph.
#
#   bash scripts/setup_anchor_env.sh          creates ./.venv-anchor (or $VENV)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || { echo "setup_anchor_env.sh: takes no arguments (set VENV=DIR for another folder)" >&2; exit 2; }
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3.12 python3.10 python3; do command -v "$cand" >/dev/null && { PY=$cand; break; }; done
fi
VENV=${VENV:-.venv-anchor}
[ -x "$VENV/bin/python" ] || { echo "setup-anchor: creating $VENV with $("$PY" -V)"; "$PY" -m venv "$VENV"; }
VPY="$VENV/bin/python"
echo "setup-anchor: installing sentence-transformers with its ONNX extra (optimum-onnx, onnxruntime) and a CPU torch"
# transformers 4.57 / sentence-transformers 5.x: optimum-onnx caps transformers below 4.58
"$VPY" -m pip install -q "sentence-transformers[onnx]>=5.1,<6" "transformers>=4.51,<4.58" "huggingface-hub<1" torch onnxruntime pandas
"$VPY" - <<'PY'
import importlib.metadata as md
for p in ("sentence-transformers", "optimum-onnx", "optimum", "onnxruntime", "torch", "transformers"):
    try:
        print(f"  {p} {md.version(p)}")
    except md.PackageNotFoundError:
        print(f"  {p} not installed")
from sentence_transformers import export_dynamic_quantized_onnx_model  # noqa: F401  (the anchor's entry point)
PY
echo "setup-anchor: done ($VENV)"
