#!/usr/bin/env bash
# GPU check of the engine on a machine with one CUDA GPU, in under 8 minutes: seven single-GPU points
# through `python3 -m bench run` (NCCL, CUDA events, allocator statistics, async checkpoints into
# pinned memory, compile, fp8, fp16, CPU offload), then a table of tokens/s, MFU, HFU and peak
# memory read from their records.
#   a. debug           bf16, 2 async checkpoints             (the path works at all: first, cheapest)
#   b. tinyllama-1.1b  bf16, torch.compile, seq 2048 x 2     (inductor on a ~1B model), 42 timed steps
#   c. llama2-7b       bf16, full AC, seq 4096 x 1, 7 steps  (~106 GiB: fits a 141 GB H200, not an
#                                                            80 GB H100, where it ends as `oom`: a result)
#   d. tinyllama-1.1b  fp8 (torchao), torch.compile, as b    (b vs d: bf16 against fp8, both compiled;
#                                                            torchao's float8 is slow without compile)
#   e. tinyllama-1.1b  fp16 (GradScaler), seq 2048 x 2, 22 timed steps
#   f. tinyllama-1.1b  bf16, micro-batch 1024 at seq 2048: forced out of memory on any GPU, with the
#                      allocator's history on (profile.memory_history): its `oom` is the expected result,
#                      and its record must name the phase and the largest live allocations by category
#                      and leave memory_snapshot_rank0.pickle. c records the history too (through its
#                      warm-up: on an 80 GB H100, where c runs out of memory, c leaves a snapshot as well;
#                      on an H200 its step_startup_s bounds the history's cost); a runs one more step
#                      under FSDP2's memory tracker (profile.memory_categories).
#   g. debug           bf16, train.cpu_offload=true
# Timed windows: NVML's energy counter updates every ~100 ms or slower, so b-e time about 2 s or
# more (energy per token within a few %); a and g (debug: launch-bound steps of a few ms) stay short
# and their records say the counter did not advance, instead of 0 W.
#
# Made for the GPU test machine: no network, and a python3 (3.12) that already has CUDA torch but
# not hydra-core, omegaconf, pydantic or torchao. A venv made from it would not see its torch, so
# nothing is set up in a venv: the missing packages come as wheels from .whl/ (made beforehand by
# scripts/gpu_wheels.sh on a machine with network; .whl/ is git-ignored, so it has to be sent
# along with the working tree) and go, with this project, into a --target folder on PYTHONPATH.
#
# Usage: scripts/gpu_check.sh [RESULTS_DIR]   (default: $OUT/gpu_check if $OUT is set, else results/gpu_check)
#   RESULTS_DIR/gpu_check/<point_id>/result.json  the records;  RESULTS_DIR/table.md  the table;
#   RESULTS_DIR/logs/<point>.log  each run's output.
# Environment: PYTHON (default python3) the interpreter with CUDA torch; FSDP_BENCH_GPU_CLUSTER a
#   cluster preset instead of the one chosen from the GPU's name; FSDP_BENCH_GPU_CHECK_POINTS the
#   points to run, by letter or label (e.g. "b d": a rerun of the compiled points when device time is short);
#   FSDP_BENCH_GPU_CHECK_DEADLINE_S the global deadline (default 480).
# Dry run, for a CPU machine (touches no GPU, runs no point):
#   FSDP_BENCH_GPU_CHECK_DRY=1       scripts/gpu_check.sh RESULTS   wheels + project install + imports + configs
#   FSDP_BENCH_GPU_CHECK_DRY=config  scripts/gpu_check.sh RESULTS   configs only (needs no .whl/)
#   It installs .whl/ into a temporary --target for CPython 3.12 with this machine's pip, builds the
#   project, imports every module a point loads with .venv's python and the wheels it can load
#   (torchao, nvidia-ml-py), validates every point's config with it (FSDP_BENCH_GPU_CHECK_DRY_PYTHON
#   to use another interpreter that has the project's dependencies), and prints the command lines
#   and the time budget. Exit 0 when all is well, 2 otherwise.
# Exit code: 0 when every point is ok; 1 when a point failed, timed out, was skipped or is invalid;
#   2 when the machine is not set up to run it (no .whl/, a package missing).
set -euo pipefail

