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
"$(dirname "$0")/../apt_install.sh" slurm slurmctld slurmd slurm-client munge
echo "slurm: $(dpkg-query -W -f '${Version}' slurmctld 2>/dev/null) installed"
