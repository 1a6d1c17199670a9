#!/usr/bin/env bash
# Make .venv ready to run fsdp-bench: idempotent, fast when nothing changed.
# torch: a torch already importable by $PYTHON (a GPU cluster's container) is used as it is
# (the venv sees system site-packages); otherwise `torch==2.13.0` is installed, which on these
# CPU machines resolves to the CPU wheel on local disk, never a multi-GB CUDA build.
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh dev,ray
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${1:-}
if [ ! -x .venv/bin/python ]; then
  if "$PY" -c "import torch" >/dev/null 2>&1; then
    "$PY" -m venv --system-site-packages .venv
  else
    "$PY" -m venv .venv
  fi
fi
pip_install() {
  # The machine's pip config lists local indexes that may be absent: drop pip's "is ignored" noise.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  return "${PIPESTATUS[0]}"
}
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  # 1) a torch wheel pip's find-links already holds (these CI/dev machines keep the CPU wheel on
  #    disk): install it alone, then its dependencies from the index;
  # 2) on a machine without an NVIDIA GPU, PyTorch's CPU index beside PyPI (its "+cpu" build sorts
  #    first), never the multi-GB CUDA build;
  # 3) with a GPU, PyPI's default (CUDA) build.
  if pip_install --no-index --no-deps "torch==2.13.0" 2>/dev/null; then
    pip_install "torch==2.13.0"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    pip_install "torch==2.13.0"
  else
    pip_install --extra-index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
  fi
fi
stamp=.venv/.fsdp-bench-installed-$(cat pyproject.toml | sha1sum | cut -c1-12)-${EXTRAS//,/_}
if [ ! -f "$stamp" ]; then
  target="."
  [ -n "$EXTRAS" ] && target=".[$EXTRAS]"
  pip_install -e "$target"
  rm -f .venv/.fsdp-bench-installed-*
  touch "$stamp"
fi
