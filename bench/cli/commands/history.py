"""`fsdp-bench history [--store STORE] [--metric M] [--since DATE] [--series FILTER] [-o OUT]`:
change points across the runs of every configuration in the store, and the environment change at each.

Exit 0 (with `--fail-on-new-regression N`: no change for the worse and no numerics failure among the
last N runs of any series; with `--fail-on-ungated` also no tested series whose noise hides a shift
of `--target-shift`), 1 when the gate fails, 2 on bad input (a missing or empty store, an unknown
metric, a series filter that matches nothing, a date that does not parse, a target shift that is not
a percentage between 0 and 100), before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from bench.analysis.check.thresholds import STEP_TIMINGS as HISTORY_METRICS
from bench.cli.options import STORE_DEFAULT_HELP, add_numerics_arguments, default_store, numerics_problem

HELP = "change points across runs: which upgrade made it slower, and when (exit 1 with a new regression)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", help=f"the results store: a path or a postgresql:// URL (default: {STORE_DEFAULT_HELP})"
    )
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
    parser.add_argument(
        "--target-shift",
        default="10%",
        metavar="PCT",
        help="the smallest change the gate must detect (95%% of the time): a series whose noise hides it is listed "
        "as not gated, with the repeats that would gate it (default 10%%)",
    )
    parser.add_argument(
        "--fail-on-ungated",
        action="store_true",
        help="with --fail-on-new-regression: exit 1 also when a tested series is not gated at --target-shift",
    )
    add_numerics_arguments(parser)


# A store of fewer runs is read, analysed and drawn in one process: reading it takes less time than
# a worker pool takes to import the detector and matplotlib.
PARALLEL_MIN_RUNS = 2000
# Series per change-point task of the pool.
CHUNK_SERIES = 100


def main(args: argparse.Namespace) -> int:
    from bench.analysis.gc_pause import gc_paused

    with gc_paused():  # the store's records stay alive until the pages are written (bench/analysis/gc_pause.py)
        return _history(args)


def _history(args: argparse.Namespace) -> int:
    from bench.analysis.check.thresholds import ThresholdError, parse_percentage
    from bench.analysis.history.analyse import DETECT_HERE
    from bench.analysis.history.build import HistoryQuery, stored_history
    from bench.analysis.history.detect import MIN_RUNS_AFTER
    from bench.analysis.pool import warm, worker_pool
    from bench.analysis.store.location import masked, store_problem
    from bench.config.paths import output_problem, require
    from bench.config.problems import ConfigError, did_you_mean
    from reports.history.draw import DRAWING_MODULES
    from reports.history.page import reproduce_command, write_history
    from reports.history.table import console_lines

    if args.metric not in HISTORY_METRICS:
        hint = did_you_mean(args.metric, HISTORY_METRICS)
        raise ConfigError([f"--metric {args.metric!r}: unknown{hint}; allowed: {', '.join(HISTORY_METRICS)}"])
    if args.fail_on_new_regression is not None and args.fail_on_new_regression < MIN_RUNS_AFTER:
        raise ConfigError([
            f"--fail-on-new-regression: must be an integer >= {MIN_RUNS_AFTER} (a change point is reported once "
            f"{MIN_RUNS_AFTER} runs lie after it), got {args.fail_on_new_regression}"
        ])  # fmt: skip
    try:
        target_shift = parse_percentage(args.target_shift, "--target-shift")
    except ThresholdError as exc:
        raise ConfigError([str(exc)]) from None
    if args.fail_on_ungated and args.fail_on_new_regression is None:
        raise ConfigError(["--fail-on-ungated: needs --fail-on-new-regression N (the gate whose power it asks for)"])
    store = args.store or default_store()
    create = f"create it with `fsdp-bench store add RESULTS --store {masked(store)}`"
    require([numerics_problem(args), store_problem("--store", store, hint=create),
             output_problem("-o/--out", args.out, "folder")])  # fmt: skip
    query = HistoryQuery(
        store, args.metric, args.since, args.series, args.fail_on_new_regression, not args.no_numerics, args.loss_rtol,
        target_shift, args.fail_on_ungated,
    )  # fmt: skip
    # A big store's change points and figures are tasks of a worker pool (bench/analysis/pool.py),
    # started at once: it imports the detector and matplotlib while this process reads the store.
    with worker_pool(("bench.analysis.history.detect", "otava.analysis", *DRAWING_MODULES)) as pool:
        pooled = pool if _stored_runs(store) >= PARALLEL_MIN_RUNS else None
        warm(pooled)
        stored = stored_history(query, detect_many=DETECT_HERE if pooled is None else detect_in(pooled))
        for problem in stored.problems:
            print(f"warning: skipped {problem.path}: {problem.reason}", file=sys.stderr)
        # Printed and written with the URL's password masked (the reproduce command too).
        print("\n".join(console_lines(stored.history, masked(store))))
        command = reproduce_command(replace(query, store=masked(store)), args.out)
        page = write_history(stored.history, Path(args.out), store=masked(store), command=command, pool=pooled)
    print(f"history: wrote {page}")
    return stored.history.exit_code


def _stored_runs(store: str) -> int:
    """How many runs the store holds (ConfigError where it is not one: a server that cannot be reached
    is asked once)."""
    from bench.analysis.store import StoreError, open_existing
    from bench.config.problems import ConfigError

    try:
        return open_existing(store).count()
    except StoreError as exc:
        raise ConfigError([f"--store: {exc}"]) from None


def detect_in(pool):
    """A DetectEach (bench/analysis/history/analyse.py) whose change points are found by the pool's
    workers, CHUNK_SERIES series per task, while this process checks the loss curves; a chunk whose
    worker failed is found here."""
    from bench.analysis.history.detect import detect_each
    from bench.analysis.pool import result_or_here, submit

    def ask(values_of: list[list[float]]):
        chunks = [values_of[start : start + CHUNK_SERIES] for start in range(0, len(values_of), CHUNK_SERIES)]
        tasks = [submit(pool, detect_each, chunk) for chunk in chunks]

        def answer() -> list:
            return [
                found
                for task, chunk in zip(tasks, chunks, strict=True)
                for found in result_or_here(task, lambda chunk=chunk: detect_each(chunk), "finding change points")
            ]

        return answer

    return ask
