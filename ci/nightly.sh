#!/usr/bin/env bash
# The nightly benchmark that every pipeline in ci/ calls (GitHub Actions, GitLab CI, Slurm), so the
# three never drift: sweep into a dated results folder, add it to the store, follow every series
# (history), compare with the baseline (check), render the report. docs/ci.md walks through it.
#
# Inputs (environment variables), every one checked before anything runs (exit 2, one line):
#   FSDP_BENCH_STORE      required: the results store that outlives the night (an absolute path on
#                         this machine's disk or the cluster's shared filesystem, outside the checkout)
#   FSDP_BENCH_BASELINE   required: a baseline file (`fsdp-bench baseline save`) or results folder
#   FSDP_BENCH_OVERRIDES  required: what to sweep, e.g. `experiment=nightly` (space-separated overrides)
#   FSDP_BENCH_REPEATS    runs of each point per night, sweep.repeats (default 3)
#   FSDP_BENCH_OUT        output folder: results/, history/, check/, report/, logs/ (default nightly)
#   FSDP_BENCH_NEW_RUNS   history's gate: a regression among the last N runs fails (default 3)
#   FSDP_BENCH_HISTORY_ARGS, FSDP_BENCH_CHECK_ARGS   more flags for history and check (default none)
#
# Exit 0 when every step passed, 2 on bad input (before anything ran) or a sweep that refused its
# overrides, else the largest exit code of the steps (1: a point failed, a gate failed; 2: a step
# refused its input, e.g. check with nothing to compare).
set -uo pipefail

fail_input() {
  echo "error: $1" >&2
  exit 2
}

required() {
  # ${VAR:?} would exit 127 under `bash -c` and 2 under dash: the variable's name and exit 2 here.
  [ -n "${!1:-}" ] || fail_input "$1: not set; $2 (docs/ci.md)"
}

integer_at_least() {
  [[ "${!1}" =~ ^[0-9]+$ ]] && [ "${!1}" -ge "$2" ] || fail_input "$1: must be an integer >= $2, got '${!1}'"
}

required FSDP_BENCH_STORE "the results store kept between nights, e.g. /data/fsdp-bench.sqlite"
required FSDP_BENCH_BASELINE "a baseline file (fsdp-bench baseline save) or a results folder"
required FSDP_BENCH_OVERRIDES "what to sweep, e.g. experiment=nightly"
FSDP_BENCH_REPEATS=${FSDP_BENCH_REPEATS:-3}
FSDP_BENCH_NEW_RUNS=${FSDP_BENCH_NEW_RUNS:-3}
FSDP_BENCH_OUT=${FSDP_BENCH_OUT:-nightly}
integer_at_least FSDP_BENCH_REPEATS 1
integer_at_least FSDP_BENCH_NEW_RUNS 2
[ -e "$FSDP_BENCH_BASELINE" ] || fail_input "FSDP_BENCH_BASELINE: $FSDP_BENCH_BASELINE does not exist"
case "$FSDP_BENCH_STORE" in
  *://*) ;;  # a database URL: the store command checks it
  /*)
    store_dir=$(dirname -- "$FSDP_BENCH_STORE")
    [ -d "$store_dir" ] || fail_input "FSDP_BENCH_STORE: its folder $store_dir does not exist"
    ;;
  # A checkout is cleaned between runs (actions/checkout, GitLab's clone): a store inside it would
  # start every series over each night, silently.
  *) fail_input "FSDP_BENCH_STORE: must be an absolute path (outside the checkout, which CI cleans) or a database URL, got '$FSDP_BENCH_STORE'" ;;
esac
command -v fsdp-bench >/dev/null || fail_input "fsdp-bench: not on PATH; install it (scripts/setup.sh) or put its venv's bin first"

read -r -a overrides <<<"$FSDP_BENCH_OVERRIDES"
read -r -a history_args <<<"${FSDP_BENCH_HISTORY_ARGS:-}"
read -r -a check_args <<<"${FSDP_BENCH_CHECK_ARGS:-}"
# ${a[@]+"${a[@]}"} below: an empty array is "unbound" under set -u before bash 4.4 (RHEL 7's 4.2).

results="$FSDP_BENCH_OUT/results/$(date -u +%Y-%m-%dT%H%M%SZ)"
logs="$FSDP_BENCH_OUT/logs"
mkdir -p "$results" "$logs" "$FSDP_BENCH_OUT/check" || fail_input "FSDP_BENCH_OUT: cannot create $FSDP_BENCH_OUT"

worst=0
step() {
  # Run one step, its output both on the console and in logs/NAME.log; keep the largest exit code.
  local name=$1
  shift
  echo "== $name: $*"
  "$@" 2>&1 | tee "$logs/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc"
  [ "$rc" -gt "$worst" ] && worst=$rc
  return 0
}

step sweep fsdp-bench sweep "${overrides[@]}" "sweep.repeats=$FSDP_BENCH_REPEATS" "results_dir=$results" report=false
# 2: the overrides were refused and nothing ran; 1 (some points failed) goes on, the others are stored.
[ "$worst" -eq 2 ] && exit 2
step store fsdp-bench store add "$results" --store "$FSDP_BENCH_STORE"
step history fsdp-bench history --store "$FSDP_BENCH_STORE" --fail-on-new-regression "$FSDP_BENCH_NEW_RUNS" \
  -o "$FSDP_BENCH_OUT/history" ${history_args[@]+"${history_args[@]}"}
step check fsdp-bench check "$results" --baseline "$FSDP_BENCH_BASELINE" --junit "$FSDP_BENCH_OUT/check/check.xml" \
  --summary "$FSDP_BENCH_OUT/check/summary.md" ${check_args[@]+"${check_args[@]}"}
step report fsdp-bench report "$results" -o "$FSDP_BENCH_OUT/report"
echo "nightly: exit $worst (results $results, outputs in $FSDP_BENCH_OUT)"
exit "$worst"
