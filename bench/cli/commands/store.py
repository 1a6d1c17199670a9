"""`fsdp-bench store add RESULTS... [--store PATH]`: accumulate result records in the SQLite store.

The store (bench/analysis/store.py) is what `fsdp-bench history` reads: every night's results folder, from
any cluster, added to one file. Adding is idempotent (a record already stored is left as it is);
each stored record keeps its run time, git sha and environment. Preflight records found under
RESULTS (`<sweep>/_preflight/<shape>/preflight.json`) are added beside them, so history can list
the cluster's measured links over time. Exit 0, 1 when some records were
refused (each named on stderr, the others added), 2 on bad input (a RESULTS path that does not
exist, a store that cannot be opened), before anything is added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import DEFAULT_STORE

HELP = "add results folders to the SQLite results store that `history` reads (idempotent)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = sub.add_parser("add", help="ingest every result.json under RESULTS (folders or files)")
    add.add_argument("results", nargs="+", metavar="RESULTS", help="results folders (any level) or result.json files")
    add.add_argument("--store", default=DEFAULT_STORE, help=f"the store file (default: {DEFAULT_STORE}; created)")


def main(args: argparse.Namespace) -> int:
    import sqlite3

    from bench.analysis.store import IngestReport, ResultStore, is_store

    missing = [path for path in args.results if not Path(path).exists()]
    if missing:
        print(f"store add: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    store_path = Path(args.store)
    if store_path.exists() and not is_store(store_path):
        print(f"store add: --store {store_path}: exists and is not an SQLite store", file=sys.stderr)
        return 2
    report = IngestReport()
    try:
        store = ResultStore(store_path)
        for root in args.results:
            report.merge(store.ingest_paths(root))
        total = store.count()
    except (ValueError, sqlite3.DatabaseError, OSError) as exc:
        print(f"store add: {exc}", file=sys.stderr)
        return 2
    for problem in report.problems:
        print(f"store add: skipped {problem.path}: {problem.reason}", file=sys.stderr)
    preflights = (
        f"; preflights: {report.preflights_added} added, {report.preflights_unchanged} already stored"
        if report.preflights_added or report.preflights_unchanged
        else ""
    )
    print(
        f"store {store_path}: {report.added} added, {report.unchanged} already stored, "
        f"{len(report.problems)} refused; {total} records in all{preflights}"
    )
    return 1 if report.problems else 0
