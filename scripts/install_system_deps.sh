#!/usr/bin/env bash
# Install and start the system services some tests use (local Slurm, headless Chromium, PostgreSQL), where
# this machine allows it (root and apt). Each part is best-effort: a test whose service is
# missing skips with the reason. Parts live in scripts/deps/*.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install_system_deps: not root or no apt-get; tests that need Slurm/Chromium/PostgreSQL will skip"
  exit 0
fi
for part in scripts/deps/*.sh; do
  [ -f "$part" ] || continue
  echo "install_system_deps: $part"
  bash "$part" || echo "install_system_deps: $part failed (its tests will skip)"
done
exit 0
