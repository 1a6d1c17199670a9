"""Measuring the benchmarks in one checkout or two, run by run (benchmarks/run.py decides what).

A *run* is one process: one timed command line of a script, or one pytest process of the hot paths.
Each run gives one sample per benchmark: the command's wall and CPU seconds (user + system, its
children included), or a hot path's median CPU seconds over that process's rounds. The rounds of
one process share that process's speed (the same code's hot paths move from one pytest process to
the next, docs/development.md), so a round is not a sample:
judged as samples, identical code read as a regression.

Two checkouts are measured *interleaved*, run by run, in the order of `order()`: A B B A A B B A ...
(the baseline's commit first). Each script prepares its data once per checkout (`--prepare`,
benchmarks/timing.py: the records it writes are that checkout's own), then its command is timed
here alternately in each checkout, so that a drift of the machine within the sitting falls on both
sides alike and no block of runs shares one side's luck.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from checkouts import Checkout
from timing import parse_prepared, parse_runs, run_argv, time_command


@dataclass(frozen=True)
class Script:
    """A timed benchmark script: its name in the baseline, its path, the arguments of a smoke run
    (a tiny size; the harness adds `--runs`), and the arguments of every run (one script, two benchmarks)."""

    name: str
    path: str
    smoke: tuple[str, ...]
    args: tuple[str, ...] = ()


# Every timed script. A new one is one line here (it takes --runs and --prepare: benchmarks/timing.py).
SCRIPTS = (
    Script("report_10k", "benchmarks/bench_report.py", ("--records", "40")),
    Script("report_10k_warm", "benchmarks/bench_report.py", ("--records", "40"), ("--warm",)),
    Script("check_10k", "benchmarks/bench_check.py", ("--records", "40")),
    Script("store_add_10k", "benchmarks/bench_store.py", ("--series", "10", "--nights", "2")),
    Script("history_10k", "benchmarks/bench_history.py", ("--series", "10", "--nights", "6")),
)
SCRIPT_NAMES = frozenset(s.name for s in SCRIPTS)
PYTEST_NAME = "pytest"  # what --only calls the pytest-benchmark hot paths as a group
# The pytest hot paths are timed by CPU time of the process (they run in it, one thread, no children).
PYTEST_TIMER = "time.process_time"


@dataclass
class Measured:
    """One benchmark's samples (seconds), one per run, or why it has none: CPU seconds always, wall
    seconds for the timed scripts (the pytest hot paths have no separate wall clock)."""

    name: str
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    failure: str = ""

    def add(self, wall: float | None, cpu: float) -> None:
        if wall is not None:
            self.wall_s.append(wall)
        self.cpu_s.append(cpu)


def is_hot_path(name: str) -> bool:
    """A pytest-benchmark hot path (benchmarks/test_*.py), as opposed to a timed script."""
    return name.startswith("test_")


def order(sides: Sequence[str], runs: int) -> list[str]:
    """The sides' turns, `runs` each: one side alone in a row; two as A B B A A B B A ... (ABBA
    repeated: a drift falls on both alike, and neither side always goes first)."""
    if len(sides) == 1:
        return [sides[0]] * runs
    a, b = sides
    return [(a, b, b, a)[i % 4] for i in range(2 * runs)]


def measure(
    names: set[str], checkouts: dict[str, Checkout], runs: int, folder: Path, tiny: bool = False
) -> dict[str, dict[str, Measured]]:
    """Every benchmark of `names` (script names; PYTEST_NAME for the hot paths) in each checkout,
    `runs` runs each, interleaved by `order`: side -> benchmark name -> its samples. `folder` holds
    each script's prepared data while it is measured; `tiny`: at the smoke runs' sizes (the tests')."""
    sides = list(checkouts)
    found: dict[str, dict[str, Measured]] = {side: {} for side in sides}
    for script in (s for s in SCRIPTS if s.name in names):
        prepared = {
            side: prepare(script, checkout, folder / script.name / side, script.smoke if tiny else ())
            for side, checkout in checkouts.items()
        }
        for side in sides:
            found[side][script.name] = Measured(
                script.name, failure=prepared[side] if isinstance(prepared[side], str) else ""
            )
        turns = [side for side in order(sides, runs) if not found[side][script.name].failure]
        print(f"bench: {script.name}: {len(turns)} timed run(s): {describe(turns, checkouts)}", flush=True)
        for number, side in enumerate(turns):
            argv, exits, env = prepared[side]
            measured = found[side][script.name]
            try:
                timing = time_command(
                    run_argv(argv, number), exits, cwd=checkouts[side].root, env={**checkouts[side].env(), **env}
                )
            except SystemExit as exc:  # the command failed: this side of the benchmark has no verdict
                measured.failure = str(exc)
                continue
            if not measured.failure:
                measured.add(timing.wall_s, timing.cpu_s)
    if PYTEST_NAME in names:
        for side in order(sides, runs):
            for name, median in run_pytest(checkouts[side]).items():
                target = found[side].setdefault(name, Measured(name))
                if isinstance(median, str):
                    target.failure = target.failure or median
                elif not target.failure:
                    target.add(None, median)
    return found


def describe(turns: list[str], checkouts: dict[str, Checkout]) -> str:
    """The turns as letters, A for the first checkout, B for the second: `ABBAABBA... (A: ..., B: ...)`."""
    letters = {side: "AB"[index] for index, side in enumerate(checkouts)}
    legend = ", ".join(f"{letters[side]}: {checkout.label}" for side, checkout in checkouts.items())
    return f"{''.join(letters[side] for side in turns)} ({legend})"


def prepare(
    script: Script, checkout: Checkout, folder: Path, sizes: Sequence[str] = ()
) -> tuple[list[str], list[int], dict[str, str]] | str:
    """The script's data written under `folder` by `checkout`'s own script (at `sizes`, its own
    options; its full size by default): (the command to time, its exits, its environment variables),
    or why it could not be."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(checkout.root / script.path), *script.args, *sizes, "--prepare", str(folder)],
        capture_output=True,
        text=True,
        cwd=checkout.root,
        env=checkout.env(),
    )
    found = parse_prepared(proc.stdout) if proc.returncode == 0 else None
    if found is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        return f"{script.path} --prepare in {checkout.label}: exit {proc.returncode}" + (f"\n{tail}" if tail else "")
    return found


def run_pytest(checkout: Checkout) -> dict[str, float | str]:
    """One pytest process of the hot paths in `checkout`: each one's median CPU seconds over its
    rounds, or, under PYTEST_NAME, why the process failed."""
    command = [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as tmp:
        out = Path(tmp) / "bench.json"
        timed = [*command, "--benchmark-enable", f"--benchmark-timer={PYTEST_TIMER}", f"--benchmark-json={out}"]
        proc = subprocess.run(timed, capture_output=True, text=True, cwd=checkout.root, env=checkout.env())
        if proc.returncode != 0 or not out.is_file():
            return {PYTEST_NAME: f"pytest exit {proc.returncode} in {checkout.label}\n{proc.stdout[-2000:]}"}
        entries = json.loads(out.read_text())["benchmarks"]
    print(f"bench: pytest-benchmark: {len(entries)} hot path(s) in {checkout.label}", flush=True)
    return {entry["name"]: statistics.median(entry["stats"]["data"]) for entry in entries}


def smoke(names: set[str] | None, checkout: Checkout) -> list[Measured]:
    """Each script once at its tiny size, as a user runs it alone (its own run line), and the hot paths
    once each untimed: what the test suite runs, so that a benchmark that no longer runs fails CI."""
    measured = []
    for script in (s for s in SCRIPTS if names is None or s.name in names):
        proc = subprocess.run(
            [sys.executable, str(checkout.root / script.path), *script.args, *script.smoke, "--runs", "1"],
            capture_output=True,
            text=True,
            cwd=checkout.root,
            env=checkout.env(),
        )
        print(proc.stdout, end="", flush=True)
        found = parse_runs(proc.stdout)
        failure = (
            "" if proc.returncode == 0 and len(found) == 1 else f"exit {proc.returncode}, {len(found)} run line(s)"
        )
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        measured.append(Measured(script.name, failure=failure + (f"\n{tail}" if failure and tail else "")))
    if names is None or PYTEST_NAME in names:
        command = [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "--benchmark-disable"]
        proc = subprocess.run(command, capture_output=True, text=True, cwd=checkout.root, env=checkout.env())
        print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "", flush=True)
        failure = "" if proc.returncode == 0 else f"pytest exit {proc.returncode}\n{proc.stdout[-2000:]}"
        measured.append(Measured(PYTEST_NAME, failure=failure))
    return measured
