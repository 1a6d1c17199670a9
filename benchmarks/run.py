"""The harness watches its own speed: every benchmark measured in this checkout and at the committed
baseline's commit, in the same sitting; exit 1 on a significant slowdown of more than 20 %.

    .venv/bin/python benchmarks/run.py                    # make bench
    .venv/bin/python benchmarks/run.py --update-baseline  # make bench-baseline: take baseline.json on purpose
    .venv/bin/python benchmarks/run.py --smoke            # each benchmark once, tiny, untimed (the test suite)
    .venv/bin/python benchmarks/run.py --only store_add_10k,history_10k --runs 5

What runs (benchmarks/measuring.py): each timed script of SCRIPTS prepares its own records once per
checkout, then its real command line is timed RUNS times in each; the pytest-benchmark hot paths of
benchmarks/test_*.py run as RUNS pytest processes in each, a hot path's sample being its median
round of a process. A run is one process, one sample per benchmark.

What it judges against (why: docs/development.md): the baseline's own commit, checked out in a
temporary git worktree (benchmarks/checkouts.py) and measured now, interleaved run by run with this
checkout (A B B A A B B A ...), by `check`'s timing rule (benchmarks/verdict.py). The VM's speed
moves between sittings by as much as the limit (docs/development.md), which a verdict against another sitting's numbers can neither tell from a slowdown nor see past.
The baseline file's numbers are shown beside, for the record. Where the commit cannot be measured
(no git, a shallow clone, a baseline taken from uncommitted changes), or with --against-file, the
verdict is against the file's numbers, and the output says so.

Exit 0 when nothing regressed, 1 when something did (named, with how much and against what) or a
benchmark did not run, 2 on bad input (an unknown --only name, too few --runs, an unreadable
baseline or one of another version, a baseline to take from a checkout with uncommitted changes).
The baseline (BASELINE) keeps every sample with the machine, the commit and the load it was taken
at; it changes only with --update-baseline, from a committed checkout. `make bench` also runs
scripts/bench_engine.py after this (its own verdict: the engine's tokens/s against a wall clock).
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
from datetime import datetime, timezone
from pathlib import Path

from checkouts import DIRTY, HERE, CheckoutError, commit_checkout
from measuring import PYTEST_NAME, SCRIPT_NAMES, SCRIPTS, Measured, is_hot_path, measure, smoke
from verdict import SLOWDOWN_PCT, Comparison, comparison_rows, headers

from bench.schema.files import write_text_atomic

ROOT = HERE.root
BASELINE = ROOT / "benchmarks" / "baseline.json"
# 3: one sample per run (a hot path's: its median round of one pytest process); 2 held a pytest
# process's rounds as samples, 1 wall times only.
BASELINE_VERSION = 3
# Runs per benchmark and side: 6 against 6 lets the U test reach p = 0.001; below 5 against 5 it
# cannot reach 0.01, and 3 against 3 not even 0.05 (a script twice as slow would read `noise`).
RUNS = 6
MIN_RUNS = 5
# The sides of a same-sitting run, in `measuring.order`'s order: the baseline's commit goes first.
THEN, NOW = "then", "now"


def machine() -> dict:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "node": platform.node()}  # fmt: skip


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()


def modified() -> list[str]:
    """Tracked files with uncommitted changes, but for the baseline file itself (retaking it is one).
    Untracked files are not asked about: a new module the code imports but git does not hold is the
    one case this misses."""
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
        "benchmarks": {
            m.name: {"median_cpu_s": statistics.median(m.cpu_s), "cpu_s": m.cpu_s, "wall_s": m.wall_s} for m in measured
        },
    }
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return data["commit"]


def reference_of(name: str, entry: dict) -> Measured:
    return Measured(name, list(entry["wall_s"]), list(entry["cpu_s"]))


def groups(names: set[str] | None) -> set[str]:
    """What to run for `--only names` (None: everything): scripts by name, the hot paths as PYTEST_NAME
    (asked for as a group or by a hot path's name)."""
    if names is None:
        return {*SCRIPT_NAMES, PYTEST_NAME}
    return {name if name in SCRIPT_NAMES else PYTEST_NAME for name in names}


def flatten(found: dict[str, Measured], baseline_names) -> list[Measured]:
    """A side's benchmarks in order, scripts first; a failed pytest process marks each hot path failed
    (those the baseline knows and those measured: its samples are not all there)."""
    pytest_failure = found.pop(PYTEST_NAME, None)
    if pytest_failure is not None:
        hot = {*(name for name in baseline_names if is_hot_path(name)), *(n for n in found if is_hot_path(n))}
        for name in hot or [PYTEST_NAME]:  # a pytest process that failed fails every hot path of its side
            found[name] = Measured(name, failure=pytest_failure.failure)
    scripts = [s.name for s in SCRIPTS if s.name in found]
    return [found[name] for name in scripts] + [m for name, m in found.items() if name not in scripts]


def against_commit(wanted: set[str], baseline: dict, runs: int, folder: Path, measure_in=measure):
    """Both sides measured in this sitting: (the commit's label, its benchmarks by name, this checkout's),
    or why the commit cannot be measured (a line). A script the baseline does not know is measured
    here only (it may not exist at the commit)."""
    if str(baseline["commit"]).endswith(DIRTY):
        return (
            f"the baseline was taken from a checkout with uncommitted changes ({baseline['commit']}), "
            "so its commit is not the code it measured"
        )
    known = set(baseline["benchmarks"])
    try:
        with commit_checkout(baseline["commit"]) as then:
            print(f"bench: measuring {then.label} (a git worktree) and this checkout, interleaved run by run")
            both = {name for name in wanted if name not in SCRIPT_NAMES or name in known}
            found = measure_in(both, {THEN: then, NOW: HERE}, runs, folder)
            if here_only := wanted - both:
                found[NOW] |= measure_in(here_only, {NOW: HERE}, runs, folder)[NOW]
    except CheckoutError as exc:
        return str(exc)
    return then.label, flatten(found[THEN], known), flatten(found[NOW], known)


def judged_now(label: str, old: list[Measured], new: list[Measured]) -> Comparison:
    """This checkout's samples against the commit's of the same sitting; a benchmark that did not run
    at the commit fails (nothing judges it)."""
    references = {m.name: m for m in old if not m.failure}
    result = comparison_rows([m for m in new if m.name in references or m.name not in {o.name for o in old}],
                             references, label)  # fmt: skip
    for m in old:
        if m.failure:
            result.failed[m.name] = f"not at {label}, so nothing judges it: {m.failure}"
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update-baseline", action="store_true", help="write the baseline from this run")
    mode.add_argument("--smoke", action="store_true", help="each benchmark once at a tiny size; no timing")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help=f"default: {BASELINE.relative_to(ROOT)}")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"timed runs per benchmark and side (default {RUNS})")
    allowed = [s.name for s in SCRIPTS] + [PYTEST_NAME]
    parser.add_argument("--only", help=f"comma-separated; allowed: {', '.join(allowed)}")
    parser.add_argument(
        "--against-file",
        action="store_true",
        help="judge against the baseline file's numbers alone, without measuring its commit in this sitting "
        "(faster; the verdict then carries the machine's drift between sittings)",
    )
    args = parser.parse_args(argv)
    if args.runs < MIN_RUNS and not args.smoke:
        parser.error(f"--runs: must be >= {MIN_RUNS} (fewer cannot show a significant change), got {args.runs}")
    if args.only and (unknown := set(args.only.split(",")) - set(allowed)):
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}; allowed: {', '.join(allowed)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from reports.check.table import text_table

    def print_table(rows, heads):
        print(text_table(rows, heads), flush=True)

    names = set(args.only.split(",")) if args.only else None
    if args.smoke:
        measured = smoke(names, HERE)
        failed = [m for m in measured if m.failure]
        for m in failed:
            print(f"bench: {m.name} failed to run: {m.failure}")
        print(f"bench: smoke {'FAIL' if failed else 'PASS'}: {len(measured) - len(failed)} of {len(measured)} ran")
        return 1 if failed else 0
    if args.update_baseline:
        if changed := modified():  # make bench measures the baseline's commit again: it must be what was measured
            refuse(
                f"--update-baseline: uncommitted changes to {', '.join(changed[:5])}"
                f"{' ...' if len(changed) > 5 else ''}; commit them first (make bench measures the "
                "baseline's commit again)"
            )
        if names is not None:
            refuse("--update-baseline: --only would write a baseline of some benchmarks; take it of all")
        return _take_baseline(args, print_table)
    baseline = read_baseline(args.baseline)
    taken = f"commit {baseline['commit']}, {baseline['taken_at']}, {baseline['machine']['cpus']} CPUs"
    if baseline["machine"]["cpus"] != os.cpu_count():
        print(
            f"bench: warning: the baseline was taken on {baseline['machine']['cpus']} CPUs, this machine has {os.cpu_count()}"
        )
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        now = None if args.against_file else against_commit(groups(names), baseline, args.runs, Path(tmp))
        if isinstance(now, tuple):
            label, old, new = now
        else:
            new = flatten(measure(groups(names), {NOW: HERE}, args.runs, Path(tmp))[NOW], baseline["benchmarks"])
    print(f"bench: load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} CPUs")
    on_file = comparison_rows(new, {n: reference_of(n, e) for n, e in baseline["benchmarks"].items()}, "the baseline")
    print(
        f"bench: against {args.baseline.name} ({taken}); the limit: > {SLOWDOWN_PCT:g}% slower in CPU or wall time, {on_file.significance}"
    )
    print_table(on_file.rows, headers("baseline"))
    if isinstance(now, tuple):
        print(
            f"bench: against {label}, measured in this sitting: the verdict (the file's numbers above are another sitting's)"
        )
        verdict = judged_now(label, old, new)
        print(f"bench: the limit: > {SLOWDOWN_PCT:g}% slower in CPU or wall time, {verdict.significance}")
        print_table(verdict.rows, headers(label.removeprefix("commit ")))
    else:
        why = "--against-file" if now is None else f"cannot measure the baseline's commit in this sitting: {now}"
        print(
            f"bench: the verdict is against the file's numbers ({why}): it carries the machine's drift between sittings"
        )
        verdict = on_file
    for line in verdict.warnings:
        print(f"bench: warning: {line}")
    for line in verdict.failures:
        print(f"bench: FAIL: {line}")
    failing = verdict.failing
    print(f"bench: {'FAIL' if failing else 'PASS'} ({len(new)} benchmark(s), {len(failing)} failing)")
    return 1 if failing else 0


def _take_baseline(args: argparse.Namespace, print_table) -> int:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        measured = flatten(measure(groups(None), {NOW: HERE}, args.runs, Path(tmp))[NOW], ())
    loads = (load_before, os.getloadavg()[0])
    print(f"bench: load average {loads[0]:.2f} before, {loads[1]:.2f} after; {os.cpu_count()} CPUs")
    if failed := [m for m in measured if m.failure]:
        for m in failed:
            print(f"bench: {m.name} failed to run: {m.failure}")
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
