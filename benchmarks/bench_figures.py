"""Benchmark: each of the report's figures drawn and PNG-encoded in one process, as a worker pool's
task draws it (reports/report/render.py `draw`), and the sum.

Draws the figures of a synthetic sweep (benchmarks/bench_report.py's records, default 10,000) from its
analysis `--rounds` times (each round every figure once, in report order) and prints each figure's
median CPU time (this process, one thread) and the sum: where a big report's drawing time goes, and
what a change to a figure costs. Not a budget of `make bench` (bench_report.py times the command).

    .venv/bin/python benchmarks/bench_figures.py
    .venv/bin/python benchmarks/bench_figures.py --records 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench_report import synthetic_analysis

from reports.report.render import draw, figure_names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    analysis = synthetic_analysis(args.records)
    draw(analysis.points, analysis.scaling, "throughput")  # matplotlib loaded and its fonts read, as in a worker
    times: dict[str, list[float]] = {name: [] for name in figure_names()}
    for _ in range(args.rounds):
        for name in figure_names():
            start = time.process_time()
            draw(analysis.points, analysis.scaling, name)
            times[name].append(time.process_time() - start)
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    for name, median in medians.items():
        print(f"{name}: {1000 * median:.0f} ms")
    total = 1000 * sum(medians.values())
    print(f"bench_figures: {total:.0f} ms in all ({args.records} records, median of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
