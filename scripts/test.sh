#!/usr/bin/env bash
# Install everything the tests need and run the whole suite (CPU, gloo, tiny flavors).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,ray
[ -x scripts/install_system_deps.sh ] && scripts/install_system_deps.sh || true
# Three workers (pytest-xdist), each test file on one of them: most tests wait on the processes
# they start (ranks, torchrun agents, services, timeouts), so with two the cores sat idle much of
# the time (the whole-suite runs: docs/results/test-suite.md).
# FSDP_BENCH_TEST_WORKERS=N sets another number; 0 runs everything in this process.
# Bytecode cached (some images set PYTHONDONTWRITEBYTECODE=1): otherwise every process the suite
# starts, each xdist worker and each inner pytest, rewrites and compiles every test module's asserts
# again.
unset PYTHONDONTWRITEBYTECODE
workers=${FSDP_BENCH_TEST_WORKERS:-3}
if [ "$workers" = "0" ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
# --no-loadscope-reorder: xdist (3.x) otherwise re-sorts the files by how many tests each has,
# which undoes the conftest's order by measured cost and left the long one-test files (a grouped
# compile, a hanging point) to start last, with the other workers idle at the end.
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
