#!/usr/bin/env bash
# A separate environment for the embedding benchmark's OpenVINO rows: sentence-transformers' backend="openvino"
# and export_static_quantized_openvino_model, which need optimum-intel (transformers 5) and OpenVINO; the training
# stack's transformers is 4.57, so they cannot share the workbench's environment. benchmarks/bench_embed.py runs
# benchmarks/openvino_embed.py with this environment's Python as a worker process. Pinned by
# requirements/constraints-openvino.txt (from requirements/openvino.in); the workbench is not installed here.
# Idempotent: a second run with unchanged pins installs nothing and says so.
#
#   bash scripts/setup_openvino_env.sh        creates ./.venv-openvino (or $VENV; PYTHON=python3.X picks the Python)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || { echo "setup_openvino_env.sh: takes no arguments (set VENV=DIR for another folder, PYTHON=python3.X)" >&2; exit 2; }
LOCK=requirements/constraints-openvino.txt
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,13) else 1)' || {
  echo "setup-openvino: Python 3.10-3.13 is needed (the lock is resolved for 3.11), got $("$PY" -V 2>&1); use PYTHON=python3.11" >&2; exit 1; }
VENV=${VENV:-.venv-openvino}
[ -x "$VENV/bin/python" ] || { echo "setup-openvino: creating $VENV with $("$PY" -V)"; "$PY" -m venv "$VENV"; }
VPY="$VENV/bin/python"
STAMP="$VENV/.setup-stamp-openvino"
HASH=$(cat "$LOCK" scripts/setup_openvino_env.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
  echo "setup-openvino: packages up to date, nothing installed ($STAMP matches $LOCK)"
else
  LOG="$VENV/pip-install.log"
  : > "$LOG"
  echo "setup-openvino: installing $LOCK into $VENV (several GB with torch; pip's output: $LOG)"
  "$VPY" -m pip install -q -r "$LOCK" >> "$LOG" 2>&1 || {
    echo "setup-openvino: pip failed; the end of $LOG:" >&2; tail -30 "$LOG" >&2; exit 1; }
  # Exactly the lock: what an earlier lock brought and this one does not name is removed
  EXTRA=$("$VPY" - "$LOCK" <<'PYEOF'
import importlib.metadata as md, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
keep = {norm(l.split("==")[0]) for l in open(sys.argv[1]) if "==" in l and not l.startswith("#")}
keep |= {"pip", "setuptools", "wheel"}
print(" ".join(sorted({norm(d.metadata["Name"]) for d in md.distributions()} - keep)))
PYEOF
)
  if [ -n "$EXTRA" ]; then
    echo "setup-openvino: removing what the lock does not name: $EXTRA"
    "$VPY" -m pip uninstall -y -q $EXTRA >> "$LOG" 2>&1
  fi
  echo "$HASH" > "$STAMP"
fi
"$VPY" - <<'PYEOF'
import importlib.metadata as md
for p in ("sentence-transformers", "optimum-intel", "optimum", "openvino", "nncf", "transformers", "torch"):
    print(f"  {p} {md.version(p)}")
from sentence_transformers import export_static_quantized_openvino_model  # noqa: F401  (what the benchmark calls)
from optimum.intel import OVQuantizationConfig  # noqa: F401
PYEOF
echo "setup-openvino: done ($VENV)"
