"""What the timed benchmark scripts share: timing the real command line, and the line each run prints.

The run line, `NAME: run N: W s wall, C s CPU ...`, is what the harness (benchmarks/run.py) reads
from a script's output: `parse_runs` takes the wall and CPU seconds of every run from it. Every
timed script prints it (benchmarks/bench_report.py in its own words, the same format), so a script
joins the harness by printing its runs this way, taking `--runs N`, and being named in run.py's
SCRIPTS.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

# `bench_store: run 2: 3.41 s wall, 3.02 s CPU (load average before: 1.20)`: what follows CPU is free.
RUN_LINE = re.compile(r"^[\w.-]+: run (\d+): ([0-9.]+) s wall, ([0-9.]+) s CPU", re.MULTILINE)


@dataclass(frozen=True)
class Timing:
    """One timed run: wall seconds, CPU seconds (user + system of the command and its children), and
    the 1-minute load average before it (how busy the shared machine was)."""

    wall_s: float
    cpu_s: float
    load: float


def time_command(argv: Sequence[str]) -> Timing:
    """Run `python -m bench ARGV` (the real command line, interpreter start included); raise on failure."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bench", *argv], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Timing(wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), load)


def print_runs(name: str, timings: Sequence[Timing], what: str) -> None:
    """Each run's line, then the medians (the figures docs/results quote)."""
    for number, t in enumerate(timings, start=1):
        print(f"{name}: run {number}: {t.wall_s:.2f} s wall, {t.cpu_s:.2f} s CPU (load average before: {t.load:.2f})")
    walls, cpus = [t.wall_s for t in timings], [t.cpu_s for t in timings]
    print(
        f"{name}: {what}, {os.cpu_count()} CPUs: median {statistics.median(walls):.2f} s wall, "
        f"{statistics.median(cpus):.2f} s CPU over {len(timings)} run(s)"
    )


def parse_runs(output: str) -> list[tuple[float, float]]:
    """(wall seconds, CPU seconds) of every run line in a script's output, in order."""
    return [(float(wall), float(cpu)) for _, wall, cpu in RUN_LINE.findall(output)]
