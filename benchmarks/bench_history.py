"""Benchmark: `fsdp-bench history` over a store of 10,000 runs, 1,000 series of 10 (target: under 5 s).

Writes ten nights of a 1,000-configuration nightly sweep (benchmarks/nightly.py: a torch upgrade on
night 7 slows one configuration in twenty by 15 %) and adds them to a store (not timed), then times
the real command line, `fsdp-bench history --store S -o OUT`, end to end: interpreter start, reading
every stored record, building the series (and the scaling-efficiency series), the change-point
detector on each, the intervals of every change, the numerics guard along each series, and the
outputs (console table, history.html with its plots, summary.md, history.xml).

    .venv/bin/python benchmarks/bench_history.py                       # 10,000 runs, 3 timed runs
    .venv/bin/python benchmarks/bench_history.py --series 20 --nights 6 --runs 1

Prints each run's wall and CPU time and the medians (benchmarks/timing.py), and what the page holds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nightly import parse_args, write_nights
from timing import Prepared, run_benchmark

from bench.analysis import store


def prepare(folder: Path, args: argparse.Namespace) -> Prepared:
    """A store of the nights under `folder`; the history of it, into a folder of each run's own, is what is timed."""
    results, path = folder / "results", folder / "store.sqlite"
    written = write_nights(results, args.series, args.nights)
    added = store.add(path, [results])
    if added.problems or added.total != written:
        raise SystemExit(f"bench_history: {added.total} of {written} records stored ({added.problems[:1]})")

    def page_of(run: int) -> None:  # what the last run's page holds
        if run == args.runs - 1:
            out = folder / f"history{run}"
            plots = len(list(out.glob("*.png")))
            print(
                f"bench_history: history.html {(out / 'history.html').stat().st_size / 2**20:.1f} MiB, {plots} plot(s)"
            )

    argv = ["history", "--store", str(path), "-o", str(folder / "history{run}")]
    return Prepared(argv, (0,), f"{written} records in {path}", page_of)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, nights="runs per series")
    run_benchmark("bench_history", prepare, args, f"history of {args.series * args.nights} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
