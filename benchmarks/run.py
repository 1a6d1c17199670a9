"""The harness watches its own speed: run every benchmark, compare with the committed baseline, exit 1
on a significant slowdown of more than 20 %.

    .venv/bin/python benchmarks/run.py                    # make bench: every benchmark against baseline.json
    .venv/bin/python benchmarks/run.py --update-baseline  # make bench-baseline: take baseline.json on purpose
    .venv/bin/python benchmarks/run.py --smoke            # each benchmark once, tiny, untimed (the test suite)
    .venv/bin/python benchmarks/run.py --only store_add_10k,history_10k --runs 3

What runs: each timed script of SCRIPTS (its own records, the real command line, RUNS runs; the
harness reads each run's wall time from the run lines the script prints, benchmarks/timing.py), then
the pytest-benchmark hot paths of benchmarks/test_*.py (every measured round, at most MAX_SAMPLES
of them kept, evenly spaced in the order they ran).

How it judges, in two steps:
1. Against the committed baseline: each benchmark's CPU times, and each script's wall times too,
   with `check`'s own timing rule (bench.analysis.check.compare.compare_timing, the statistics of
   bench.analysis.stats): slower beyond SLOWDOWN_PCT, with a one-sided Mann-Whitney U p below
   `check`'s alpha and a bootstrap interval of the median ratio that excludes 1; each run is one
   sample (a run-level timing, as `check` treats one). A benchmark that fails this is *flagged*.
2. In this sitting: the VM's speed moves between sittings by as much as the limit (the same code's
   CPU time +6 to +32 %, its wall time up to +57 %, 25 minutes apart: docs/development.md), so a
   flag is confirmed by measuring the baseline's commit again now, in a temporary git worktree
   (benchmarks/checkouts.py), alternating with this checkout in two blocks, and judging this
   checkout against those samples by the same rule. Only a confirmed slowdown fails; one the old
   code shows too was the machine. Where the commit cannot be checked out (no git, a shallow clone),
   or with --no-confirm, the flag fails as it stands, and the output says so.
A slower median that is not significant is `noise` and passes. Exit 0 when nothing regressed, 1
when something did (named, with how much and against what) or a benchmark failed to run, 2 on bad
input (an unknown --only name, an unreadable baseline or one of another version).

The baseline (BASELINE) keeps every sample with the machine, the commit and the load it was taken
at; it changes only with --update-baseline. `make bench` also runs scripts/bench_engine.py after
this (its own tolerance: the engine's tokens/s against wall-clock throughput).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from checkouts import DIRTY, HERE, Checkout, CheckoutError, commit_checkout
from timing import parse_runs

from bench.analysis.check.compare import ALPHA, Finding, compare_timing
from bench.analysis.check.points import PointData
from bench.analysis.check.thresholds import Threshold
from bench.schema.files import write_text_atomic

ROOT = HERE.root
BASELINE = ROOT / "benchmarks" / "baseline.json"
# 2: CPU and wall samples per benchmark, judged on both (1 held wall times only, judged on them).
BASELINE_VERSION = 2
# A slowdown beyond this, significant by check's rule, in CPU time or in wall time, flags a
# benchmark against the baseline and, confirmed in the same sitting, fails `make bench`.
SLOWDOWN_PCT = 20.0
# Timed runs per script: 5 against 5 lets the U test reach p = 0.004 (3 against 3 cannot go below 0.05).
RUNS = 5
# Rounds kept per pytest benchmark (a fast one measures thousands).
MAX_SAMPLES = 200
# Step times are what check's timing rule compares; a benchmark's time is one, lower is better.
RULE = Threshold("step_time_s", SLOWDOWN_PCT)
# The pytest hot paths are timed by CPU time of the process (they run in it, one thread, no children).
PYTEST_TIMER = "time.process_time"


@dataclass(frozen=True)
class Script:
    """A timed benchmark script: its name in the baseline, its path, and the arguments of a smoke run
    (a tiny size; the harness adds `--runs`)."""

    name: str
    path: str
    smoke: tuple[str, ...]


# Every timed script. A new one is one line here (it prints timing.py's run lines and takes --runs).
SCRIPTS = (
    Script("report_10k", "benchmarks/bench_report.py", ("--records", "40")),
    Script("check_10k", "benchmarks/bench_check.py", ("--records", "40")),
    Script("store_add_10k", "benchmarks/bench_store.py", ("--series", "10", "--nights", "2")),
    Script("history_10k", "benchmarks/bench_history.py", ("--series", "10", "--nights", "6")),
)
PYTEST_NAME = "pytest"  # what --only calls the pytest-benchmark hot paths as a group


@dataclass
class Measured:
    """One benchmark's samples (seconds) from this run, or why it has none: CPU seconds always,
    wall seconds for the timed scripts (the pytest hot paths have no separate wall clock)."""

    name: str
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    failure: str = ""

    def extend(self, more: Measured) -> None:
        """More samples of the same benchmark (a later block of the same sitting)."""
        self.wall_s += more.wall_s
        self.cpu_s += more.cpu_s
        self.failure = self.failure or more.failure


def run_script(script: Script, runs: int, smoke: bool, checkout: Checkout = HERE) -> Measured:
    args = [*script.smoke, "--runs", "1"] if smoke else ["--runs", str(runs)]
    proc = subprocess.run(
        [sys.executable, str(checkout.root / script.path), *args],
        capture_output=True,
        text=True,
        cwd=checkout.root,
        env=checkout.env(),
    )
    print(proc.stdout, end="", flush=True)
    found = parse_runs(proc.stdout)
    expected = 1 if smoke else runs
    if proc.returncode != 0 or len(found) != expected:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        why = f"exit {proc.returncode}, {len(found)} of {expected} run line(s)" + (f"\n{tail}" if tail else "")
        return Measured(script.name, failure=why)
    return Measured(script.name, [w for w, _ in found], [c for _, c in found])


def run_pytest(smoke: bool, checkout: Checkout = HERE) -> list[Measured]:
    """The pytest-benchmark hot paths: timed (each round a sample), or once each untimed (smoke)."""
    command = [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider"]
    where = {"capture_output": True, "text": True, "cwd": checkout.root, "env": checkout.env()}
    if smoke:
        proc = subprocess.run([*command, "--benchmark-disable"], **where)
        print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "", flush=True)
        failure = "" if proc.returncode == 0 else f"pytest exit {proc.returncode}\n{proc.stdout[-2000:]}"
        return [Measured(PYTEST_NAME, failure=failure)]
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as tmp:
        out = Path(tmp) / "bench.json"
        proc = subprocess.run(
            [*command, "--benchmark-enable", f"--benchmark-timer={PYTEST_TIMER}", f"--benchmark-json={out}"], **where
        )
        if proc.returncode != 0 or not out.is_file():
            return [Measured(PYTEST_NAME, failure=f"pytest exit {proc.returncode}\n{proc.stdout[-2000:]}")]
        entries = json.loads(out.read_text())["benchmarks"]
    print(f"pytest-benchmark: {len(entries)} benchmark(s) in {checkout.label}", flush=True)
    return [Measured(entry["name"], [], thinned(entry["stats"]["data"])) for entry in entries]


def thinned(samples: list[float], keep: int = MAX_SAMPLES) -> list[float]:
    """At most `keep` samples, evenly spaced in the order they ran (so drift is kept, not sorted away)."""
    if len(samples) <= keep:
        return list(samples)
    step = len(samples) / keep
    return [samples[int(i * step)] for i in range(keep)]


def measure(names: set[str] | None, runs: int, smoke: bool, checkout: Checkout = HERE) -> list[Measured]:
    """The benchmarks of `names` (None: all; PYTEST_NAME: the pytest group) measured in `checkout`."""
    measured = [run_script(s, runs, smoke, checkout) for s in SCRIPTS if names is None or s.name in names]
    if names is None or PYTEST_NAME in names:
        measured += run_pytest(smoke, checkout)
    return measured


def groups_of(names: list[str]) -> set[str]:
    """What to run to measure these benchmarks again: each script by its name, the pytest hot paths
    as their group (one pytest run measures them all)."""
    scripts = {s.name for s in SCRIPTS}
    return {name if name in scripts else PYTEST_NAME for name in names}


def blocks(runs: int) -> list[int]:
    """Runs per block when two checkouts alternate: two blocks (3 + 2 of 5), so that a drift within
    the sitting falls on both sides."""
    return [size for size in ((runs + 1) // 2, runs // 2) if size]


def measure_alternating(
    names: list[str], runs: int, then: Checkout, now: Checkout, measure_in=measure
) -> tuple[dict[str, Measured], dict[str, Measured]]:
    """The benchmarks `names` measured in both checkouts, alternating in blocks (then, now, then,
    now): each side's samples by benchmark name, every name present (with a failure where its
    script or the pytest group did not run, or did not measure it)."""
    sides = ({name: Measured(name) for name in names}, {name: Measured(name) for name in names})
    scripts = {s.name for s in SCRIPTS}
    for size in blocks(runs):
        for side, checkout in zip(sides, (then, now), strict=True):
            print(f"bench: {checkout.label}: {size} run(s) of {', '.join(sorted(groups_of(names)))}", flush=True)
            got = {m.name: m for m in measure_in(groups_of(names), size, False, checkout)}
            for name in names:
                group = name if name in scripts else PYTEST_NAME
                found = got.get(name) or got.get(group) or Measured(name, failure=f"not measured in {checkout.label}")
                side[name].extend(
                    found if found.name == name else Measured(name, failure=found.failure or "not measured")
                )
    return sides


def point(name: str, samples: list[float]) -> PointData:
    """A benchmark's samples as check's point: one run-level sample per run."""
    data = PointData(name, name, {}, "ok", len(samples))
    data.step_runs = [[s] for s in samples]
    return data


def judge(name: str, baseline: list[float], current: list[float]) -> Finding:
    """check's timing finding of the current samples against the baseline's (lower is better)."""
    return compare_timing(name, point(name, baseline), point(name, current), RULE, alpha=ALPHA, gating=True)


def machine() -> dict:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "node": platform.node()}  # fmt: skip


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()

    sha = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return sha + (DIRTY if git("status", "--porcelain", "--untracked-files=no") else "")


def read_baseline(path: Path) -> dict:
    """The baseline file; one line and exit 2 when it is missing, unreadable or of another version."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        problem = f"{exc}; take one with `make bench-baseline`" if isinstance(exc, OSError) else str(exc)
        refuse(f"--baseline: {path}: {problem}")
    if not isinstance(data, dict) or data.get("version") != BASELINE_VERSION:
        found = data.get("version") if isinstance(data, dict) else None
        refuse(
            f"--baseline: {path}: version {found!r}; allowed: {BASELINE_VERSION} (take one with `make bench-baseline`)"
        )
    return data


