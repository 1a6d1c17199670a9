"""Benchmark: `fsdp-bench store add` of 10,000 result records into a new store (target: under 5 s).

Writes ten nights of a 1,000-configuration nightly sweep as result.json files into a temporary
folder (benchmarks/nightly.py; not timed), then times the real command line,
`fsdp-bench store add RESULTS --store S`, into a fresh store per run, end to end: interpreter start,
finding, reading and validating every record, and indexing them in SQLite. Each run's store must
hold every record.

    .venv/bin/python benchmarks/bench_store.py                       # 10,000 records, 3 timed runs
    .venv/bin/python benchmarks/bench_store.py --series 20 --nights 2 --runs 1

    .venv/bin/python benchmarks/bench_store.py --store 'postgresql://ci@127.0.0.1:5432/bench{run}'

`--store` names each run's store, `{run}` its number (default: a new SQLite file per run in the
temporary folder); a postgresql:// URL's databases must exist and be empty (createdb bench0 ...).
Prints each run's wall and CPU time and the medians (benchmarks/timing.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nightly import parse_args, write_nights
from timing import Prepared, run_benchmark

from bench.analysis.store import open_store


def prepare(folder: Path, args: argparse.Namespace) -> Prepared:
    """The nights under `folder`; adding them to a new store of each run's own is what is timed."""
    results = folder / "results"
    written = write_nights(results, args.series, args.nights)

    store = args.store or str(folder / "store{run}.sqlite")

    def stored_all(run: int) -> None:  # each run's store holds every record
        stored = open_store(store.format(run=run)).count()
        if stored != written:
            raise SystemExit(f"bench_store: the store holds {stored} records, not {written}")

    argv = ["store", "add", str(results), "--store", store]
    return Prepared(argv, (0,), f"{written} records written to {results}", stored_all)


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="each run's store, {run} its number (default: a new SQLite file per run)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, nights="results folders, one per night", extra=_store_option)
    run_benchmark("bench_store", prepare, args, f"store add of {args.series * args.nights} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
