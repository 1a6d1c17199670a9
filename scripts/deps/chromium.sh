#!/usr/bin/env bash
# Headless Chromium for tests/e2e/test_report_chromium.py (opens the HTML report, checks that
# every image loads and the console stays clean). Idempotent and quiet; run as root by
# scripts/install_system_deps.sh. Debian names the packages `chromium` and `chromium-driver`.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing (a fresh container has none).
if ! apt-cache show chromium >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
fi
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "chromium: $(chromium --version 2>/dev/null || echo 'installed')"
