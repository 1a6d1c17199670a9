"""Benchmark: drawing the report's figures in one process, as a figure worker draws them, or without the
worker's own fonts, text layouts, glyphs, ticks, markers and legend packing (`--plain`: matplotlib's own).

Draws the figures of a synthetic sweep (benchmarks/bench_report.py's records, default 10,000) from its
analysis, `--rounds` times (each round every figure once, in the workers' order, the texts a round
keeps forgotten before the next, as a fresh worker starts), and prints each figure's median CPU time
(this process, one thread) and the sum. A worker installs reports/fonts.py,
reports/text_layout.py, reports/text_glyphs.py, reports/tick_copies.py,
reports/marker_styles.py and reports/legend_packing.py before it draws
(reports/report/render.py); run the ways to compare in one sitting, interleaved. Not a budget
of `make bench`: the comparisons docs/reports.md quotes.

    .venv/bin/python benchmarks/bench_figures.py
    .venv/bin/python benchmarks/bench_figures.py --plain
    .venv/bin/python benchmarks/bench_figures.py --no-layouts   # the fonts without the layouts (nor glyphs)
    .venv/bin/python benchmarks/bench_figures.py --no-glyphs    # the fonts and layouts without the glyphs
    .venv/bin/python benchmarks/bench_figures.py --no-copies    # the texts' memos, matplotlib's ticks, markers, legends
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

from bench_report import synthetic_analysis

from reports import text_glyphs
from reports.report.render import draw, draw_order, figure_names, worker_memos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    ways = parser.add_mutually_exclusive_group()
    ways.add_argument("--plain", action="store_true", help="matplotlib's own fonts, text layouts, glyphs, ticks...")
    ways.add_argument(
        "--no-layouts", action="store_true", help="the workers' fonts, matplotlib's text layouts, glyphs, ticks..."
    )
    ways.add_argument("--no-glyphs", action="store_true", help="the workers' fonts and layouts, matplotlib's glyphs...")
    ways.add_argument(
        "--no-copies",
        action="store_true",
        help="the workers' fonts, layouts and glyphs, matplotlib's ticks, marker styles and legend packing",
    )
    args = parser.parse_args(argv)
    analysis = synthetic_analysis(args.records)
    memos = worker_memos()  # each way of drawing keeps the ones before a point
    kept = len(memos)
    for flag, count in (("plain", 0), ("no_layouts", 1), ("no_glyphs", 2), ("no_copies", 3)):
        if getattr(args, flag):
            kept = count
    if not all(install() for _, install in memos[:kept]):
        raise SystemExit("bench_figures: this matplotlib is not the one the workers' memos know")
    draw(analysis.points, analysis.scaling, "throughput")  # matplotlib loaded and warm, as a worker's
    gc.disable()  # as in the report's workers (forked with the collector paused)
    times: dict[str, list[float]] = {name: [] for name in figure_names()}
    for _ in range(args.rounds):
        text_glyphs.forget()
        for name in draw_order():
            start = time.process_time()
            draw(analysis.points, analysis.scaling, name)
            times[name].append(time.process_time() - start)
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    for name, median in medians.items():
        print(f"{name}: {1000 * median:.0f} ms")
    kind = "the workers' " + ", ".join(name for name, _ in memos[:kept]) if kept else "matplotlib's own"
    total = 1000 * sum(medians.values())
    print(f"bench_figures: {total:.0f} ms in all ({args.records} records, {kind}, median of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
