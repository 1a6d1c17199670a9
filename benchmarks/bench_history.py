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

import sys
import tempfile
from pathlib import Path

from nightly import parse_args, write_nights
from timing import print_runs, time_command

from bench.analysis import store


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, nights="runs per series")
    with tempfile.TemporaryDirectory(prefix="bench_history-") as tmp:
        results, path = Path(tmp) / "results", Path(tmp) / "store.sqlite"
        written = write_nights(results, args.series, args.nights)
        added = store.add(path, [results])
        if added.problems or added.total != written:
            raise SystemExit(f"bench_history: {added.total} of {written} records stored ({added.problems[:1]})")
        print(f"bench_history: {written} records in {path}")
        timings = []
        for run in range(args.runs):
            out = Path(tmp) / f"history{run}"
            timings.append(time_command(["history", "--store", str(path), "-o", str(out)]))
        page = out / "history.html"
        plots = len(list(out.glob("*.png")))
        print_runs("bench_history", timings, f"history of {written} runs")
        print(f"bench_history: history.html {page.stat().st_size / 2**20:.1f} MiB, {plots} plot(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