START=$SECONDS
DEADLINE_S=${FSDP_BENCH_GPU_CHECK_DEADLINE_S:-480}  # the whole script, setup and table included: 8 minutes
TABLE_RESERVE_S=15   # kept back at the end for the table
# Outer `timeout` on each run minus this = the point's own sweep.point_timeout_s: the harness's
# timeout (counted from the rank's start, after interpreter, torch import and NCCL set-up) should
# fire first, so a slow point ends as a `timeout` record with its reason, not as `interrupted`.
STARTUP_S=25
KILL_AFTER_S=30      # SIGKILL this long after the outer SIGTERM (the CLI stops its ranks on SIGTERM)

RESULTS=${1:-${OUT:+$OUT/gpu_check}}
[[ -n $RESULTS ]] && RESULTS=$(realpath -m -- "$RESULTS")  # relative to the caller's directory
cd "$(dirname "$0")/.."
RESULTS=${RESULTS:-$PWD/results/gpu_check}
DRY=${FSDP_BENCH_GPU_CHECK_DRY:-}
PYTHON=${PYTHON:-python3}
WHEELS=.whl
SITE=/tmp/fsdp-bench-site

# label | outer timeout s | overrides (point values win over COMMON's). The timeouts add up to 480 s.
# Setup (pip installs, the import check) and the table bring the worst case above the 480 s
# deadline: the last point (g, the oldest check) is then skipped and shown as skipped; typical runs take a fraction of
# their timeouts. d runs compiled, so it gets b's time (its own compilation); the others are cut to
# pay for it. a stays the first, cheapest point (a broken machine fails it within seconds), but its
# clock (the outer timeout less STARTUP_S) must hold a cold start's first dynamo import, cuBLAS/NCCL
# set-up and two async saves into freshly pinned memory: 30 s of point timeout, not less. Points b and d have 3 warm-up steps
# so that compilation stays out of the timed steps, and 42 timed steps, so that the faster fp8 one
# still times about 2 s. a also profiles 3 steps after its timed ones (profile.enabled: a real CUDA trace
# split, checked by gpu_check_table.py's breakdown_lines). After a real run, set these from the logs'
# "exit N after S s" lines.
POINTS=(
  "a-debug-bf16|55|model=debug precision=bf16 train.checkpoint=async train.checkpoint_every=3 profile.enabled=true profile.memory_categories=true"
  "b-tinyllama-bf16-compile|110|model=tinyllama-1.1b precision=bf16 train.compile=true train.seq_len=2048 train.micro_batch=2 train.warmup_steps=3 train.steps=45"
  "c-llama2-7b-bf16-ac|80|model=llama2-7b precision=bf16 train.activation_checkpointing=full train.seq_len=4096 train.micro_batch=1 train.steps=7 profile.memory_history=true"
  "d-tinyllama-fp8-compile|110|model=tinyllama-1.1b precision=fp8 train.compile=true train.seq_len=2048 train.micro_batch=2 train.warmup_steps=3 train.steps=45"
  "e-tinyllama-fp16|40|model=tinyllama-1.1b precision=fp16 train.seq_len=2048 train.micro_batch=2 train.steps=24"
  "f-tinyllama-oom|45|model=tinyllama-1.1b precision=bf16 train.seq_len=2048 train.micro_batch=1024 train.steps=3 train.warmup_steps=1 profile.memory_history=true"
  "g-debug-bf16-offload|40|model=debug precision=bf16 train.cpu_offload=true"
)

fail() { echo "error: $*" >&2; exit 2; }

# The cluster preset supplies the defaults of a CUDA point (device type, memory); MFU divides by the
# peak of the device torch reports, whatever the preset.
if [[ -n ${FSDP_BENCH_GPU_CLUSTER:-} ]]; then
  CLUSTER=$FSDP_BENCH_GPU_CLUSTER gpu="(preset given)"
elif [[ -n $DRY ]]; then
  CLUSTER=h200-8x gpu="none (dry run: planned for the H200 test machine)"
else
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || true)
  case "$gpu" in
    *H200*) CLUSTER=h200-8x ;;
    *A100*) CLUSTER=a100-8x ;;
    *) CLUSTER=h100-8x ;;
  esac
fi
COMMON=(nodes=1 gpus_per_node=1 "cluster=$CLUSTER" launcher=local "results_dir=$RESULTS"
        sweep.name=gpu_check train.steps=8 train.warmup_steps=2)

