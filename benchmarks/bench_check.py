"""Benchmark: `fsdp-bench check` of 10,000 records against a baseline of 10,000 (budget: 3 s wall, 2 cores).

Writes two synthetic sweeps of benchmarks/bench_report.py's grid (the same 2,000 configurations x
5 repeats, one point in ten OOM; each sweep with its own noise and failures) into a temporary folder,
saves the first as a baseline with the real `fsdp-bench baseline save` (not timed), then times the
real command line, `fsdp-bench check CURRENT --baseline BASELINE.json`, end to end: interpreter
start, reading and validating the baseline file and every current record, matching, the exact
counters, the timing comparisons with their bootstrap intervals and U tests, the numerics guard and
the printed table.

    .venv/bin/python benchmarks/bench_check.py            # 10,000 records a side, 3 timed runs
    .venv/bin/python benchmarks/bench_check.py --records 200 --runs 1

Prints each run's wall time, its CPU time (user + system) and the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_report import write_records

# `check` exits 0 (pass) or 1 (a regression: some points failed in one sweep and not the other).
CHECK_EXITS = (0, 1)


def time_check(current: Path, baseline: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one `fsdp-bench check`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [sys.executable, "-m", "bench", "check", str(current), "--baseline", str(baseline)]
    code = subprocess.run(command, stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in CHECK_EXITS:
        raise SystemExit(f"bench_check: `{' '.join(command)}` exited {code}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per side (default 10,000)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_results, current = Path(tmp) / "baseline", Path(tmp) / "current"
        written = write_records(base_results, args.records, seed=0)
        write_records(current, args.records, seed=1)
        baseline = Path(tmp) / "baseline.json"
        save = [sys.executable, "-m", "bench", "baseline", "save", str(base_results), "-o", str(baseline)]
        subprocess.run(save, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(
            f"bench_check: {written} records a side written to {tmp}; baseline {baseline.stat().st_size / 2**20:.1f} MiB"
        )
        walls, cpus = [], []
        for run in range(args.runs):
            load = os.getloadavg()[0]
            wall, cpu, code = time_check(current, baseline)
            walls.append(wall)
            cpus.append(cpu)
            print(
                f"bench_check: run {run + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU, exit {code} (load average before: {load:.2f})"
            )
        print(
            f"bench_check: {written} records against a baseline of {written}, {os.cpu_count()} CPUs: median "
            f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU over {len(walls)} run(s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
