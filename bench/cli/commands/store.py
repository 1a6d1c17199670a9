"""`fsdp-bench store {add,rebuild,export,stats} [--store PATH]`: the SQLite results store.

The store (bench/analysis/store.py) is what `fsdp-bench history` reads: every night's results folder, from
any cluster, added to one file. Adding is idempotent (a record already stored is left as it is);
each stored record keeps its run time, git sha and environment. Preflight records found under
RESULTS (`<sweep>/_preflight/<shape>/preflight.json`) are added beside them, so history can list
the cluster's measured links over time.

- `add RESULTS...`: ingest every result.json under each RESULTS (folders at any level, or files).
- `rebuild RESULTS...`: drop the store and index the JSON records again (they are the truth).
- `export OUT`: the latest record per point as a table (`.csv` or `.parquet`, as results.csv).
- `stats`: how many records and preflights the store holds.

Exit 0, 1 when some records were refused (each named on stderr, the others added) or the disk is
full or read-only (one line), 2 on bad input (a RESULTS path that does not exist, a --store that
is not a store), before anything is added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import DEFAULT_STORE

HELP = "the SQLite results store that `history` reads: add (idempotent), rebuild, export, stats"


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
        what = f"the store file (default: {DEFAULT_STORE}{'; created' if created else ''})"
        action.add_argument("--store", default=DEFAULT_STORE, help=what)


def main(args: argparse.Namespace) -> int:
    from bench.analysis.gc_pause import gc_paused

    with gc_paused():  # every record read is kept until its rows are written (bench/analysis/gc_pause.py)
        return _store(args)


def _store(args: argparse.Namespace) -> int:
    from bench.analysis import store
    from bench.config.paths import input_problem, output_problem, require
    from bench.config.problems import ConfigError

    path, action = Path(args.store), args.action
    require(
        [output_problem("--store", path, "file") if action in ("add", "rebuild") else input_problem("--store", path, "file")]
        + [input_problem("RESULTS", root) for root in getattr(args, "results", [])]
        + [export_problem(args.out, store.EXPORT_FORMATS) if action == "export" else None]
    )  # fmt: skip
    try:
        if action == "export":
            print(f"store {path}: wrote {store.export(path, args.out)}")
            return 0
        if action == "stats":
            counted = store.stats(path)
            print(f"store {path}: {counted.records} records, {counted.preflights} preflights (schema {counted.schema})")
            return 0
        report = (store.add if action == "add" else store.rebuild)(path, args.results)
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


def export_problem(out: str, formats: tuple[str, ...]) -> str | None:
    from bench.config.paths import output_problem

    if Path(out).suffix not in formats:
        return f"OUT: {out}: unknown format '{Path(out).suffix}'; allowed: {', '.join(formats)}"
    return output_problem("OUT", out, "file")