def refuse(line: str) -> None:
    print(f"error: {line}", file=sys.stderr)
    raise SystemExit(2)


def write_baseline(path: Path, measured: list[Measured], runs: int, loads: tuple[float, float]) -> str:
    """Write the baseline file; returns the commit it records (the checkout's before writing)."""
    data = {
        "version": BASELINE_VERSION,
        "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "load_average": {"before": loads[0], "after": loads[1]},
        "runs": runs,
        "benchmarks": {
            m.name: {"median_cpu_s": statistics.median(m.cpu_s), "cpu_s": m.cpu_s, "wall_s": m.wall_s} for m in measured
        },
    }
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return data["commit"]


def headers(against: str) -> tuple[str, ...]:
    return (
        "benchmark",
        f"CPU s: {against}",
        "now",
        "change",
        "p, 95% CI, n",
        f"wall s: {against}",
        "now",
        "change",
        "verdict",
    )


@dataclass(frozen=True)
class Judged:
    """One benchmark's findings against a reference: by CPU time, and by wall time where both sides
    have wall samples (None otherwise)."""

    cpu: Finding
    wall: Finding | None

    @property
    def failing(self) -> list[tuple[str, Finding]]:
        return [(clock, f) for clock, f in (("CPU", self.cpu), ("wall", self.wall)) if f is not None and f.fails]

    @property
    def verdict(self) -> str:
        if failing := self.failing:
            return "REGRESSION (" + ", ".join(clock for clock, _ in failing) + ")"
        return self.cpu.verdict


