#!/usr/bin/env bash
# A single-host Slurm cluster with two slurmd "nodes", for tests/e2e/test_slurm.py and for
# trying launcher=slurm on a laptop:
#
#   scripts/slurm_local.sh start    # munged + slurmctld + two slurmd; prints SLURM_CONF=...
#   export SLURM_CONF=/tmp/fsdp-bench-slurm/slurm.conf
#   fsdp-bench run model=debug nodes=2 launcher=slurm launcher.ranks_per_host=2
#   scripts/slurm_local.sh status   # exit 0 when both nodes are up
#   scripts/slurm_local.sh stop
#
# Needs root (the daemons run as root) and the packages of scripts/deps/slurm.sh. Everything
# lives in $FSDP_BENCH_SLURM_DIR (default /tmp/fsdp-bench-slurm): config, munge key and socket,
# state, logs and pid files, so nothing of a system-wide Slurm or munge is touched. No
# systemd and no cgroups: the daemons are started directly, processes tracked through /proc.
set -euo pipefail

DIR=${FSDP_BENCH_SLURM_DIR:-/tmp/fsdp-bench-slurm}
CONF=$DIR/slurm.conf
NODES=(fsdp-slurm1 fsdp-slurm2)
# Ports well away from Slurm's defaults (6817/6818), so a real installation can coexist.
CTLD_PORT=${FSDP_BENCH_SLURM_PORT:-16817}
NODE_PORTS=($((CTLD_PORT + 1)) $((CTLD_PORT + 2)))
CPUS=$(nproc)

die() { echo "slurm_local: $*" >&2; exit 1; }

write_conf() {
  cat >"$CONF" <<EOF
# Written by scripts/slurm_local.sh: a one-host cluster, two slurmd "nodes" on 127.0.0.1.
ClusterName=fsdpbench
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.%n.log
# No cgroups in this container: track processes through /proc, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Both "nodes" share this host: take CPUs from the NodeName lines, not from the hardware.
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName=${NODES[0]} NodeAddr=127.0.0.1 Port=${NODE_PORTS[0]} CPUs=$CPUS State=UNKNOWN
NodeName=${NODES[1]} NodeAddr=127.0.0.1 Port=${NODE_PORTS[1]} CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=${NODES[0]},${NODES[1]} Default=YES MaxTime=INFINITE State=UP
EOF
}

add_hosts() {
  # Node names must resolve (slurmd looks itself up); both point at loopback.
  for node in "${NODES[@]}"; do
    grep -qE "^127\.0\.0\.1[[:space:]].*\b$node\b" /etc/hosts || echo "127.0.0.1 $node" >>/etc/hosts
  done
}

start_munge() {
  mkdir -p "$DIR/munge"
  chmod 700 "$DIR/munge"
  [ -f "$DIR/munge/munge.key" ] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 400 "$DIR/munge/munge.key"
  alive "$DIR/munge/munged.pid" && return 0
  # --force: munged refuses to run as root otherwise; every path is private to $DIR.
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  [ "$(id -u)" = 0 ] || die "needs root (the daemons run as root)"
  for cmd in munged slurmctld slurmd sbatch; do
    command -v "$cmd" >/dev/null || die "$cmd not found: install with scripts/deps/slurm.sh"
  done
  mkdir -p "$DIR/state" "$DIR/spool/${NODES[0]}" "$DIR/spool/${NODES[1]}"
  chmod 755 "$DIR"
  write_conf
  add_hosts
  start_munge
  alive "$DIR/slurmctld.pid" || slurmctld -c -f "$CONF"
  for node in "${NODES[@]}"; do
    alive "$DIR/slurmd.$node.pid" || slurmd -f "$CONF" -N "$node"
  done
  wait_idle 30 || { tail -n 5 "$DIR"/*.log >&2; die "nodes did not come up within 30 s (logs in $DIR)"; }
  echo "SLURM_CONF=$CONF"
}

wait_idle() {
  local deadline=$((SECONDS + $1))
  while [ $SECONDS -lt $deadline ]; do
    status >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

status() {
  [ -f "$CONF" ] || { echo "slurm_local: not configured ($CONF missing)"; return 1; }
  local states
  states=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %t' 2>/dev/null) || { echo "slurm_local: controller down"; return 1; }
  echo "$states"
  echo "SLURM_CONF=$CONF"
  # Both nodes usable: idle, mixed or allocated (not down, drained or unknown).
  [ "$(echo "$states" | grep -cE ' (idle|mix|alloc)$')" = "${#NODES[@]}" ]
}

stop() {
  [ -f "$CONF" ] && SLURM_CONF=$CONF scancel --quiet --user=root 2>/dev/null || true
  for pidfile in "$DIR"/slurmd.*.pid "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
    alive "$pidfile" || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  echo "slurm_local: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
