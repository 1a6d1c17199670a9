"""`fsdp-bench report RESULTS [-o OUT]`: render a results folder or store as HTML, PNG, Markdown and CSV.

Exit 0 when a report was written (unreadable records are listed on the page and on stderr),
2 when RESULTS does not exist or holds no readable record.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

HELP = "Render the scaling report (report.html, *.png, summary.md, results.csv) of a results folder or store."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", metavar="RESULTS", help="a results folder (any level) or an fsdp-bench .sqlite store"
    )
    parser.add_argument("-o", "--out", default="report", help="output folder (default: report/)")
    parser.add_argument("--title", default=None, help="page title (default: the sweep names)")


def main(args: argparse.Namespace) -> int:
    from bench.config.paths import input_problem, output_problem, require

    require([input_problem("RESULTS", args.results), output_problem("-o/--out", args.out, "folder")])
    from bench.analysis.gc_pause import gc_paused
    from bench.present.report.render import FigureWorkers

    # Started first: they import matplotlib on another core while this process reads the records.
    with gc_paused(), FigureWorkers.start() as figure_workers:  # loading keeps one object graph per record
        return _report(Path(args.results), Path(args.out), args.title, figure_workers)


def _report(results: Path, out: Path, title: str | None, figure_workers) -> int:
    from bench.analysis.preflight import load_preflights
    from bench.analysis.sources import load_results
    from bench.present.report.build import write_report

    try:
        records, problems, point_dirs = load_results(results)
    except ValueError as exc:
        print(f"results: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"report: skipped {problem.path}: {problem.reason}", file=sys.stderr)
    if not records:
        print(f"results: no readable result records in {results} ({len(problems)} unreadable)", file=sys.stderr)
        return 2
    reproduce = [f"fsdp-bench report {shlex.quote(str(results))} -o {shlex.quote(str(out))}"]
    preflights, unreadable = load_preflights(results)
    for path, reason in unreadable:
        print(f"report: skipped {path}: {reason}", file=sys.stderr)
    found = {"problems": problems, "point_dirs": point_dirs, "preflights": preflights}
    page = write_report(records, out, title=title, reproduce=reproduce, figure_workers=figure_workers, **found)
    ok = sum(r.status == "ok" for r in records)
    print(f"report: {page} ({len(records)} points: {ok} ok, {len(records) - ok} not ok)")
    return 0
