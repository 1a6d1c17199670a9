"""`fsdp-bench history [--store PATH] [--metric M] [--since DATE] [--series FILTER] [-o OUT]`:
change points across the runs of every configuration in the store, and the environment change at each.

Exit 0 (with `--fail-on-new-regression N`: no change for the worse and no numerics failure among the
last N runs of any series), 1 when the gate fails, 2 on bad input (a missing or empty store, an
unknown metric, a series filter that matches nothing, a date that does not parse), before anything
is written.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from bench.analysis.check.thresholds import STEP_TIMINGS as HISTORY_METRICS
from bench.cli.options import DEFAULT_STORE, add_numerics_arguments, numerics_problem

HELP = "change points across runs: which upgrade made it slower, and when (exit 1 with a new regression)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=DEFAULT_STORE, help=f"the results store (default: {DEFAULT_STORE})")
    parser.add_argument(
        "--metric",
        default="tokens_per_s",
        help=f"the metric to follow: {', '.join(HISTORY_METRICS)} (default tokens_per_s)",
    )
    parser.add_argument(
        "--since", metavar="DATE", help="only runs started at or after DATE (YYYY-MM-DD or ISO 8601; UTC)"
    )
    parser.add_argument(
        "--series",
        metavar="FILTER",
        help="only series whose label contains FILTER (case-insensitive) or whose id starts with it",
    )
    parser.add_argument(
        "-o", "--out", default="history", help="output folder: history.html, PNGs, summary.md, history.xml"
    )
    parser.add_argument(
        "--fail-on-new-regression",
        type=int,
        metavar="N",
        help="exit 1 when a change for the worse (or a numerics failure) is among the last N runs of any series",
    )
    add_numerics_arguments(parser)


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def parse_since(text: str) -> datetime:
    """A date or ISO 8601 time (UTC unless it names its zone); ValueError with the accepted forms."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since {text!r}: not a date; use YYYY-MM-DD or ISO 8601 (2026-05-01T02:00)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def main(args: argparse.Namespace) -> int:
    if args.metric not in HISTORY_METRICS:
        return _error(f"--metric {args.metric!r}: unknown; allowed: {', '.join(HISTORY_METRICS)}")
    # Not imported at module level: bench.analysis.history.detect is light, but `--help` should not need it.
    from bench.analysis.history.detect import MIN_RUNS_AFTER

    if args.fail_on_new_regression is not None and args.fail_on_new_regression < MIN_RUNS_AFTER:
        return _error(
            f"--fail-on-new-regression: must be an integer >= {MIN_RUNS_AFTER} (a change point is reported once "
            f"{MIN_RUNS_AFTER} runs lie after it), got {args.fail_on_new_regression}"
        )
    if numerics_problem(args):
        return _error(numerics_problem(args))
    try:
        since = parse_since(args.since) if args.since else None
        records, preflights = _load(Path(args.store))
    except ValueError as exc:
        return _error(str(exc))
    return _history(args, records, preflights, since)


def _load(store: Path) -> tuple[list, list]:
    """Every stored record (all measurements, not only the latest per point) and preflight: ValueError
    when there is no record."""
    import sqlite3

    from bench.analysis.store import ResultStore, is_store, schema_version

    if not store.exists():
        raise ValueError(
            f"--store {store}: no such store; create it with `fsdp-bench store add RESULTS --store {store}`"
        )
    if not is_store(store):
        raise ValueError(f"--store {store}: not an SQLite store")
    try:
        if schema_version(store) == 0:  # opening it as a store would create the table in it
            raise ValueError(f"--store {store}: holds no readable record (an empty or foreign SQLite file)")
        opened = ResultStore(store)
        records, problems = opened.records(latest_only=False)
        preflights, preflight_problems = opened.preflights()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"--store {store}: {exc}") from None
    for problem in problems + preflight_problems:
        print(f"warning: skipped {problem.path}: {problem.reason}", file=sys.stderr)
    if not records:
        raise ValueError(f"--store {store}: holds no readable record; add results with `fsdp-bench store add`")
    return records, preflights


def _history(args: argparse.Namespace, records: list, preflights: list, since: datetime | None) -> int:
    from bench.analysis.history.analyse import analyse
    from bench.analysis.history.detect import detector_name
    from bench.analysis.history.links import link_rows
    from bench.analysis.history.series import build_series, efficiency_series
    from bench.present.history.page import write_history

    series = build_series(records, args.metric, since)
    if args.metric == "tokens_per_s":
        series += efficiency_series(records, since)
    if not series:
        when = f" since {args.since}" if args.since else ""
        return _error(f"no ok run{when} in {args.store} measured {args.metric}")
    if args.series:
        wanted = args.series.lower()
        chosen = [s for s in series if wanted in s.label.lower() or s.key.startswith(wanted)]
        if not chosen:
            names = "; ".join(s.label for s in series[:10]) + ("; ..." if len(series) > 10 else "")
            return _error(f"--series {args.series!r}: matches no series; series: {names}")
        series = chosen
    history = analyse(
        series, metric=args.metric, window=args.fail_on_new_regression, numerics=not args.no_numerics,
        loss_rtol=args.loss_rtol, detector=detector_name(),
    )  # fmt: skip
    history.links = link_rows(preflights, since)
    _print(history, args.store)
    page = write_history(history, Path(args.out), store=str(args.store), command=_command(args))
    print(f"history: wrote {page}")
    return history.exit_code


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this page."""
    words = ["fsdp-bench", "history", "--store", str(args.store), "--metric", args.metric, "-o", str(args.out)]
    for flag, value in (("--since", args.since), ("--series", args.series)):
        words += [flag, value] if value else []
    if args.fail_on_new_regression is not None:
        words += ["--fail-on-new-regression", str(args.fail_on_new_regression)]
    words += ["--no-numerics"] if args.no_numerics else ["--loss-rtol", f"{args.loss_rtol:g}"]
    return shlex.join(words)


def _print(history, store: str) -> None:
    from bench.analysis.history.detect import MIN_SERIES_RUNS
    from bench.analysis.history.links import LINK_HEADERS
    from bench.present.check.table import text_table
    from bench.present.history.table import (
        CHANGE_HEADERS,
        NUMERICS_HEADERS,
        SERIES_HEADERS,
        change_rows,
        numerics_line,
        numerics_rows,
        series_rows,
        verdict_line,
    )

    print(f"store: {store}  metric: {history.metric}  detector: {history.detector}")
    print(text_table(series_rows(history), SERIES_HEADERS))
    changes = change_rows(history)
    print("\nchange points, newest first:" if changes else "\nno change point")
    if changes:
        print(text_table(changes, CHANGE_HEADERS))
    print(numerics_line(history))
    if history.numerics_issues:
        print(text_table(numerics_rows(history), NUMERICS_HEADERS))
    if history.too_short:
        names = ", ".join(f"{r.series.label} ({len(r.series.runs)} runs)" for r in history.too_short)
        print(f"too short to test (fewer than {MIN_SERIES_RUNS} runs): {names}")
    if history.links:
        print("\nmeasured links (preflights), oldest first:")
        print(text_table(history.links, LINK_HEADERS))
    print(verdict_line(history))