# One point's full override list: COMMON minus the keys the point sets, the point's own, and the
# point timeout (Hydra is not asked to resolve a key given twice).
overrides_of() {  # TIMEOUT_S OVERRIDES...
  local timeout=$1 item own mine; shift
  for item in "${COMMON[@]}"; do
    mine=""
    for own in "$@"; do [[ ${own%%=*} == "${item%%=*}" ]] && mine=1; done
    [[ -n $mine ]] || printf '%s\n' "$item"
  done
  printf '%s\n' "$@" "sweep.point_timeout_s=$((timeout - STARTUP_S))"
}

# The points FSDP_BENCH_GPU_CHECK_POINTS selects (all when unset): "c" selects c-llama2-7b-bf16-ac.
selected() {
  local s
  [[ -z ${FSDP_BENCH_GPU_CHECK_POINTS:-} ]] && return 0
  for s in $FSDP_BENCH_GPU_CHECK_POINTS; do [[ $1 == "$s" || $1 == "$s"-* ]] && return 0; done
  return 1
}

# Parse POINTS into arrays: LABELS, TIMEOUTS, ARGS (one space-joined override list each).
LABELS=() TIMEOUTS=() ARGS=()
for p in "${POINTS[@]}"; do
  IFS='|' read -r label timeout overrides <<<"$p"
  selected "$label" || continue
  read -ra own <<<"$overrides"
  LABELS+=("$label") TIMEOUTS+=("$timeout")
  ARGS+=("$(overrides_of "$timeout" "${own[@]}" | paste -sd' ')")
