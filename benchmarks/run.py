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

How it judges: by `check`'s own timing rule (bench.analysis.check.compare.compare_timing, the
statistics of bench.analysis.stats) on two clocks, each run's CPU time and each script run's wall
time: a regression is a median more than SLOWDOWN_PCT slower, with a one-sided Mann-Whitney U p
below `check`'s alpha and a bootstrap interval of the median ratio that excludes 1; each run is one
sample (a run-level timing, as `check` treats one). The reference is the baseline's own commit,
measured again in this sitting: the VM's speed moves between sittings by as much as the limit (the
same code's CPU time -46 to +32 %, its wall time up to +57 %: docs/development.md), which a verdict
against another sitting's numbers can neither tell from a slowdown nor see past (a machine faster
today hides a slowdown). So the commit is checked out in a temporary git worktree
(benchmarks/checkouts.py) and both it and this checkout are measured, RUNS runs a side in ABBA
blocks (the commit, this checkout, this checkout, the commit: a drift within the sitting falls on
both alike); the baseline file's numbers are shown beside, for the record. A benchmark fails when
it regressed against the commit or did not run; one more than the limit slower in the median but
not significantly gets a warning to measure it again. A run is one process: a script's command line,
or a pytest process's rounds (judged as a run of samples, as check judges a run of steps: its
processes differ more than its rounds do). Where the commit cannot be
measured (no git, a shallow clone, a baseline taken from uncommitted changes), or with
--against-file, the verdict is against the file's numbers, and the output says so.
A slower median that is not significant is `noise` and passes. Exit 0 when nothing regressed, 1
when something did (named, with how much and against what) or a benchmark failed to run, 2 on bad
input (an unknown --only name, an unreadable baseline or one of another version, a baseline to take
from a checkout with uncommitted changes).

The baseline (BASELINE) keeps every sample with the machine, the commit and the load it was taken
at; it changes only with --update-baseline, from a committed checkout. `make bench` also runs scripts/bench_engine.py after
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
# A slowdown beyond this, significant by check's rule, in CPU time or in wall time, against the
# baseline's commit measured in the same sitting, fails `make bench`.
SLOWDOWN_PCT = 20.0
# Timed runs per script and side: 6 against 6 lets the U test reach p = 0.001 (3 against 3 cannot go
# below 0.05).
RUNS = 6
# Rounds kept per pytest benchmark and run (a fast one measures thousands).
MAX_SAMPLES = 200
# pytest processes per side and sitting (each a run of the hot paths' rounds): 4 against 4 leaves a
# regression of identical code to chance only where all four of one side beat all four of the other
# (1 in 70), where 2 against 2 left it at 1 in 6. About 20 s each.
PYTEST_RUNS = 4
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
    """One benchmark's samples (seconds) run by run, or why it has none: CPU seconds always, wall
    seconds for the timed scripts (the pytest hot paths have no separate wall clock). A script's run
    is one sample (one command line); a pytest run is the rounds of one pytest process, which share
    that process's speed: the same code's rounds moved by up to 40 % from one process to the next on
    the project's VM, so a run, not a round, is the unit that is replicated (check's rule resamples
    runs, then the samples within them)."""

    name: str
    wall_runs: list[list[float]] = field(default_factory=list)
    cpu_runs: list[list[float]] = field(default_factory=list)
    failure: str = ""

    @classmethod
    def of(cls, name: str, wall_s: list[float], cpu_s: list[float]) -> Measured:
        """A benchmark of one sample a run (a timed script)."""
        return cls(name, [[s] for s in wall_s], [[s] for s in cpu_s])

    @property
    def wall_s(self) -> list[float]:
        return [s for run in self.wall_runs for s in run]

    @property
    def cpu_s(self) -> list[float]:
        return [s for run in self.cpu_runs for s in run]

    def extend(self, more: Measured) -> None:
        """More runs of the same benchmark (a later block of the same sitting)."""
        self.wall_runs += more.wall_runs
        self.cpu_runs += more.cpu_runs
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
    return Measured.of(script.name, [w for w, _ in found], [c for _, c in found])


