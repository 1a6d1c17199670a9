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
        "results",
        metavar="RESULTS",
        help="a results folder (any level) or an fsdp-bench store (a .sqlite file or a postgresql:// URL)",
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
    from bench.analysis.store.location import parsed, records_problem
    from bench.config.paths import output_problem, require

    require([records_problem("RESULTS", args.results), output_problem("-o/--out", args.out, "folder")])
    from bench.analysis.folder_listing import listed
    from bench.analysis.gc_pause import gc_paused
    from bench.analysis.pool import warm, worker_pool
    from bench.schema.protocol_names import RESULT_FILE
    from reports.report.render import FIGURE_MODULES, pays

    results = parsed(args.results)  # a path, or a store's URL as given
    # A folder is listed first: a big one's reading and figures are tasks of a pool of worker processes
    # (bench/analysis/pool.py), started at once, so that it imports what they need while this process
    # imports its own. A store's or a record's records are read here; the figures of any report of 1,000
    # points or more are drawn by the pool, of a smaller one here.
    listing = listed(results, args.keep) if isinstance(results, Path) and results.is_dir() else None
    pooled = ("bench.analysis.report.reading", *FIGURE_MODULES)  # what the pool's tasks import
    with gc_paused(), worker_pool(pooled) as pool:  # loading keeps one object graph per record: no GC
        if listing is not None and pays(len(listing[0][RESULT_FILE])):
            warm(pool)
        return _report(results, Path(args.out), args.title, args.keep, pool, listing)


def _report(results: Path | str, out: Path, title: str | None, keep: bool, pool, listing) -> int:
    # Imported first (pandas, Jinja2, the report's modules): a big folder's pool imports what its
    # tasks need meanwhile, before they read.
    from reports.report.build import write_report  # isort: skip
    from bench.analysis.preflight import load_preflights
    from bench.analysis.report.reading import loaded as records_loaded
    from bench.analysis.report.reading import read_folder
    from bench.analysis.sources import load_results
    from bench.analysis.store.location import masked

    try:
        if listing is not None:
            loaded = read_folder(results, keep=keep, pool=pool, listing=listing)
        else:  # a store or one result.json (ValueError where it is neither)
            loaded = records_loaded(*load_results(results))
    except ValueError as exc:
        print(f"results: {exc}", file=sys.stderr)
        return 2
    for problem in loaded.problems:
        print(f"report: skipped {problem.path}: {problem.reason}", file=sys.stderr)
    found = loaded.digest
    if not len(found):
        print(
            f"results: no readable result records in {masked(results)} ({len(loaded.problems)} unreadable)",
            file=sys.stderr,
        )
        return 2
    reproduce = [f"fsdp-bench report {shlex.quote(masked(results))} -o {shlex.quote(str(out))}"]
    preflights, unreadable = load_preflights(results, loaded.preflight_files)
    for path, reason in unreadable:
        print(f"report: skipped {path}: {reason}", file=sys.stderr)
    extra = {"problems": loaded.problems, "point_dirs": loaded.point_dirs, "preflights": preflights}
    page = write_report(found, out, title=title, reproduce=reproduce, pool=pool, **extra)
    print(f"report: {page} ({len(found)} points: {found.ok} ok, {len(found) - found.ok} not ok)")
    return 0
