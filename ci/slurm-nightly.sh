#!/usr/bin/env bash
# fsdp-bench nightly on a Slurm cluster without a CI runner: a batch script that scrontab runs every
# night (ci/scrontab: Slurm 20.11 or later) or that cron submits (`sbatch ci/slurm-nightly.sh`). Its
# outputs go to a dated folder of the shared filesystem; the store lives there too. docs/ci.md.
#SBATCH --job-name=fsdp-bench-nightly
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=fsdp-bench-nightly-%j.log
set -euo pipefail

# The checkout to run from: FSDP_BENCH_CHECKOUT, else the folder sbatch was called in (sbatch runs a
# copy of this script from its spool folder, so the script's own path does not say).
checkout=${FSDP_BENCH_CHECKOUT:-${SLURM_SUBMIT_DIR:-$PWD}}
cd "$checkout"
export PATH="$checkout/.venv/bin:$PATH"
# Each night's outputs in a folder of their own under FSDP_BENCH_SHARED (the store's folder unless set).
shared=${FSDP_BENCH_SHARED:-$(dirname -- "${FSDP_BENCH_STORE:-.}")}
FSDP_BENCH_OUT="$shared/nightly/$(date -u +%F)"
export FSDP_BENCH_OUT
exec ci/nightly.sh
