"""`fsdp-bench store {add,rebuild,copy,export,stats} [--store STORE]`: the results store.

The store (bench/analysis/store/) is what `fsdp-bench history` reads: every night's results folder, from
any cluster, added to one store: an SQLite file (a path, the default) or a PostgreSQL database a team
shares (a `postgresql://` URL), named by --store or FSDP_BENCH_STORE. Adding is idempotent (a record already stored is left as it is);
each stored record keeps its run time, git sha and environment. Preflight records found under
RESULTS (`<sweep>/_preflight/<shape>/preflight.json`) are added beside them, so history can list
the cluster's measured links over time.

- `add RESULTS...`: ingest every result.json under each RESULTS (folders at any level, or files).
- `rebuild RESULTS...`: drop the store and index the JSON records again (they are the truth).
- `copy SRC DST`: every row of one store into another (SQLite to PostgreSQL and back), idempotent,
  verified by the rows' content hashes.
- `export OUT`: the latest record per point as a table (`.csv` or `.parquet`, as results.csv).
- `stats`: how many records and preflights the store holds.

A store is printed with its password masked. Exit 0, 1 when some records were refused (each named on
stderr, the others added) or the disk (the database server's too) is full or read-only (one line), 2 on
bad input (a RESULTS path that does not exist, a --store that is not a store, an unknown URL scheme,
a server that cannot be reached or refuses the credentials, no driver), before anything is added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import STORE_DEFAULT_HELP, default_store

HELP = "the results store that `history` reads (SQLite or PostgreSQL): add (idempotent), rebuild, copy, export, stats"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = sub.add_parser("add", help="ingest every result.json under RESULTS (folders or files)")
    add.add_argument("results", nargs="+", metavar="RESULTS", help="results folders (any level) or result.json files")
    rebuild = sub.add_parser("rebuild", help="drop the store and index the JSON records under RESULTS again")
    rebuild.add_argument("results", nargs="+", metavar="RESULTS", help="every results folder the store should hold")
    export = sub.add_parser("export", help="write the latest record per point as .csv or .parquet")
    export.add_argument("out", metavar="OUT", help="the table to write: a .csv or .parquet file")
    stats = sub.add_parser("stats", help="count the stored records and preflights")
    for action, created in ((add, True), (rebuild, True), (export, False), (stats, False)):
        what = (
            f"the store: a path or a postgresql:// URL (default: {STORE_DEFAULT_HELP}{'; created' if created else ''})"
        )
        action.add_argument("--store", help=what)
    copy = sub.add_parser("copy", help="copy every record and preflight of the store SRC into the store DST")
    copy.add_argument("source", metavar="SRC", help="the store to copy: a path or a postgresql:// URL")
    copy.add_argument("destination", metavar="DST", help="the store to copy into (created where missing)")


def main(args: argparse.Namespace) -> int:
    from bench.analysis.gc_pause import gc_paused

    with gc_paused():  # every record read is kept until its rows are written (bench/analysis/gc_pause.py)
        return _store(args)


def _store(args: argparse.Namespace) -> int:
    from bench.analysis import store
    from bench.analysis.store.location import masked, store_problem
    from bench.config.paths import input_problem, require
    from bench.config.problems import ConfigError

    action = args.action
    if action == "copy":
        return _copy(args.source, args.destination)
    location = args.store or default_store()
    path = masked(location)  # what is printed
    require(
        [store_problem("--store", location, create=action in ("add", "rebuild"))]
        + [input_problem("RESULTS", root) for root in getattr(args, "results", [])]
        + [export_problem(args.out, store.EXPORT_FORMATS) if action == "export" else None]
    )  # fmt: skip
    try:
        if action == "export":
            print(f"store {path}: wrote {store.export(location, args.out)}")
            return 0
        if action == "stats":
            counted = store.stats(location)
            print(f"store {path}: {counted.records} records, {counted.preflights} preflights (schema {counted.schema})")
            return 0
        report = (store.add if action == "add" else store.rebuild)(location, args.results)
    except store.StoreError as exc:
        raise ConfigError([f"--store: {exc}"]) from None
    for problem in report.problems:
        print(f"store {action}: skipped {problem.path}: {problem.reason}", file=sys.stderr)
    preflights = (
        f"; preflights: {report.preflights_added} added, {report.preflights_unchanged} already stored"
        if report.preflights_added or report.preflights_unchanged
        else ""
    )
    print(
        f"store {path}: {report.added} added, {report.unchanged} already stored, "
        f"{len(report.problems)} refused; {report.total} records in all{preflights}"
    )
    return 1 if report.problems else 0


def _copy(source: str, destination: str) -> int:
    from bench.analysis import store
    from bench.analysis.store.location import masked, store_problem
    from bench.config.paths import require
    from bench.config.problems import ConfigError

    require([store_problem("SRC", source), store_problem("DST", destination, create=True)])
    try:
        copied = store.copy(source, destination)
    except store.StoreError as exc:
        raise ConfigError([f"store copy: {exc}"]) from None
    print(
        f"store copy {masked(source)} -> {masked(destination)}: {copied.added} added, {copied.unchanged} already "
        f"stored; preflights: {copied.preflights_added} added, {copied.preflights_unchanged} already stored; "
        f"{copied.total} records, {copied.preflights_total} preflights in {masked(destination)}"
    )
    return 0


def export_problem(out: str, formats: tuple[str, ...]) -> str | None:
    from bench.config.paths import output_problem

    if Path(out).suffix not in formats:
        return f"OUT: {out}: unknown format '{Path(out).suffix}'; allowed: {', '.join(formats)}"
    return output_problem("OUT", out, "file")
