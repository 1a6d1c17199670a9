"""What the timed benchmark scripts share: timing the real command line, the line each run prints,
and the protocol by which the harness prepares a script's data once and times its command itself.

Alone, a script writes its records into a temporary folder, times its command `--runs N` times and
prints a run line for each, `NAME: run N: W s wall, C s CPU ...` (`print_runs`; `parse_runs` reads
them back: the smoke run of the test suite does). For `make bench` (benchmarks/run.py) a script
takes `--prepare DIR` instead: it writes its records under DIR, prints one `prepared:` line (the
command line to time, "{run}" where each run's own outputs go, and the exit codes that are not
failures: `print_prepared`, `parse_prepared`) and exits, and the harness times that command in the
script's checkout, run by run, alternating with another checkout's (`time_command`'s `cwd` and `env`).
A script joins the harness by taking both (`run_benchmark` does), and being named in measuring.py's SCRIPTS.
"""

from __future__ import annotations

import compileall
import functools
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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


def time_command(
    argv: Sequence[str], exits: Sequence[int] = (0,), cwd: Path | None = None, env: dict[str, str] | None = None
) -> Timing:
    """Run `python -m bench ARGV` (the real command line, interpreter start included) in `cwd` (a
    checkout: its package is the one run; this one's by default); stop the benchmark on an exit code
    outside `exits` (check's 1 is a verdict, not a failure)."""
    compiled(PACKAGE if cwd is None else Path(cwd) / PACKAGE.name)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = subprocess.run(
        [sys.executable, "-m", "bench", *argv], stdout=subprocess.DEVNULL, cwd=cwd, env=env
    ).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in exits:
        raise SystemExit(f"`fsdp-bench {' '.join(argv)}` exited {code}")
    return Timing(wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), load, code)


@functools.cache
def compiled(package: Path = PACKAGE) -> None:
    """A package byte-compiled once, before its first timed run: an installed package is, and with
    PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) each run would otherwise compile
    its modules again, a cost that no user pays."""
    compileall.compile_dir(package, quiet=1)


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


# The line a script prints for --prepare: what the harness times (benchmarks/run.py).
PREPARED = "prepared: "


def print_prepared(argv: Sequence[str], exits: Sequence[int] = (0,), env: dict[str, str] | None = None) -> None:
    """The command line the harness times ("{run}" where each run's own outputs go), the exit codes
    that are not failures and the environment variables it runs with, as the one `prepared:` line."""
    print(PREPARED + json.dumps({"argv": list(argv), "exits": list(exits), "env": dict(env or {})}), flush=True)


def parse_prepared(output: str) -> tuple[list[str], list[int], dict[str, str]] | None:
    """(argv, exits, env) from a script's --prepare output; None where it printed no `prepared:` line
    (a script from before `env` gives none)."""
    for line in output.splitlines():
        if line.startswith(PREPARED):
            data = json.loads(line[len(PREPARED) :])
            return list(data["argv"]), list(data["exits"]), dict(data.get("env", {}))
    return None


def run_benchmark(name: str, prepare, args, what: str) -> list[Timing]:
    """A script's main: with `args.prepare` (a folder), prepare there and print the `prepared:` line
    (the harness times it); alone, prepare in a temporary folder and time `args.runs` runs, printing
    the run lines. `prepare(folder, args)` writes the data and returns a `Prepared`."""
    import tempfile

    if args.prepare is not None:
        prepared = prepare(Path(args.prepare), args)
        print(f"{name}: {prepared.written}")
        print_prepared(prepared.argv, prepared.exits, prepared.env)
        return []
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        prepared = prepare(Path(tmp), args)
        print(f"{name}: {prepared.written}")
        timings = []
        for run in range(args.runs):
            env = {**os.environ, **prepared.env} if prepared.env else None
            timings.append(time_command(run_argv(prepared.argv, run), prepared.exits, env=env))
            if prepared.after is not None:
                prepared.after(run)
        print_runs(name, timings, what)
    return timings


@dataclass(frozen=True)
class Prepared:
    """A script's data, written: the command line to time ("{run}" where each run's own outputs go),
    the exit codes that are not failures, a line saying what was written, what to check after
    each run when the script times itself (None: nothing), and the environment variables the command
    runs with (a cache folder of its own, say)."""

    argv: list[str]
    exits: tuple[int, ...]
    written: str
    after: object = None
    env: dict[str, str] = field(default_factory=dict)


def run_argv(argv: Sequence[str], run: int) -> list[str]:
    """The command line of run `run` (0, 1, ...): "{run}" replaced by its number."""
    return [arg.replace("{run}", str(run)) for arg in argv]


def add_prepare(parser) -> None:
    """The --prepare option every timed script takes (the harness's, benchmarks/run.py)."""
    parser.add_argument("--prepare", metavar="DIR", help="write the data into DIR, print the command to time, exit")
