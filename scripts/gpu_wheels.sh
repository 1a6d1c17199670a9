#!/usr/bin/env bash
# Download the wheels scripts/gpu_check.sh installs on the GPU test machine, into .whl/ at the
# repository root (git-ignored; it travels with the working tree).
#
# That machine has no network. Its python3 (3.12) already has torch 2.11 (CUDA 13), pandas,
# matplotlib, scipy, jinja2, rich, psutil, pyarrow, pytest, setuptools and wheel, but not the
# packages pinned below. So they are fetched here, on a machine that reaches PyPI, as wheels for
# CPython 3.12 on manylinux x86_64, whatever this machine's own Python is.
#
# Usage: scripts/gpu_wheels.sh          download what is missing, drop other versions, print sizes
#        scripts/gpu_wheels.sh --list   print the pins (NAME==VERSION, one a line) and nothing else;
#                                       scripts/gpu_check.sh checks .whl/ against this list
# Idempotent: a wheel already present at the pinned version is not downloaded again.
# Exit code: 0 when .whl/ holds exactly the pinned set and stays under the size limit.
set -euo pipefail
cd "$(dirname "$0")/.."

# One version each, inside pyproject.toml's ranges, and the same versions the CPU .venv runs, so
# the dry run (which validates the configs with .venv's packages) tests what the GPU run imports.
PINS=(
  hydra-core==1.3.8               # pyproject: >=1.3,<1.4
  omegaconf==2.3.1                # hydra-core 1.3 needs omegaconf <2.4
  antlr4-python3-runtime==4.9.3   # omegaconf and hydra-core need exactly 4.9.*; sdist-only on PyPI, built below
  PyYAML==6.0.4                   # omegaconf needs it; not in the machine's list of installed packages
  pydantic==2.14.4                # pyproject: >=2.6,<3
  pydantic-core==2.50.5           # pydantic 2.14.4 pins exactly this pydantic-core
  annotated-types==0.8.0          # pydantic's dependencies from here on
  typing-inspection==0.4.5
  typing-extensions==4.16.0
  # precision=fp8 (torchao.float8). 0.17.0 is the release built against torch 2.11: its
  # torchao/__init__.py loads its C++ extensions only on torch >= 2.11.0 (0.16.0 was built for
  # 2.10). The wheel is cp310-abi3 manylinux_2_28, so it installs on CPython 3.12. The fp8 path
  # itself (Float8Linear, fp8 all-gather) is Python on top of torch._scaled_mm. Without torchao
  # an fp8 point ends as `failed` with "precision fp8 needs torchao" in the table.
  torchao==0.17.0
  # Telemetry's NVML readers (fsdp_core/telemetry_readers.py; pyproject: >=12.535): pure Python. Without it
  # the GPU points still run, and their records say "nvidia-ml-py not installed" instead of energy.
  nvidia-ml-py==13.615.71
)
# antlr4-python3-runtime 4.9.3 exists on PyPI only as a source archive. It is pure Python, so the
# py3-none-any wheel pip builds from it here works on the 3.12 machine.
SDIST_ONLY=(antlr4-python3-runtime)

if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${PINS[@]}"
  exit 0
fi

PYTHON=${PYTHON:-python3}
DEST=.whl
LIMIT_MIB=60  # the working tree that travels to the GPU machine may hold 64 MiB in all
mkdir -p "$DEST"

# A distribution name as wheel file names spell it, for comparison: lower case, runs of -_. as _.
norm() { tr '[:upper:]' '[:lower:]' <<<"$1" | sed -E 's/[-_.]+/_/g'; }

# Wheels of CPython 3.12 on x86_64 Linux: every manylinux tag that machine's glibc accepts.
TARGET=(--python-version 3.12 --implementation cp
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

for pin in "${PINS[@]}"; do
  name=${pin%%==*} version=${pin#*==} have=""
  # Keep the pinned version, remove any other version of the same package (one version each).
  for f in "$DEST"/*.whl; do
    [[ -e $f ]] || continue
    base=$(basename "$f") rest=${base#*-}
    [[ $(norm "${base%%-*}") == "$(norm "$name")" ]] || continue
    if [[ ${rest%%-*} == "$version" ]]; then
      have=$f
    else
      echo "removing $base (pinned: $pin)"
      rm -f "$f"
    fi
  done
  if [[ -n $have ]]; then
    echo "have     $(basename "$have")"
    continue
  fi
  echo "fetching $pin"
  if [[ " ${SDIST_ONLY[*]} " == *" $name "* ]]; then
    "$PYTHON" -m pip wheel -q --no-deps -w "$DEST" "$pin"
  else
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: "${TARGET[@]}" -d "$DEST" "$pin"
  fi
done

# Anything else in .whl/ (a package no longer pinned) would be installed too: remove it.
for f in "$DEST"/*.whl; do
  base=$(basename "$f") rest=${base#*-} known=""
  for pin in "${PINS[@]}"; do
    if [[ $(norm "${base%%-*}") == "$(norm "${pin%%==*}")" && ${rest%%-*} == "${pin#*==}" ]]; then known=1; fi
  done
  [[ -n $known ]] || { echo "removing $base (not pinned)"; rm -f "$f"; }
done
rm -f "$DEST"/*.tar.gz "$DEST"/*.zip  # no source archives: the GPU machine installs wheels only

echo
echo "wheels in $DEST/:"
wheels=("$DEST"/*.whl) total=0
for f in "${wheels[@]}"; do
  size=$(stat -c %s "$f") total=$((total + size))
  printf '  %8.2f MiB  %s\n' "$(awk "BEGIN {print $size / 1048576}")" "$(basename "$f")"
done
count=${#wheels[@]}
printf 'total: %d wheels, %.2f MiB (limit %d MiB)\n' "$count" "$(awk "BEGIN {print $total / 1048576}")" "$LIMIT_MIB"
if [[ $count -ne ${#PINS[@]} ]]; then
  echo "error: expected ${#PINS[@]} wheels (one per pin), found $count" >&2
  exit 1
fi
if (( total >= LIMIT_MIB * 1048576 )); then
  echo "error: the wheels take ${LIMIT_MIB} MiB or more; the tree sent to the GPU machine holds 64 MiB in all" >&2
  exit 1
fi
