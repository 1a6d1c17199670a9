"""What the timed benchmark scripts share: timing the real command line, and the line each run prints.

The run line, `NAME: run N: W s wall, C s CPU ...`, is what the harness (benchmarks/run.py) reads
from a script's output: `parse_runs` takes the wall and CPU seconds of every run from it. Every
timed script prints it through `print_runs`, so a script joins the harness by timing its command
with `time_command`, taking `--runs N`, and being named in run.py's SCRIPTS.
"""

from __future__ import annotations

import compileall
import functools
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The package whose command lines are timed.
PACKAGE = Path(__file__).resolve().parent.parent / "bench"

# `bench_store: run 2: 3.41 s wall, 3.02 s CPU (load average before: 1.20)`: what follows CPU is free.
RUN_LINE = re.compile(r"^[\w.-]+: run (\d+): ([0-9.]+) s wall, ([0-9.]+) s CPU", re.MULTILINE)


@dataclass(frozen=True)
class Timing:
    """One timed run: wall seconds, CPU seconds (user + system of the command and its children), and
    the 1-minute load average before it (how busy the shared machine was)."""

    wall_s: float
    cpu_s: float
    load: float
    exit_code: int = 0


def time_command(argv: Sequence[str], exits: Sequence[int] = (0,)) -> Timing:
    """Run `python -m bench ARGV` (the real command line, interpreter start included); stop the
    benchmark on an exit code outside `exits` (check's 1 is a verdict, not a failure)."""
    compiled()
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "bench", *argv], stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in exits:
        raise SystemExit(f"`fsdp-bench {' '.join(argv)}` exited {code}")
    return Timing(wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), load, code)


@functools.cache
def compiled() -> None:
    """The package byte-compiled once, before the first timed run: an installed package is, and with
    PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) each run would otherwise compile
    its ~300 modules again, a few tenths of a second that no user pays."""
    compileall.compile_dir(PACKAGE, quiet=1)


def print_runs(name: str, timings: Sequence[Timing], what: str) -> None:
    """Each run's line, then the medians (the figures docs/results quote)."""
    for number, t in enumerate(timings, start=1):
        code = f", exit {t.exit_code}" if t.exit_code else ""
        print(
            f"{name}: run {number}: {t.wall_s:.2f} s wall, {t.cpu_s:.2f} s CPU{code} (load average before: {t.load:.2f})"
        )
    walls, cpus = [t.wall_s for t in timings], [t.cpu_s for t in timings]
    print(
        f"{name}: {what}, {os.cpu_count()} CPUs: median {statistics.median(walls):.2f} s wall, "
        f"{statistics.median(cpus):.2f} s CPU over {len(timings)} run(s)"
    )


def parse_runs(output: str) -> list[tuple[float, float]]:
    """(wall seconds, CPU seconds) of every run line in a script's output, in order."""
    return [(float(wall), float(cpu)) for _, wall, cpu in RUN_LINE.findall(output)]
