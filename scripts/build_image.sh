#!/usr/bin/env bash
# Build the cluster image (Dockerfile) with the first container engine that answers: docker, then
# podman (CONTAINER_ENGINE=podman picks one). An installed CLI whose daemon or service does not
# answer does not count; with none, say so and exit 1 without building anything.
# Environment: IMAGE (tag, default fsdp-bench:latest), BASE_IMAGE, FSDP_BENCH_EXTRAS,
# FSDP_BENCH_EXTRA_PACKAGES (passed as build arguments when set). Arguments go to `<engine> build`.
# Usage: scripts/build_image.sh [BUILD OPTIONS...]      (make image)
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-fsdp-bench:latest}

engine=""
tried=()
for candidate in ${CONTAINER_ENGINE:-docker podman}; do
  if ! command -v "$candidate" >/dev/null 2>&1; then
    tried+=("$candidate: not installed")
  elif ! timeout 30 "$candidate" info >/dev/null 2>&1; then
    tried+=("$candidate: installed, but \`$candidate info\` gets no answer from its engine")
  else
    engine=$candidate
    break
  fi
done
if [ -z "$engine" ]; then
  echo "make image: no container engine answers on this machine, nothing built" >&2
  printf '  %s\n' "${tried[@]}" >&2
  echo "Install and start Docker or Podman, or build on a machine that has one (docs/containers.md)." >&2
  exit 1
fi

args=(build -f Dockerfile -t "$IMAGE")
for name in BASE_IMAGE FSDP_BENCH_EXTRAS FSDP_BENCH_EXTRA_PACKAGES; do
  if [ -n "${!name:-}" ]; then
    args+=(--build-arg "$name=${!name}")
  fi
done
if sha=$(git rev-parse HEAD 2>/dev/null); then
  args+=(--build-arg "GIT_SHA=$sha")
fi
echo "$engine ${args[*]} $* ."
exec "$engine" "${args[@]}" "$@" .
