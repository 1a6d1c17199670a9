"""Benchmark: `fsdp-bench check` of 10,000 records against a baseline of 10,000 (budget: 4 s wall, 2 cores).

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
import subprocess
import sys
from pathlib import Path

from bench_report import write_records
from timing import Prepared, add_prepare, run_benchmark

# `check` exits 0 (pass) or 1 (a regression: some points failed in one sweep and not the other).
CHECK_EXITS = (0, 1)


def prepare(folder: Path, args: argparse.Namespace) -> Prepared:
    """Two sweeps under `folder` and the first saved as a baseline; the check of the second is what is timed."""
    base_results, current = folder / "baseline", folder / "current"
    written = write_records(base_results, args.records, seed=0)
    write_records(current, args.records, seed=1)
    baseline = folder / "baseline.json"
    save = [sys.executable, "-m", "bench", "baseline", "save", str(base_results), "-o", str(baseline)]
    subprocess.run(save, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    line = f"{written} records a side written to {folder}; baseline {baseline.stat().st_size / 2**20:.1f} MiB"
    return Prepared(["check", str(current), "--baseline", str(baseline)], CHECK_EXITS, line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per side (default 10,000)")
    parser.add_argument("--runs", type=int, default=3)
    add_prepare(parser)
    args = parser.parse_args(argv)
    run_benchmark("bench_check", prepare, args, f"{args.records} records against a baseline of {args.records}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