def judged(m: Measured, reference: dict) -> Judged:
    """m's samples against a reference's {"cpu_s": [...], "wall_s": [...]}."""
    wall = judge(m.name, reference["wall_s"], m.wall_s) if m.wall_s and reference["wall_s"] else None
    return Judged(judge(m.name, reference["cpu_s"], m.cpu_s), wall)


def _columns(samples: list[float], before: list[float]) -> list[str]:
    """Reference median, current median and change of one clock ("" where a side has no samples)."""
    if not samples or not before:
        return ["", f"{statistics.median(samples):.4g}" if samples else "", ""]
    now, was = statistics.median(samples), statistics.median(before)  # check's pooled median of one-sample runs
    return [f"{was:.4g}", f"{now:.4g}", f"{(now / was - 1) * 100:+.1f}%"]


@dataclass
class Comparison:
    """A table's rows, the benchmarks that regressed against its reference (with one line each
    saying by how much), and those that failed to run (with why)."""

    rows: list[list[str]]
    regressed: dict[str, list[str]]
    failed: dict[str, str]

    @property
    def failures(self) -> list[str]:
        lines = [f"{name} failed to run: {why}" for name, why in self.failed.items()]
        return lines + [line for found in self.regressed.values() for line in found]


def comparison_rows(measured: list[Measured], references: dict[str, dict], against: str = "the baseline") -> Comparison:
    """Each benchmark against its reference ({"cpu_s", "wall_s"} by name; `against` names them in
    the lines), by check's timing rule on each clock."""
    result = Comparison([], {}, {})
    for m in measured:
        base = references.get(m.name)
        if m.failure:
            result.rows.append([m.name, "", "", "", "", "", "", "", "FAILED TO RUN"])
            result.failed[m.name] = m.failure
            continue
        if base is None:
            result.rows.append([m.name, *_columns(m.cpu_s, []), "", *_columns(m.wall_s, []), f"new (not in {against})"])
            continue
        found = judged(m, base)
        cpu, wall = _columns(m.cpu_s, base["cpu_s"]), _columns(m.wall_s, base["wall_s"])
        result.rows.append([m.name, *cpu, found.cpu.confidence, *wall, found.verdict])
        for clock, finding in found.failing:
            result.regressed.setdefault(m.name, []).append(
                f"{m.name} is {finding.change * 100:.1f}% slower than {against} in {clock} time "
                f"({finding.baseline:.4g} s -> {finding.current:.4g} s, {finding.confidence}; limit {SLOWDOWN_PCT:g}%)"
            )
    return result


