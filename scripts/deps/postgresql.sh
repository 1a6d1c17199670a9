#!/usr/bin/env bash
# PostgreSQL for tests/e2e/test_store_postgres.py (the results store a team shares): Debian's
# `postgresql` package, server binaries only. The tests start a throwaway cluster of their own
# (initdb, pg_ctl) as the `postgres` user the package creates; the package's own cluster is not
# started (no init here). Idempotent and quiet; run as root by scripts/install_system_deps.sh.
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && id postgres >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing (a fresh container has none).
if ! apt-cache show postgresql >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
fi
# A policy-rc.d that exits 101 keeps the package's postinst from starting its cluster (no init here).
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
if ! apt-get install -y -qq --no-install-recommends postgresql >/tmp/postgresql-apt.log 2>&1; then
  echo "postgresql: apt-get install failed (see /tmp/postgresql-apt.log)" >&2
  exit 1
fi
echo "postgresql: $(dpkg-query -W -f '${Version}' postgresql 2>/dev/null) installed"
