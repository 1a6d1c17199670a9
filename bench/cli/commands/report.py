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
    parser.add_argument(
        "--no-cache",
        dest="keep",
        action="store_false",
        help="read every record, and keep no rows for the next report (by default a folder's rows are kept in "
        "$FSDP_BENCH_CACHE_DIR, else $XDG_CACHE_HOME/fsdp-bench, else ~/.cache/fsdp-bench, and only new or "
        "changed records are read again)",
    )


def main(args: argparse.Namespace) -> int:
    from bench.config.paths import input_problem, output_problem, require

    require([input_problem("RESULTS", args.results), output_problem("-o/--out", args.out, "folder")])
    from bench.analysis import folder_listing
    from bench.analysis.gc_pause import gc_paused

    # The folder listed by a process of its own while this one imports the record schema
    # (bench/analysis/folder_listing.py); then the folder's kept rows and the reader, forked with the
    # list (bench/analysis/report_reader.py), before this process imports pandas; then the figure
    # workers, which import matplotlib at a lower priority than the two readers
    # (reports/report/render.py), forked once this process has imported the report's modules,
    # which the figures import too (0.13-0.2 s of CPU each would import again). Loading keeps one
    # object graph per record: no GC.
    listing = folder_listing.start(args.results, args.keep) if Path(args.results).is_dir() else None
    with gc_paused():
        try:
            from bench.analysis.report_reader import ReportLoader

            loader = ReportLoader.start(args.results, keep=args.keep, listing=listing)
        except BaseException:  # the listing process is the loader's once it starts: stopped here otherwise
            if listing is not None:
                listing.close()
            raise
        with loader:
            import reports.report.build  # noqa: F401
            from reports.report.render import FigureWorkers

            with FigureWorkers.start() as figure_workers:
                return _report(loader, Path(args.results), Path(args.out), args.title, figure_workers)


def _report(loader, results: Path, out: Path, title: str | None, figure_workers) -> int:
    from bench.analysis.preflight import load_preflights
    from reports.report.build import write_report

    try:
        loaded = loader.load()
    except ValueError as exc:
        print(f"results: {exc}", file=sys.stderr)
        return 2
    for problem in loaded.problems:
        print(f"report: skipped {problem.path}: {problem.reason}", file=sys.stderr)
    found = loaded.digest
    if not len(found):
        print(f"results: no readable result records in {results} ({len(loaded.problems)} unreadable)", file=sys.stderr)
        return 2
    reproduce = [f"fsdp-bench report {shlex.quote(str(results))} -o {shlex.quote(str(out))}"]
    preflights, unreadable = load_preflights(results, loaded.preflight_files)
    for path, reason in unreadable:
        print(f"report: skipped {path}: {reason}", file=sys.stderr)
    extra = {"problems": loaded.problems, "point_dirs": loaded.point_dirs, "preflights": preflights}
    page = write_report(found, out, title=title, reproduce=reproduce, figure_workers=figure_workers, **extra)
    print(f"report: {page} ({len(found)} points: {found.ok} ok, {len(found) - found.ok} not ok)")
    return 0