def run_pytest(smoke: bool, checkout: Checkout = HERE, runs: int = PYTEST_RUNS) -> list[Measured]:
    """The pytest-benchmark hot paths: timed (`runs` pytest processes, each a run of its rounds), or
    once each untimed (smoke)."""
    command = [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider"]
    where = {"capture_output": True, "text": True, "cwd": checkout.root, "env": checkout.env()}
    if smoke:
        proc = subprocess.run([*command, "--benchmark-disable"], **where)
        print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "", flush=True)
        failure = "" if proc.returncode == 0 else f"pytest exit {proc.returncode}\n{proc.stdout[-2000:]}"
        return [Measured(PYTEST_NAME, failure=failure)]
    measured: dict[str, Measured] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-pytest-") as tmp:
            out = Path(tmp) / "bench.json"
            timed = [*command, "--benchmark-enable", f"--benchmark-timer={PYTEST_TIMER}", f"--benchmark-json={out}"]
            proc = subprocess.run(timed, **where)
            if proc.returncode != 0 or not out.is_file():
                return [Measured(PYTEST_NAME, failure=f"pytest exit {proc.returncode}\n{proc.stdout[-2000:]}")]
            entries = json.loads(out.read_text())["benchmarks"]
        for entry in entries:
            measured.setdefault(entry["name"], Measured(entry["name"])).cpu_runs.append(thinned(entry["stats"]["data"]))
    print(f"pytest-benchmark: {len(measured)} benchmark(s), {runs} run(s) in {checkout.label}", flush=True)
    return list(measured.values())


def thinned(samples: list[float], keep: int = MAX_SAMPLES) -> list[float]:
    """At most `keep` samples, evenly spaced in the order they ran (so drift is kept, not sorted away)."""
    if len(samples) <= keep:
        return list(samples)
    step = len(samples) / keep
    return [samples[int(i * step)] for i in range(keep)]


def measure(
    names: set[str] | None, runs: int, smoke: bool, checkout: Checkout = HERE, pytest_runs: int = PYTEST_RUNS
) -> list[Measured]:
    """The benchmarks of `names` (None: all; PYTEST_NAME: the pytest group) measured in `checkout`:
    each script `runs` times, the pytest group `pytest_runs` times."""
    measured = [run_script(s, runs, smoke, checkout) for s in SCRIPTS if names is None or s.name in names]
    if names is None or PYTEST_NAME in names:
        measured += run_pytest(smoke, checkout, pytest_runs)
    return measured


def group_of(name: str) -> str:
    """What runs to measure a benchmark: its script (by its name), or the pytest group for a hot path
    (one pytest run measures them all)."""
    return name if name in {s.name for s in SCRIPTS} else PYTEST_NAME


# The order of the same-sitting blocks: the baseline's commit, this checkout, this checkout, the
# commit (ABBA), half of each side's runs a block: a drift within the sitting falls on both sides alike.
ABBA = ("then", "now", "now", "then")


def block_runs(runs: int) -> list[int]:
    """Runs of each of the four ABBA blocks for `runs` runs a side (6: 3, 3, 3, 3)."""
    first, second = (runs + 1) // 2, runs // 2
    return [first, first, second, second]


