"""Benchmark: drawing the report's figures in one process, as a figure worker draws them, or without the
worker's own fonts and text layouts (`--plain`: matplotlib's own).

Draws the figures of a synthetic sweep (benchmarks/bench_report.py's records, default 10,000) from its
analysis, `--rounds` times, and prints each figure's median CPU time (this process, one thread) and
the sum. A worker installs bench/present/fonts.py and bench/present/text_layout.py before it draws
(bench/present/report/render.py); run both ways, in one sitting, to compare them. Not a budget of
`make bench`: the comparison docs/reports.md quotes.

    .venv/bin/python benchmarks/bench_figures.py
    .venv/bin/python benchmarks/bench_figures.py --plain
    .venv/bin/python benchmarks/bench_figures.py --no-layouts   # the fonts without the layouts
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

from bench_report import synthetic_analysis

from bench.present import fonts, text_layout
from bench.present.report.render import draw, figure_names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--plain", action="store_true", help="matplotlib's own fonts and text layouts")
    parser.add_argument("--no-layouts", action="store_true", help="the workers' fonts, matplotlib's text layouts")
    args = parser.parse_args(argv)
    analysis = synthetic_analysis(args.records)
    installed = [] if args.plain else [fonts.install(), *([] if args.no_layouts else [text_layout.install()])]
    if not all(installed):
        raise SystemExit("bench_figures: this matplotlib is not the one the workers' fonts and layouts know")
    draw(analysis.points, analysis.scaling, "throughput")  # matplotlib loaded and warm, as a worker's
    gc.disable()  # as in the report's workers (forked with the collector paused)
    medians = {}
    for name in figure_names():
        times = []
        for _ in range(args.rounds):
            start = time.process_time()
            draw(analysis.points, analysis.scaling, name)
            times.append(time.process_time() - start)
        medians[name] = statistics.median(times)
        print(f"{name}: {1000 * medians[name]:.0f} ms")
    if args.plain:
        kind = "matplotlib's fonts and layouts"
    else:
        kind = "the workers' fonts, matplotlib's layouts" if args.no_layouts else "the workers' fonts and layouts"
    total = 1000 * sum(medians.values())
    print(f"bench_figures: {total:.0f} ms in all ({args.records} records, {kind}, median of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
