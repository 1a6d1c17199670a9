#!/usr/bin/env bash
# Install everything the tests need and run the whole suite (CPU, gloo, tiny flavors).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,ray
[ -x scripts/install_system_deps.sh ] && scripts/install_system_deps.sh || true
exec .venv/bin/python -m pytest -q "$@"