def confirm(flagged: list[str], baseline: dict, runs: int, print_table, measure_in=measure) -> Comparison | str:
    """The flagged benchmarks measured again in this sitting, at the baseline's commit and in this
    checkout alternately, and this checkout judged against the commit's samples; or why the commit
    could not be measured (a line)."""
    try:
        with commit_checkout(baseline["commit"]) as then:
            print(f"bench: confirming {', '.join(flagged)} in this sitting against {then.label} (a git worktree)")
            old, new = measure_alternating(flagged, runs, then, HERE, measure_in)
    except CheckoutError as exc:
        return str(exc)
    if problems := [
        f"{name} did not run at {then.label}: {old[name].failure}" for name in flagged if old[name].failure
    ]:
        return "; ".join(problems)
    references = {name: {"cpu_s": m.cpu_s, "wall_s": m.wall_s} for name, m in old.items()}
    result = comparison_rows([new[name] for name in flagged], references, then.label)
    print_table(result.rows, headers(then.label.removeprefix("commit ")))
    return result


def verdict(first: Comparison, second: Comparison | str | None) -> tuple[list[str], list[str]]:
    """(failure lines, notes): what fails `make bench` once the flags of `first` (against the baseline
    file) are confirmed by `second` (the same sitting; a line: why it could not be measured; None:
    not asked for). A flag fails only where `second` confirms it, or where nothing could confirm it."""
    if not first.regressed or second is None:
        return first.failures, []
    if isinstance(second, str):
        return first.failures, [f"cannot measure the baseline's commit in this sitting: {second}; the flags stand"]
    notes = [
        f"not confirmed: {name} is within {SLOWDOWN_PCT:g}% of the baseline's commit measured now: the flag was the "
        "machine's drift between sittings"
        for name in first.regressed
        if name not in second.regressed and name not in second.failed
    ]
    ran = [f"{name} failed to run: {why}" for name, why in first.failed.items()]
    return ran + second.failures, notes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update-baseline", action="store_true", help="write the baseline from this run")
    mode.add_argument("--smoke", action="store_true", help="each benchmark once at a tiny size; no timing")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help=f"default: {BASELINE.relative_to(ROOT)}")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"timed runs per script (default {RUNS})")
    allowed = [s.name for s in SCRIPTS] + [PYTEST_NAME]
    parser.add_argument("--only", help=f"comma-separated; allowed: {', '.join(allowed)}")
    parser.add_argument(
        "--no-confirm",
        action="store_true",
        help="fail on a flag against the baseline file without measuring the baseline's commit again",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs: must be >= 1, got {args.runs}")
    if args.only and (unknown := set(args.only.split(",")) - set(allowed)):
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}; allowed: {', '.join(allowed)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.present.check.table import text_table

    def print_table(rows, heads):
        print(text_table(rows, heads), flush=True)

    baseline = None if args.update_baseline or args.smoke else read_baseline(args.baseline)
    names = set(args.only.split(",")) if args.only else None
    load_before = os.getloadavg()[0]
    measured = measure(names, args.runs, args.smoke)
    loads = (load_before, os.getloadavg()[0])
    print(f"bench: load average {loads[0]:.2f} before, {loads[1]:.2f} after; {os.cpu_count()} CPUs")
    failed = [m for m in measured if m.failure]
    for m in failed:
        print(f"bench: {m.name} failed to run: {m.failure}")
    if args.smoke:
        print(f"bench: smoke {'FAIL' if failed else 'PASS'}: {len(measured) - len(failed)} of {len(measured)} ran")
        return 1 if failed else 0
    if args.update_baseline:
        if failed:
            print("bench: baseline not written (a benchmark failed)")
            return 1
        taken_at = write_baseline(args.baseline, measured, args.runs, loads)
        if taken_at.endswith(DIRTY):
            print(
                f"bench: warning: taken with uncommitted changes; a flag is confirmed against {taken_at} without them"
            )
        rows = [[m.name, *(f"{statistics.median(x):.4g}" if x else "" for x in (m.cpu_s, m.wall_s)), str(len(m.cpu_s))]
                for m in measured]  # fmt: skip
        print_table(rows, ("benchmark", "median CPU s", "median wall s", "samples"))
        print(f"bench: wrote {args.baseline} (commit {taken_at})")  # asked again, the file just written is a change
        return 0
    taken = f"commit {baseline['commit']}, {baseline['taken_at']}, {baseline['machine']['cpus']} CPUs"
    if baseline["machine"]["cpus"] != os.cpu_count():
        print(
            f"bench: warning: the baseline was taken on {baseline['machine']['cpus']} CPUs, this machine has {os.cpu_count()}"
        )
    first = comparison_rows(measured, baseline["benchmarks"])
    print(
        f"bench: against {args.baseline.name} ({taken}); flagged: > {SLOWDOWN_PCT:g}% slower in CPU or wall time, "
        f"p < {ALPHA:g}"
    )
    print_table(first.rows, headers("baseline"))
    second = None
    if first.regressed and not args.no_confirm:
        for line in [line for found in first.regressed.values() for line in found]:
            print(f"bench: flagged: {line}")
        second = confirm(list(first.regressed), baseline, args.runs, print_table)
    failures, notes = verdict(first, second)
    for line in notes:
        print(f"bench: {line}")
    for line in failures:
        print(f"bench: FAIL: {line}")
    print(f"bench: {'FAIL' if failures else 'PASS'} ({len(measured)} benchmark(s), {len(failures)} failing)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
