#!/usr/bin/env bash
# Install everything the tests need and run the whole suite (CPU, gloo, tiny flavors).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,ray
[ -x scripts/install_system_deps.sh ] && scripts/install_system_deps.sh || true
# Two workers (pytest-xdist), each test file on one of them: most tests wait on the processes they
# start (ranks, torchrun agents, services), so two run side by side on two cores. Three gave no
# clear gain (whole-suite runs on the idle VM: 769 s with two; 701 s and 844 s with three, and a
# timing assertion failed under the extra load; docs/results/test-suite.md).
# FSDP_BENCH_TEST_WORKERS=N sets another number; 0 runs everything in this process.
# Bytecode cached (some images set PYTHONDONTWRITEBYTECODE=1): otherwise every process the suite
# starts, each xdist worker and each inner pytest, rewrites and compiles every test module's asserts
# again (collecting the suite: 15.4 s of CPU without the cache, 10.5 s with it).
unset PYTHONDONTWRITEBYTECODE
workers=${FSDP_BENCH_TEST_WORKERS:-2}
if [ "$workers" = "0" ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile "$@"