def measure_alternating(
    names: list[str], then: Checkout, now: Checkout, runs: int = RUNS, measure_in=measure
) -> tuple[dict[str, Measured], dict[str, Measured]]:
    """The benchmarks `names` measured in both checkouts in ABBA blocks, `runs` runs a side (the
    pytest group: once a block): each side's samples by benchmark name, every name present (with a
    failure where its script or the pytest group did not run, or did not measure it)."""
    sides = {"then": {n: Measured(n) for n in names}, "now": {n: Measured(n) for n in names}}
    groups = {group_of(name) for name in names}
    for turn, block in zip(ABBA, block_runs(runs), strict=True):
        if not block:
            continue
        checkout = then if turn == "then" else now
        print(f"bench: {checkout.label}: {block} run(s) of {', '.join(sorted(groups))}", flush=True)
        got = {m.name: m for m in measure_in(groups, block, False, checkout, PYTEST_RUNS // 2)}
        for name in names:
            found = got.get(name) or got.get(group_of(name)) or Measured(name, failure="not measured")
            if found.name != name:  # the group failed: so did each of its benchmarks
                found = Measured(name, failure=found.failure or f"not measured in {checkout.label}")
            sides[turn][name].extend(found)
        if turn == "now":  # a hot path this checkout has and the names did not know: shown as new
            for name in got.keys() - set(names) - groups:
                sides["now"].setdefault(name, Measured(name)).extend(got[name])
    return sides["then"], sides["now"]


def point(name: str, runs: list[list[float]]) -> PointData:
    """A benchmark's runs as check's point: each run's samples as a run's step times."""
    data = PointData(name, name, {}, "ok", len(runs))
    data.step_runs = [list(run) for run in runs]
    return data


def judge(name: str, baseline: list[list[float]], current: list[list[float]]) -> Finding:
    """check's timing finding of the current runs against the baseline's (lower is better)."""
    return compare_timing(name, point(name, baseline), point(name, current), RULE, alpha=ALPHA, gating=True)


def machine() -> dict:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "node": platform.node()}  # fmt: skip


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()


def modified() -> list[str]:
    """Tracked files with uncommitted changes, but for the baseline file itself (retaking it is one)."""
    lines = _git("status", "--porcelain", "--untracked-files=no").splitlines()
    paths = [line[3:] for line in lines]
    return [path for path in paths if (ROOT / path).resolve() != BASELINE.resolve()]


def commit() -> str:
    """The checkout's commit (12 hex digits), DIRTY appended where tracked files have changes."""
    return (_git("rev-parse", "--short=12", "HEAD") or "unknown") + (DIRTY if modified() else "")


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
        "benchmarks": {m.name: _entry(m) for m in measured},
    }
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return data["commit"]


def _entry(m: Measured) -> dict:
    """A benchmark in the baseline file: its samples, and its runs where a run holds several (pytest's)."""
    entry = {"median_cpu_s": statistics.median(m.cpu_s), "cpu_s": m.cpu_s, "wall_s": m.wall_s}
    if any(len(run) > 1 for run in m.cpu_runs):
        entry["cpu_runs"] = m.cpu_runs
    return entry


def reference_of(name: str, entry: dict) -> Measured:
    """A baseline file's benchmark as the runs it measured: `cpu_runs` where the file has them; else a
    pytest hot path's samples are the rounds of one process (one run), a script's one sample a run."""
    if "cpu_runs" in entry:
        return Measured(name, [[s] for s in entry["wall_s"]], entry["cpu_runs"])
    if group_of(name) == PYTEST_NAME:
        return Measured(name, [], [entry["cpu_s"]])
    return Measured.of(name, entry["wall_s"], entry["cpu_s"])


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


def judged(m: Measured, reference: Measured) -> Judged:
    """m's runs against the reference's, on each clock both have."""
    wall = judge(m.name, reference.wall_runs, m.wall_runs) if m.wall_runs and reference.wall_runs else None
    return Judged(judge(m.name, reference.cpu_runs, m.cpu_runs), wall)


def _columns(samples: list[float], before: list[float]) -> list[str]:
    """Reference median, current median and change of one clock ("" where a side has no samples)."""
    if not samples or not before:
        return ["", f"{statistics.median(samples):.4g}" if samples else "", ""]
    now, was = statistics.median(samples), statistics.median(before)  # check's pooled median of one-sample runs
    return [f"{was:.4g}", f"{now:.4g}", f"{(now / was - 1) * 100:+.1f}%"]


