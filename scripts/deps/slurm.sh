#!/usr/bin/env bash
# Slurm for tests/e2e/test_slurm.py: the packages of a single-host cluster (controller, two
# slurmd "nodes", munge). Installs only; scripts/slurm_local.sh writes the config and starts
# the daemons (no systemd needed). Idempotent and quiet; run as root by
# scripts/install_system_deps.sh.
set -euo pipefail
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
  && command -v sbatch >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing (a fresh container has none).
if ! apt-cache show slurmctld >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
fi
# A policy-rc.d that exits 101 keeps the packages' postinst from starting services (no init here).
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
if ! apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/tmp/slurm-apt.log 2>&1; then
  echo "slurm: apt-get install failed (see /tmp/slurm-apt.log)" >&2
  exit 1
fi
echo "slurm: $(dpkg-query -W -f '${Version}' slurmctld 2>/dev/null) installed"
