#!/usr/bin/env bash
# Install fsdp-bench from this source tree into a Python environment that already has its torch (a
# CUDA base image's), never replacing that torch. The Dockerfile runs it; it works the same in any
# container or venv whose torch should stay.
#   - pip runs with a constraint pinning the torch it finds, so a dependency that wanted another
#     torch fails the install instead of pulling a different (multi-GB) build;
#   - afterwards torch must still be the same version at the same place, or the script fails.
# Environment: PYTHON (default: python), FSDP_BENCH_EXTRAS (e.g. "ray" or "ray,fp8"),
# FSDP_BENCH_EXTRA_PACKAGES (more requirements, space-separated, e.g. "s3fs" for launcher.results_url).
# Arguments are passed to pip (the tests add --no-index --no-build-isolation to stay offline).
# Usage: scripts/install_into_image.sh [PIP OPTIONS...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}

# torch's distribution version and where it is imported from (found, not imported: no CUDA start-up).
torch_identity() {
  "$PY" -c 'import importlib.metadata as m, importlib.util as u; print(m.version("torch"), u.find_spec("torch").origin)'
}

if ! before=$(torch_identity 2>/dev/null); then
  echo "error: $PY finds no torch with package metadata; this script installs into an environment that already has torch (the base image's)" >&2
  exit 2
fi
keep_torch=$(mktemp)
trap 'rm -f "$keep_torch"' EXIT
echo "torch==${before%% *}" >"$keep_torch"

target="."
if [ -n "${FSDP_BENCH_EXTRAS:-}" ]; then
  target=".[${FSDP_BENCH_EXTRAS}]"
fi
read -r -a extra_packages <<<"${FSDP_BENCH_EXTRA_PACKAGES:-}"
"$PY" -m pip install --no-cache-dir --constraint "$keep_torch" "$@" "$target" "${extra_packages[@]}"

after=$(torch_identity)
if [ "$after" != "$before" ]; then
  echo "error: the install changed torch: before '$before', after '$after'" >&2
  exit 1
fi
echo "fsdp-bench installed; torch kept: ${before%% *} (${before#* })"