@dataclass
class Comparison:
    """A table's rows; the benchmarks that regressed against its reference (a line each saying by how
    much), those slower by more than the limit without significance (`inconclusive`, a line each),
    those that failed to run (with why); and each judged benchmark's change, as a line (`changes`)."""

    rows: list[list[str]] = field(default_factory=list)
    regressed: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    inconclusive: dict[str, str] = field(default_factory=dict)
    changes: dict[str, str] = field(default_factory=dict)

    @property
    def regression_lines(self) -> list[str]:
        return [line for found in self.regressed.values() for line in found]

    @property
    def failures(self) -> list[str]:
        return [f"{name} failed to run: {why}" for name, why in self.failed.items()] + self.regression_lines


def comparison_rows(
    measured: list[Measured], references: dict[str, Measured], against: str = "the baseline"
) -> Comparison:
    """Each benchmark against its reference (by name; `against` names them in the lines), by check's
    timing rule on each clock."""
    result = Comparison()
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
        cpu, wall = _columns(m.cpu_s, base.cpu_s), _columns(m.wall_s, base.wall_s)
        result.rows.append([m.name, *cpu, found.cpu.confidence, *wall, found.verdict])
        for clock, finding in found.failing:
            result.regressed.setdefault(m.name, []).append(
                f"{m.name} is {finding.change * 100:.1f}% slower than {against} in {clock} time "
                f"({finding.baseline:.4g} s -> {finding.current:.4g} s, {finding.confidence}; limit {SLOWDOWN_PCT:g}%)"
            )
        clocks = [(clock, f) for clock, f in (("CPU", found.cpu), ("wall", found.wall)) if f is not None]
        result.changes[m.name] = ", ".join(
            f"{f.change * 100:+.1f}% in {clock} time ({f.confidence})" for clock, f in clocks
        )
        if m.name not in result.regressed and (slow := [c for c, f in clocks if f.change * 100 > SLOWDOWN_PCT]):
            result.inconclusive[m.name] = (
                f"{' and '.join(slow)} time more than {SLOWDOWN_PCT:g}% slower than {against} but not "
                f"significantly: {result.changes[m.name]}"
            )
    return result


def against_commit(names: list[str], baseline: dict, runs: int, measure_in=measure):
    """The benchmarks measured in this sitting at the baseline's commit (a temporary git worktree)
    and in this checkout (measure_alternating): (the commit's label, its samples, this checkout's);
    or why the commit cannot be measured (a line)."""
    if str(baseline["commit"]).endswith(DIRTY):
        return (
            f"the baseline was taken from a checkout with uncommitted changes ({baseline['commit']}), "
            "so its commit is not the code it measured"
        )
    try:
        with commit_checkout(baseline["commit"]) as then:
            print(f"bench: measuring {then.label} (a git worktree) and this checkout in this sitting, ABBA")
            old, new = measure_alternating(names, then, HERE, runs, measure_in)
    except CheckoutError as exc:
        return str(exc)
    return then.label, old, new


def judged_now(label: str, old: dict[str, Measured], new: dict[str, Measured]) -> Comparison:
    """This checkout's samples against the commit's of the same sitting; a benchmark that did not run
    at the commit fails (nothing judges it)."""
    references = {name: m for name, m in old.items() if not m.failure}
    result = comparison_rows(
        [m for name, m in new.items() if name not in old or not old[name].failure], references, label
    )
    for name, m in old.items():
        if m.failure:
            result.failed[name] = f"did not run at {label}, so nothing judges it: {m.failure}"
    return result


def failure_lines(result: Comparison) -> list[str]:
    """What fails `make bench`: a benchmark that did not run, and a significant slowdown beyond the limit."""
    return result.failures


