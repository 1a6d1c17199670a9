"""The results store: an index over result records, in an SQLite file (the embedded default) or a
PostgreSQL database a team shares, opened by one function from a location (location.py: a path or
a `postgresql://` URL).

The JSON records stay the source of truth (they travel across shared filesystems and object
stores); a store indexes them by point id, sweep, spec fields, status and environment fingerprint,
and can be rebuilt from them at any time (`rebuild`).

- Idempotent: a row is keyed by (point_id, content_hash); ingesting the same record twice
  changes nothing, while a re-measurement of a point (new numbers) is kept beside the old.
- Bad input: a record with an unknown schema version or invalid content is reported as a
  problem (file and one-line reason) and skipped, never half-ingested; a location that is not a
  store (a foreign file or database, a newer store, an unknown scheme, a server that cannot be
  reached) is a StoreError of one line naming it, its password masked.
- Preflights: `preflight.json` records (<sweep>/_preflight/<shape>/, bench/analysis/preflight.py) found
  under an ingested folder go to their own table, idempotently alike, so the cluster's measured
  links can be followed over time (`fsdp-bench history` lists them).
- Records last: each row keeps the whole record's JSON, read back through the record's (and the
  preflight record's) versioned path, migration on read (bench/schema/files.py `Versioned`); the
  store's own schema is versioned in each back-end.

Modules: location.py (path or URL, masking), rows.py (what a row holds), base.py (what every store
does), sqlite.py and postgres.py (the back-ends). Command line: `fsdp-bench store
{add,rebuild,copy,export,stats}` (bench/cli/commands/store.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.analysis.store import postgres, sqlite
from bench.analysis.store.base import Store, StoreError
from bench.analysis.store.location import is_url, masked
from bench.analysis.store.rows import (
    COLUMNS,
    PREFLIGHT_COLUMNS,
    PREFLIGHT_KEY,
    RESULT_KEY,
    STORE_SCHEMA_VERSION,
    IngestReport,
    content_hash,
)
from bench.analysis.store.sqlite import SQLiteStore

__all__ = [
    "STORE_SCHEMA_VERSION", "IngestReport", "SQLiteStore", "Store", "StoreError", "add", "content_hash", "copy",
    "export", "is_store", "open_existing", "open_store", "rebuild", "stats",
]  # fmt: skip

# What `export` writes, by the file's suffix.
EXPORT_FORMATS = (".csv", ".parquet")


def open_store(location: str | Path, *, create: bool = False) -> Store:
    """The store at `location` (a path: SQLite; a postgresql:// URL: PostgreSQL), created where there is
    none yet when `create`, migrated when older; StoreError for one that is not a store (a foreign file
    or database, a newer store, a server that cannot be reached), naming it with its password masked."""
    if is_url(location):
        return postgres.PostgresStore(str(location), create=create)
    return sqlite.opened(Path(location), create=create)


def open_existing(location: str | Path) -> Store:
    """An existing store, opened (migrated if older) only when it is one (StoreError otherwise:
    opening a foreign file or database would create the tables in it)."""
    return open_store(location)


def is_store(location: str | Path) -> bool:
    """True for a database URL (opening it says whether a store is there) and for an SQLite database
    file (checked by its header, not its name)."""
    return is_url(location) or sqlite.is_store(Path(location))


def add(location: str | Path, roots: Sequence[Path | str]) -> IngestReport:
    """Ingest every record under each of `roots` into the store (created if missing); the report's
    `total` is the store's record count after it. StoreError when the location holds no store."""
    store, report = open_store(location, create=True), IngestReport()
    for root in roots:
        report.merge(store.ingest_paths(root))
    report.total = store.count()
    return report


def rebuild(location: str | Path, roots: Sequence[Path | str]) -> IngestReport:
    """Recreate the store from the JSON records under `roots` (the records are the truth): an SQLite
    file is deleted, a database's store tables dropped (never the database). StoreError when the
    location holds something else than a store (it is left as it is)."""
    if is_url(location):
        postgres.drop(str(location))
    else:
        sqlite.remove(Path(location))
    return add(location, roots)


@dataclass(frozen=True)
class StoreStats:
    records: int
    preflights: int
    schema: int


def stats(location: str | Path) -> StoreStats:
    """How many records and preflights an existing store holds (StoreError if it is not one)."""
    store = open_existing(location)
    return StoreStats(store.count(), store.count_preflights(), store.schema_version())


def export(location: str | Path, out: Path | str, **where: object) -> Path:
    """Write the stored records' per-point table (with efficiencies, as results.csv) as CSV or Parquet."""
    from bench.analysis.report.export import write_csv, write_parquet
    from bench.analysis.report.views import analyse

    out = Path(out)
    writers = dict(zip(EXPORT_FORMATS, (write_csv, write_parquet)))
    if out.suffix not in writers:
        raise ValueError(f"export: unknown format '{out.suffix}'; allowed: {', '.join(EXPORT_FORMATS)}")
    records, _ = open_existing(location).records(**where)
    return writers[out.suffix](analyse(records).points, out)


@dataclass(frozen=True)
class CopyReport:
    """What `copy` did: rows added to the destination and rows it held already, per table, and the
    destination's counts after it."""

    added: int
    unchanged: int
    preflights_added: int
    preflights_unchanged: int
    total: int
    preflights_total: int


def copy(source: str | Path, destination: str | Path) -> CopyReport:
    """Every row of the store at `source` (results and preflights) into the store at `destination`
    (created where missing), as they are: idempotent (a row already there is left), in the source's
    order. Verified: every source row's key (its content hash) is in the destination afterwards
    (StoreError naming what is missing otherwise)."""
    same = str(source) == str(destination)
    if not (same or is_url(source) or is_url(destination)):
        same = Path(source).resolve() == Path(destination).resolve()
    if same:
        raise StoreError(f"{masked(source)}: the source and the destination are the same store")
    src = open_existing(source)
    dst = open_store(destination, create=True)
    counts = []
    for table, columns, key in (("results", COLUMNS, RESULT_KEY), ("preflights", PREFLIGHT_COLUMNS, PREFLIGHT_KEY)):
        rows = src.rows_in_order(table, columns)
        added = dst.insert_batches(table, columns, rows)
        at = [columns.index(column) for column in key]
        wanted = {tuple(row[i] for i in at) for row in rows}
        held = set(dst.rows_in_order(table, key))
        if missing := wanted - held:
            raise StoreError(f"{dst.name}: {len(missing)} {table} row(s) of {src.name} missing after the copy")
        counts += [added, len(rows) - added]
    return CopyReport(*counts, dst.count(), dst.count_preflights())