done
[[ ${#LABELS[@]} -gt 0 ]] || fail "FSDP_BENCH_GPU_CHECK_POINTS='${FSDP_BENCH_GPU_CHECK_POINTS:-}' selects no point"
points_tsv() { for i in "${!LABELS[@]}"; do printf '%s\t%s\n' "${LABELS[$i]}" "${ARGS[$i]}"; done; }
command_of() {  # I: the exact command line of point I
  local -a words
  read -ra words <<<"${ARGS[$1]}"
  printf '%q ' timeout -k "$KILL_AFTER_S" "${TIMEOUTS[$1]}" "$PYTHON" -m bench run "${words[@]}"
  printf '2>&1 | tee %q\n' "$RESULTS/logs/${LABELS[$1]}.log"
}
print_plan() {
  local total=0 i
  echo "plan (cluster preset $CLUSTER, global deadline ${DEADLINE_S} s, ${TABLE_RESERVE_S} s kept for the table):"
  for i in "${!LABELS[@]}"; do
    total=$((total + TIMEOUTS[i]))
    echo "  [${LABELS[$i]}] timeout ${TIMEOUTS[$i]} s (sweep.point_timeout_s $((TIMEOUTS[i] - STARTUP_S)))"
    echo "    $(command_of "$i")"
  done
  echo "  worst case: ${total} s of points + setup (pip installs, imports: ~20-40 s) + table;"
  echo "  a point whose timeout no longer fits before the deadline is skipped and shown as skipped."
}

# The GPU machine's setup, as an argument list: the dry run prints exactly what the real run runs.
# No venv: one made from that python3 would not see its torch. The wheels and the project go in
# with one pip call: a second `pip install --target` into the same folder would not merge its
# bin/ with the first's (a warning, and a missing script). --no-build-isolation: the project is
# built by the machine's own setuptools, as an isolated build would need network. --no-compile:
# the first import writes the .pyc files anyway; compiling all of torchao up front costs seconds.
INSTALL=("$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$SITE")
export PIP_ROOT_USER_ACTION=ignore  # the test machine runs as root; pip's warning about it is noise

# .whl/ must hold exactly the pins of scripts/gpu_wheels.sh, one version each.
norm() { tr '[:upper:]' '[:lower:]' <<<"$1" | sed -E 's/[-_.]+/_/g'; }
check_wheel_set() {
  if ! compgen -G "$WHEELS/*.whl" >/dev/null; then
    fail "$WHEELS/ has no wheels: run scripts/gpu_wheels.sh first (on a machine with network), then send $WHEELS/ along"
  fi
  local problems=0 pin name version f base rest n matches all=("$WHEELS"/*.whl)
  for pin in $(scripts/gpu_wheels.sh --list); do
    name=$(norm "${pin%%==*}") version=${pin#*==} matches=()
    for f in "$WHEELS"/*.whl; do
      base=$(basename "$f") rest=${base#*-}
      [[ $(norm "${base%%-*}") == "$name" ]] && matches+=("${rest%%-*}")
    done
    n=${#matches[@]}
    if [[ $n -ne 1 || ${matches[0]:-} != "$version" ]]; then
      echo "  wheel set: $pin wanted, found ${n} version(s): ${matches[*]:-none}" >&2
      problems=1
    fi
  done
  local expected
  expected=$(scripts/gpu_wheels.sh --list | wc -l)
  if [[ ${#all[@]} -ne $expected ]]; then
    echo "  wheel set: $WHEELS/ holds ${#all[@]} wheels, the pins are $expected" >&2
    problems=1
  fi
  [[ $problems -eq 0 ]] || fail "$WHEELS/ does not match the pins: run scripts/gpu_wheels.sh again"
  echo "wheel set: ${#all[@]} wheels, one version of each pin, $(du -ch "${all[@]}" | tail -n1 | cut -f1) in all"
}

# ----------------------------------------------------------------------------------------- dry run
if [[ -n $DRY ]]; then
  echo "DRY RUN ($DRY): no GPU is touched, no point runs; results would go to $RESULTS"
  VENV_PY=${FSDP_BENCH_GPU_CHECK_DRY_PYTHON:-$PWD/.venv/bin/python}
  command -v "$VENV_PY" >/dev/null || fail "$VENV_PY is missing: run scripts/setup.sh (or make sweep) first"
  if [[ $DRY != config ]]; then
    echo "== 1. wheels install for CPython 3.12 (this machine's pip, a clean --target)"
    check_wheel_set
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # This machine's pip (python3 here, whatever its version): --python-version/--implementation/
    # --platform make it choose and unpack wheels as the 3.12 machine would; pip allows them
    # together with --target and --only-binary=:all:.
    python3 -m pip install -q --no-index --no-deps --no-compile --only-binary=:all: --target "$tmp/site" \
      --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
      "$WHEELS"/*.whl || fail "the wheels in $WHEELS/ do not install for CPython 3.12 manylinux x86_64"
    dists=("$tmp"/site/*.dist-info) dists=("${dists[@]##*/}")
    echo "  installed: ${dists[*]%.dist-info}"
    echo "== 1b. the project installs offline (--no-build-isolation, from a copy of the files that travel)"
    # A copy of the tracked and not-ignored files: the in-tree build's build/ and *.egg-info stay
    # out of this checkout, and a file that would not travel cannot make the build pass.
    mkdir "$tmp/src"
    git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$tmp/src"
    (cd "$tmp/src" && "$VENV_PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
      --target "$tmp/project" .) || fail "the project does not build without network (setuptools, --no-build-isolation)"
    dirs=("$tmp"/project/*/) dirs=("${dirs[@]%/}") dirs=("${dirs[@]##*/}")
    echo "  installed: ${dirs[*]}; $(find "$tmp/project/sweeps" -name '*.yaml' | wc -l) config files"
    echo "== 1c. every module a point loads imports here ($VENV_PY, with the wheels it can load)"
    # torchao (cp310-abi3) and nvidia-ml-py (pure) load under this machine's Python too, so an
    # import-time failure of the worker, checkpointing, compile or fp8 shows here, not on the GPU.
    # The cp312 pydantic-core and PyYAML wheels load only on the GPU machine: $VENV_PY has its own.
    "$VENV_PY" -m pip install -q --no-index --no-deps --no-compile --target "$tmp/here" \
      "$WHEELS"/torchao-*.whl "$WHEELS"/nvidia_ml_py-*.whl || fail "torchao and nvidia-ml-py do not install for $VENV_PY"
    PYTHONPATH="$tmp/here:$PWD" "$VENV_PY" scripts/gpu_check_table.py env --imports-only \
      | sed 's/^/  /' || fail "a module a point loads does not import (above)"
  fi
  echo "== 2. every point's config composes and validates ($VENV_PY)"
  points_tsv | "$VENV_PY" scripts/gpu_check_table.py validate - || fail "a point's config is invalid (above)"
  echo "== 3. what would run"
  echo "  rm -rf $SITE"
  echo "  $(printf '%q ' "${INSTALL[@]}")$WHEELS/*.whl ."
  echo "  export PYTHONPATH=$SITE PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
  echo "  $PYTHON scripts/gpu_check_table.py env   (every module a point loads, GPU, C compiler, staging, NVML)"
  echo "  $PYTHON scripts/gpu_check_table.py validate - --plan-out $RESULTS/plan.tsv"
  print_plan
  echo "DRY RUN OK"
  exit 0
fi

# ----------------------------------------------------------------------------------------- GPU run
command -v "$PYTHON" >/dev/null || fail "no $PYTHON: set PYTHON to the interpreter that has CUDA torch"
check_wheel_set
echo "== setup: wheels and the project into $SITE"
rm -rf "$SITE"  # pip --target does not replace what an earlier run left there
# `python3 -m bench`, run from this checkout, imports the checkout's own packages (the current
# directory comes first on sys.path), and so do the ranks; the installed copy is the same code,
# and installing it proves the project builds there, offline.
"${INSTALL[@]}" "$WHEELS"/*.whl . \
  || fail "pip could not install $WHEELS/*.whl and this project into $SITE (the project needs setuptools>=64 in $PYTHON)"
# torchrun starts the ranks with the same interpreter, and they inherit this environment.
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
# Fewer, larger allocator segments: the 7B point's optimizer step runs close to the memory limit.
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

# Every import the points need, once, so a missing package is one clear line, not six failures; a
# feature's module that fails (torchao, say) is reported, and only the points that need it fail.
"$PYTHON" scripts/gpu_check_table.py env || fail "a package the points need does not import (above)"
echo "GPU: ${gpu:-unknown}; cluster preset: $CLUSTER; results: $RESULTS"
mkdir -p "$RESULTS/logs"
rm -f "$RESULTS/outcomes.tsv" "$RESULTS/plan.tsv"

echo "== points: validate (no GPU yet)"
# An invalid point (fp8 on an A100 preset, say: exit 2) is shown as invalid; the others still run.
vrc=0
points_tsv | "$PYTHON" scripts/gpu_check_table.py validate - --plan-out "$RESULTS/plan.tsv" || vrc=$?
[[ ($vrc -eq 0 || $vrc -eq 2) && -f $RESULTS/plan.tsv ]] || fail "validating the points crashed (exit $vrc, above)"
print_plan

status=0
for i in "${!LABELS[@]}"; do
  label=${LABELS[$i]} need=${TIMEOUTS[$i]}
  point_id=$(awk -F'\t' -v l="$label" '$1 == l {print $2}' "$RESULTS/plan.tsv")
  if [[ $point_id == "-" ]]; then
    printf '%s\tinvalid\t%s\n' "$label" "config does not validate" >>"$RESULTS/outcomes.tsv"
    status=1
    continue
  fi
  left=$((START + DEADLINE_S - TABLE_RESERVE_S - SECONDS))
  if (( left < need )); then
    echo "== skip [$label]: it needs up to ${need} s and ${left} s are left before the ${DEADLINE_S} s deadline"
    printf '%s\tskipped\t%s\n' "$label" "global deadline: needs ${need} s, ${left} s left" >>"$RESULTS/outcomes.tsv"
    status=1
    continue
  fi
  # A record left by an earlier run must not stand in for this one (say the CLI stops before
  # launching): the table then shows `no record` for this point instead of old numbers.
  rm -rf "${RESULTS:?}/gpu_check/$point_id"
  read -ra words <<<"${ARGS[$i]}"
  echo "== [$label] $(command_of "$i")"
  t0=$SECONDS
  # `|| rc=...`: a failed point is reported in the table, and the other points still run.
  rc=0
  timeout -k "$KILL_AFTER_S" "$need" "$PYTHON" -m bench run "${words[@]}" 2>&1 | tee "$RESULTS/logs/$label.log" \
    || rc=${PIPESTATUS[0]}
  echo "   [$label] exit $rc after $((SECONDS - t0)) s"
  printf '%s\tran\t%s\n' "$label" "exit $rc; log: logs/$label.log" >>"$RESULTS/outcomes.tsv"
  # A point made to run out of memory (label *-oom) exits 1 by design; the table judges its record.
  [[ $label == *-oom && $rc -eq 1 ]] || (( rc == 0 )) || status=1
done

echo "== table ($((SECONDS - START)) s so far)"
"$PYTHON" scripts/gpu_check_table.py table "$RESULTS" --plan "$RESULTS/plan.tsv" \
  --outcomes "$RESULTS/outcomes.tsv" --out "$RESULTS/table.md" || status=1
echo "done in $((SECONDS - START)) s; table: $RESULTS/table.md"
exit $status