def warning_lines(result: Comparison) -> list[str]:
    """What `make bench` warns of without failing: a median beyond the limit without significance. A
    run is a whole process, and processes of the same code differ (a pytest hot path's by up to 40 %
    here), so this happens by chance; failing on it would fail identical code (docs/development.md)."""
    return [
        f"{name}: inconclusive: {why}; measure it again (--only {name})" for name, why in result.inconclusive.items()
    ]


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
        "--against-file",
        action="store_true",
        help="judge against the baseline file's numbers alone, without measuring its commit in this sitting "
        "(faster; the verdict then carries the machine's drift between sittings)",
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
    if args.update_baseline and (changed := modified()):
        # `make bench` measures the baseline's commit again: it must be the code the baseline measured.
        refuse(
            f"--update-baseline: uncommitted changes to {', '.join(changed[:5])}"
            f"{' ...' if len(changed) > 5 else ''}; commit them first (make bench measures the "
            "baseline's commit again)"
        )
    names = set(args.only.split(",")) if args.only else None
    if args.smoke or args.update_baseline:
        return _measure_only(args, names, print_table)
    taken = f"commit {baseline['commit']}, {baseline['taken_at']}, {baseline['machine']['cpus']} CPUs"
    if baseline["machine"]["cpus"] != os.cpu_count():
        print(
            f"bench: warning: the baseline was taken on {baseline['machine']['cpus']} CPUs, this machine has {os.cpu_count()}"
        )
    load_before = os.getloadavg()[0]
    wanted = [s.name for s in SCRIPTS if names is None or s.name in names]
    if names is None or PYTEST_NAME in names:  # the hot paths' names are the baseline's (a pytest run gives them)
        wanted += [name for name in baseline["benchmarks"] if group_of(name) == PYTEST_NAME]
    now = None if args.against_file else against_commit(wanted, baseline, args.runs)
    if isinstance(now, tuple):
        label, old, new = now
        measured = list(new.values())
    else:
        measured = measure(names, args.runs, smoke=False)
    print(f"bench: load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} CPUs")
    on_file = comparison_rows(measured, {name: reference_of(name, e) for name, e in baseline["benchmarks"].items()})
    print(
        f"bench: against {args.baseline.name} ({taken}); the limit: > {SLOWDOWN_PCT:g}% slower in CPU or wall time, p < {ALPHA:g}"
    )
    print_table(on_file.rows, headers("baseline"))
    if isinstance(now, tuple):
        print(
            f"bench: against {label}, measured in this sitting: the verdict (the file's numbers above are another sitting's)"
        )
        verdict = judged_now(label, old, new)
        print_table(verdict.rows, headers(label.removeprefix("commit ")))
    else:
        why = "--against-file" if now is None else f"cannot measure the baseline's commit in this sitting: {now}"
        print(
            f"bench: the verdict is against the file's numbers ({why}): it carries the machine's drift between sittings"
        )
        verdict = on_file
    failures = failure_lines(verdict)
    for line in warning_lines(verdict):
        print(f"bench: warning: {line}")
    for line in failures:
        print(f"bench: FAIL: {line}")
    print(f"bench: {'FAIL' if failures else 'PASS'} ({len(measured)} benchmark(s), {len(failures)} failing)")
    return 1 if failures else 0


def _measure_only(args: argparse.Namespace, names: set[str] | None, print_table) -> int:
    """--smoke (each benchmark once, tiny, untimed) and --update-baseline (the baseline file written)."""
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
    if failed:
        print("bench: baseline not written (a benchmark failed)")
        return 1
    taken_at = write_baseline(args.baseline, measured, args.runs, loads)
    rows = [[m.name, *(f"{statistics.median(x):.4g}" if x else "" for x in (m.cpu_s, m.wall_s)), str(len(m.cpu_s))]
            for m in measured]  # fmt: skip
    print_table(rows, ("benchmark", "median CPU s", "median wall s", "samples"))
    print(f"bench: wrote {args.baseline} (commit {taken_at})")  # asked again, the file just written is a change
    return 0


if __name__ == "__main__":
    sys.exit(main())
