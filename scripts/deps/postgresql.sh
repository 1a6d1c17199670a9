#!/usr/bin/env bash
# PostgreSQL for tests/e2e/test_store_postgres.py (the results store a team shares): Debian's
# `postgresql` package, for its server binaries and the `postgres` user. The tests start a throwaway
# cluster of their own (initdb, pg_ctl) as that user; the package's own cluster is not started (no
# init here). Idempotent and quiet; run as root by scripts/install_system_deps.sh.
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && id postgres >/dev/null 2>&1; then
  exit 0
fi
"$(dirname "$0")/../apt_install.sh" postgresql postgresql
echo "postgresql: $(dpkg-query -W -f '${Version}' postgresql 2>/dev/null) installed"
