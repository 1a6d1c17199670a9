"""The results store: an SQLite index over result records (stdlib sqlite3, WAL mode).

The JSON records stay the source of truth (they travel across shared filesystems and object
stores); this database indexes them by point id, sweep, spec fields, status and environment
fingerprint, and can be rebuilt from them at any time (`rebuild`).

- Idempotent: a row is keyed by (point_id, content_hash); ingesting the same record twice
  changes nothing, while a re-measurement of a point (new numbers) is kept beside the old.
- Concurrent writers: WAL lets readers proceed during a write; writers take the lock with
  BEGIN IMMEDIATE and wait up to BUSY_TIMEOUT_S, so parallel sweeps lose nothing.
- Bad input: a record with an unknown schema version or invalid content is reported as a
  problem (file and one-line reason) and skipped, never half-ingested.
- Preflights: `preflight.json` records (<sweep>/_preflight/<shape>/, bench/analysis/preflight.py) found
  under an ingested folder go to their own table, idempotently alike, so the cluster's measured
  links can be followed over time (`fsdp-bench history` lists them).
- Records last: each row keeps the whole record's JSON, read back through the record's (and the
  preflight record's) versioned path, migration on read (bench/schema/files.py `Versioned`). The
  store's own table is versioned (PRAGMA user_version): an older store is migrated in place when
  opened (STORE_MIGRATIONS, stepped by the same `Versioned`), a newer one is refused with a
  message to rebuild it from the JSON records.

Command line: `fsdp-bench store {add,rebuild,export,stats}` (bench/cli/commands/store.py).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from bench.analysis.records import RESULT_FILE, RecordProblem, files_named, parse_record, read_record
from bench.config.paths import nearest_existing, read_only_error
from bench.schema.files import Versioned, VersionError
from bench.schema.metrics import PathReader, shown_in
from bench.schema.metrics import columns as metric_columns
from bench.schema.migrations import PREFLIGHT
from bench.schema.preflight import PreflightResult
from bench.schema.protocol import PREFLIGHT_RECORD
from bench.schema.record import RunResult

# 2: the git sha of each run as a column, and an index by start time (history's order).
# 3: the preflights table. 4: rows keyed by the migrated record. 5: the content hash of the model's
# own JSON (content_hash), rows and preflights rekeyed.
STORE_SCHEMA_VERSION = 5
# Parallel sweeps on one store wait for each other's short write transactions; 60 s is far
# beyond any one batch (a few hundred small rows) yet still fails loudly on a stuck writer.
BUSY_TIMEOUT_S = 60.0
# Records per write transaction: small enough that concurrent writers interleave, large
# enough that ingesting thousands of records is not dominated by commits.
BATCH_SIZE = 200
# Rows from which an ingest into an empty store is one transaction with the indexes built after the
# rows (`bulk_insert`): a first ingest of a results folder, or a rebuild.
BULK_ROWS = 1000
SQLITE_MAGIC = b"SQLite format 3\x00"
# Free space under which SQLite's "disk I/O error" means a full disk (it needs a few pages to go on).
NEARLY_FULL_BYTES = 1 << 20
# What `export` writes, by the file's suffix.
EXPORT_FORMATS = (".csv", ".parquet")

# The metric columns (bench/schema/metrics.py: the metrics whose views include "store"). A metric added
# to them changes the table: it needs a STORE_MIGRATIONS step that adds and fills its column.
_METRICS = shown_in("store")
_COLUMNS = [
    "point_id", "content_hash", "sweep", "status", "error", "model", "strategy", "precision", "cluster",
    "launcher", "nodes", "gpus_per_node", "world_size", "micro_batch", "grad_accum", "seq_len", "repeat",
    *(m.key for m in _METRICS), "env_fingerprint", "started_at", "finished_at", "source", "ingested_at", "record",
    "git_sha",
]  # fmt: skip

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS results (
    point_id TEXT NOT NULL, content_hash TEXT NOT NULL, sweep TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
    model TEXT, strategy TEXT, precision TEXT, cluster TEXT, launcher TEXT, nodes INTEGER, gpus_per_node INTEGER,
    world_size INTEGER, micro_batch INTEGER, grad_accum INTEGER, seq_len INTEGER, repeat INTEGER,
    """
    + "".join(f"{m.key} {m.store_type}, " for m in _METRICS)
    + """env_fingerprint TEXT,
    started_at TEXT, finished_at TEXT, source TEXT, ingested_at TEXT NOT NULL, record TEXT NOT NULL,
    git_sha TEXT,
    PRIMARY KEY (point_id, content_hash)
);
CREATE INDEX IF NOT EXISTS results_sweep ON results (sweep, point_id);
CREATE INDEX IF NOT EXISTS results_status ON results (status);
CREATE INDEX IF NOT EXISTS results_config ON results (model, strategy, precision, cluster, nodes);
CREATE INDEX IF NOT EXISTS results_env ON results (env_fingerprint);
CREATE INDEX IF NOT EXISTS results_time ON results (started_at);
"""
    + (
        _PREFLIGHTS := """
CREATE TABLE IF NOT EXISTS preflights (
    sweep TEXT NOT NULL, shape TEXT NOT NULL, content_hash TEXT NOT NULL, status TEXT NOT NULL, cluster TEXT,
    nodes INTEGER, gpus_per_node INTEGER, started_at TEXT, source TEXT, ingested_at TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (sweep, shape, content_hash)
);
CREATE INDEX IF NOT EXISTS preflights_time ON preflights (started_at);
"""
    )
)


def _rekey_results(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Rows keyed as today's code keys them: a record stored before it was migrated on read (schema 1
    rows hold the record as written), or hashed by an older rule (before schema 5), gets the point id
    and content hash of its migrated form, so ingesting the same result.json again finds it instead
    of storing it twice."""
    rows = conn.execute("SELECT rowid, point_id, content_hash, record FROM results").fetchall()
    for rowid, point_id, old_hash, blob in rows:
        try:
            record = parse_record(json.loads(blob))
        except ValueError:
            continue  # unreadable today: left as stored (records() reports it)
        text = record.model_dump_json()
        key = (record.point_id, _hash(text))
        if key == (point_id, old_hash):
            continue
        if conn.execute("SELECT 1 FROM results WHERE point_id = ? AND content_hash = ?", key).fetchone():
            conn.execute("DELETE FROM results WHERE rowid = ?", (rowid,))  # the same record, stored twice
        else:
            conn.execute(
                "UPDATE results SET point_id = ?, content_hash = ?, record = ? WHERE rowid = ?", (*key, text, rowid)
            )
    return conn


def _rekey_preflights(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Preflight rows keyed by today's content hash (schema 5), duplicates dropped, as `_rekey_results`."""
    rows = conn.execute("SELECT rowid, sweep, shape, content_hash, record FROM preflights").fetchall()
    for rowid, sweep, shape, old_hash, blob in rows:
        try:
            text = PREFLIGHT.parse(json.loads(blob)).model_dump_json()
        except ValueError:
            continue
        key = (sweep, shape, _hash(text))
        if key[2] == old_hash:
            continue
        if conn.execute("SELECT 1 FROM preflights WHERE sweep = ? AND shape = ? AND content_hash = ?", key).fetchone():
            conn.execute("DELETE FROM preflights WHERE rowid = ?", (rowid,))
        else:
            conn.execute("UPDATE preflights SET content_hash = ?, record = ? WHERE rowid = ?", (key[2], text, rowid))
    return conn


def _sql(script: str) -> Callable[[sqlite3.Connection], sqlite3.Connection]:
    """A migration step that runs `script`'s statements on the connection."""

    def step(conn: sqlite3.Connection) -> sqlite3.Connection:
        for statement in filter(str.strip, script.split(";")):
            conn.execute(statement)
        return conn

    return step


# Store schema n -> n + 1, run in one write transaction when an older store is opened (the steps
# of a connection, through the same versioned path as every file: bench/schema/files.py). Each
# step derives what it changes from the stored record JSON (the truth), so nothing is lost or re-read.
STORE_MIGRATIONS = {
    1: _sql("""
ALTER TABLE results ADD COLUMN git_sha TEXT;
UPDATE results SET git_sha = json_extract(record, '$.env.git_sha');
CREATE INDEX IF NOT EXISTS results_time ON results (started_at);
"""),
    2: _sql(_PREFLIGHTS),
    3: _rekey_results,
    4: lambda conn: _rekey_preflights(_rekey_results(conn)),
}
STORE = Versioned("store", current=STORE_SCHEMA_VERSION, steps=STORE_MIGRATIONS)


@dataclass
class IngestReport:
    """What one ingest did: rows added, records already present, and records refused."""

    added: int = 0
    unchanged: int = 0
    problems: list[RecordProblem] = field(default_factory=list)
    preflights_added: int = 0
    preflights_unchanged: int = 0
    total: int = 0  # records in the store after the ingest (set by `add`)

    def merge(self, other: IngestReport) -> None:
        self.added += other.added
        self.unchanged += other.unchanged
        self.problems += other.problems
        self.preflights_added += other.preflights_added
        self.preflights_unchanged += other.preflights_unchanged


def content_hash(record: RunResult | PreflightResult) -> str:
    """sha256 of the record's own JSON (the model's serialization, fields in the model's order): equal
    records, equal hash, whatever the key order on disk. The stored `record` column is that same
    text, so a row is serialized once (sorting the keys first cost four times the serialization)."""
    return _hash(record.model_dump_json())


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def env_fingerprint(record: RunResult) -> str:
    """A short hash of what makes results comparable (software and device, not hosts)."""
    return _fingerprint_hash(record.env.fingerprint())


def _fingerprint_of(fingerprint: dict, known: dict[tuple, str]) -> str:
    """`env_fingerprint`'s hash of an environment's fingerprint, looked up in `known` (one batch's)."""
    key = tuple(fingerprint.values())
    found = known.get(key)
    if found is None:
        found = known[key] = _fingerprint_hash(fingerprint)
    return found


def _fingerprint_hash(fingerprint: dict) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]


def is_store(path: Path) -> bool:
    """True when `path` is an SQLite database file (checked by its header, not its name)."""
    path = Path(path)
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def schema_version(path: Path) -> int:
    """The store schema version of an existing SQLite file, read without writing (0: not a store yet)."""
    return int(_read(path, "PRAGMA user_version")[0][0])


def _read(path: Path, sql: str) -> list[tuple]:
    """Rows of one query on an existing SQLite file, opened read-only (a disk that takes no writes
    still fails a WAL store's shared-memory file: storage_fault says so)."""
    try:
        conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        _raise_storage_fault(exc, Path(path))
        raise


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode, retrying while another process holds it.

    The journal-mode switch takes an exclusive lock and SQLite answers "database is locked" at once
    instead of waiting out busy_timeout, so two processes opening a new store together would race.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class StoreError(ValueError):
    """A path given as a store that cannot be read as one (one line; the CLI exits 2)."""


def storage_fault(exc: sqlite3.Error, path: Path) -> OSError | None:
    """SQLite's words for a disk that takes no writes, as the OSError every other write raises there
    (so the CLI says it in bench/run/ownership/storage.py's one line, exit 1), or None.

    "database or disk is full" (SQLITE_FULL) is ENOSPC (SQLite reports over-quota writes the same
    way), and so is a "disk I/O error" (SQLITE_IOERR_*: growing the WAL's shared-memory file, say)
    where the disk has next to no space left; a store on a read-only file system cannot even be
    opened (SQLITE_CANTOPEN, or SQLITE_READONLY), which is EROFS.
    """
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_FULL" or (name.startswith("SQLITE_IOERR") and _free_bytes(path) < NEARLY_FULL_BYTES):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_IOERR")):
        return read_only_error(path)
    return None


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(nearest_existing(path)).free
    except OSError:
        return NEARLY_FULL_BYTES


def _raise_storage_fault(exc: sqlite3.Error, path: Path) -> None:
    if fault := storage_fault(exc, path):
        raise fault from exc


class ResultStore:
    """An SQLite index of result records; one connection per call, safe across processes."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            _switch_to_wal(conn)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:  # a new file: create the table (IF NOT EXISTS: a concurrent creator may win)
                conn.executescript(_SCHEMA + f"PRAGMA user_version = {STORE_SCHEMA_VERSION};")
            elif version != STORE_SCHEMA_VERSION:
                try:
                    STORE.check(version)
                except VersionError:
                    raise ValueError(
                        f"store {self.path}: schema version {version}, this fsdp-bench reads up to "
                        f"{STORE_SCHEMA_VERSION}; rebuild it from the JSON records "
                        "(fsdp-bench store rebuild RESULTS... --store PATH)"
                    ) from None
                _migrate(conn, self.path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE below).
        # A disk that takes no writes raises as an OSError (storage_fault), as every other write does.
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.OperationalError as exc:
            _raise_storage_fault(exc, self.path)
            raise
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            yield conn
        except sqlite3.OperationalError as exc:
            _raise_storage_fault(exc, self.path)
            raise
        finally:
            conn.close()

    def ingest(self, records: Iterable[RunResult], source: str | None = None) -> IngestReport:
        """Insert records not yet present, BATCH_SIZE per write transaction."""
        records = list(records)
        rows = _rows(records, [source] * len(records))
        return self._insert_batches(rows, IngestReport())

    def ingest_paths(self, root: Path | str) -> IngestReport:
        """Ingest every result.json and preflight.json under `root` (or one file); unreadable records
        become problems."""
        root = Path(root)
        if root.is_file():
            single_preflight = root.name == PREFLIGHT_RECORD
            paths, preflight_paths = ([], [root]) if single_preflight else ([root], [])
        else:
            paths, preflight_paths = files_named(root, RESULT_FILE), files_named(root, PREFLIGHT_RECORD)
        report = IngestReport()
        rows = _result_rows(paths, report)
        preflight_rows = []
        if preflight_paths:
            from bench.analysis.preflight import read_preflight  # imports the planner's modules: only for preflights

            preflight_rows = _rows_of(
                preflight_paths, lambda path: _preflight_row(read_preflight(path), str(path)), report
            )
        if preflight_rows:
            added = self._insert_rows("preflights", _PREFLIGHT_COLUMNS, preflight_rows)
            report.preflights_added += added
            report.preflights_unchanged += len(preflight_rows) - added
        return self._insert_batches(rows, report)

    def _insert_batches(self, rows: Sequence[tuple], report: IngestReport) -> IngestReport:
        """BATCH_SIZE rows per write transaction, on one connection (each close of a WAL connection
        checkpoints: a connection per batch cost a checkpoint per 200 records); into an empty table,
        BULK_ROWS or more rows in one transaction, its indexes built after them (`bulk_insert`)."""
        with self._connect() as conn:
            if len(rows) >= BULK_ROWS and (added := bulk_insert(conn, rows)) is not None:
                report.merge(IngestReport(added=added, unchanged=len(rows) - added))
                return report
            for start in range(0, len(rows), BATCH_SIZE):
                batch = rows[start : start + BATCH_SIZE]
                added = _insert_rows(conn, "results", _COLUMNS, batch)
                report.merge(IngestReport(added=added, unchanged=len(batch) - added))
        return report

    def _insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> int:
        with self._connect() as conn:
            return _insert_rows(conn, table, columns, rows)

    def count(self, **where: object) -> int:
        """Rows matching column=value filters (e.g. count(status="ok"))."""
        clause, params = _where(where)
        with self._connect() as conn:
            return conn.execute(f"SELECT COUNT(*) FROM results{clause}", params).fetchone()[0]

    def count_preflights(self) -> int:
        with self._connect() as conn:
            return conn.execute("SELECT COUNT(*) FROM preflights").fetchone()[0]

    def records(self, latest_only: bool = True, **where: object) -> tuple[list[RunResult], list[RecordProblem]]:
        """Stored records (re-validated); by default the latest per (sweep, point id).

        A row that no longer validates (written by a newer fsdp-bench) is a problem, not an error.
        """
        clause, params = _where(where)
        with self._connect() as conn:
            rows = _in_order(conn, "sweep, point_id, source, record", clause, params)
        chosen = {(sweep, pid): (source, blob) for sweep, pid, source, blob in rows}
        selected = chosen.values() if latest_only else [(source, blob) for *_, source, blob in rows]
        records, problems = [], []
        for source, blob in selected:
            try:
                records.append(_stored_record(blob))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError too
                problems.append(RecordProblem(Path(source or self.path), f"stored record invalid: {exc}"))
        return records, problems

    def preflights(self) -> tuple[list[PreflightResult], list[RecordProblem]]:
        """Every stored preflight record (each measurement, also a rerun of a sweep's shape), oldest first."""
        sql = "SELECT source, record FROM preflights ORDER BY started_at, ingested_at"
        with self._connect() as conn:
            rows = conn.execute(sql).fetchall()
        records, problems = [], []
        for source, blob in rows:
            try:
                records.append(PREFLIGHT.parse(json.loads(blob)))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError too
                problems.append(RecordProblem(Path(source or self.path), f"stored preflight invalid: {exc}"))
        return records, problems

    def clear(self) -> None:
        with self._connect() as conn:
            conn.execute("DELETE FROM results")
            conn.execute("DELETE FROM preflights")


def _in_order(conn: sqlite3.Connection, columns: str, clause: str, params: Sequence[object]) -> list[tuple]:
    """`SELECT {columns} FROM results{clause} ORDER BY finished_at, ingested_at` (ties: rowid), in one
    read transaction: the order sorted over the rowids alone, then the rows fetched in the table's
    order and put in it (rows that carry their record text would make the sorter move every record's
    text)."""
    conn.execute("BEGIN")  # one snapshot for both statements
    try:
        sort = f"SELECT rowid FROM results{clause} ORDER BY finished_at, ingested_at, rowid"
        order = conn.execute(sort, params).fetchall()
        by_rowid = {row[0]: row[1:] for row in conn.execute(f"SELECT rowid, {columns} FROM results{clause}", params)}
    finally:
        conn.execute("COMMIT")
    return [by_rowid[rowid] for (rowid,) in order]


def _stored_record(blob: str) -> RunResult:
    """A stored record's JSON as today's RunResult. A row written by this schema holds the current
    version's JSON, which pydantic validates from the text directly (as bench/analysis/records.py reads
    a current result.json: several times faster than json.loads and validating the objects); anything
    else (an older row's version, a broken row) takes the migrating path, which reads it or says why not."""
    try:
        return RunResult.model_validate_json(blob)
    except ValidationError:
        return parse_record(json.loads(blob))


def _insert_rows(conn: sqlite3.Connection, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> int:
    """Insert rows not yet present in one write transaction; returns how many were new."""
    with _writing(conn):
        return _insert(conn, table, columns, rows)


def bulk_insert(conn: sqlite3.Connection, rows: Sequence[tuple]) -> int | None:
    """Insert the rows into an empty results table in one write transaction, its indexes dropped
    first and built again after the rows (as they were: from their own SQL text); returns how many
    were new, or None (nothing done) when the table holds rows already. Building an index once over
    sorted keys is cheaper than keeping five up to date row by row, and the WAL takes fewer pages.
    One transaction, so the store is never
    seen, or left, without them: readers keep the snapshot before it, a crash rolls it all back."""
    with _writing(conn):
        if conn.execute("SELECT 1 FROM results LIMIT 1").fetchone():
            return None
        indexes = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'results' AND sql IS NOT NULL"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        added = _insert(conn, "results", _COLUMNS, rows)
        for _, sql in indexes:
            conn.execute(sql)
        return added


@contextmanager
def _writing(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (BEGIN IMMEDIATE: the write lock taken at once, waiting out other
    writers), committed, or rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _insert(conn: sqlite3.Connection, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> int:
    """INSERT OR IGNORE the rows (inside a transaction); returns how many were new."""
    placeholders = ", ".join("?" * len(columns))
    sql = f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({placeholders})"
    before = conn.total_changes
    conn.executemany(sql, rows)
    return conn.total_changes - before


def _rows_of(paths: Sequence[Path], row: Callable[[Path], tuple], report: IngestReport) -> list[tuple]:
    """The row of each file that reads; each other one a problem in `report`."""
    rows = []
    for path in paths:
        try:
            rows.append(row(path))
        except ValueError as exc:
            report.problems.append(RecordProblem(path, str(exc)))
    return rows


def _result_rows(paths: Sequence[Path], report: IngestReport) -> list[tuple]:
    """The row of each result file that reads (each other one a problem in `report`), in order; built a
    batch of records at a time (columns over many records are cheaper, and only a batch is held)."""
    rows = []
    for start in range(0, len(paths), BATCH_SIZE):
        records, sources = [], []
        for path in paths[start : start + BATCH_SIZE]:
            try:
                records.append(read_record(path))
            except ValueError as exc:
                report.problems.append(RecordProblem(path, str(exc)))
            else:
                sources.append(str(path))
        rows += _rows(records, sources)
    return rows


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring an older store up to STORE_SCHEMA_VERSION, step by step, in one write transaction.

    The version is read again inside the transaction: of two processes opening the same old store,
    the second finds it migrated and does nothing.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != STORE_SCHEMA_VERSION:
            STORE.upgrade(conn, version)
            conn.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except (sqlite3.DatabaseError, VersionError) as exc:  # VersionError: a newer fsdp-bench got there first
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            _raise_storage_fault(exc, path)
        raise ValueError(f"store {path}: migrating to store schema {STORE_SCHEMA_VERSION} failed: {exc}") from None


def _where(filters: dict[str, object]) -> tuple[str, list[object]]:
    unknown = set(filters) - set(_COLUMNS)
    if unknown:
        raise ValueError(f"unknown store column(s) {sorted(unknown)}; allowed: {', '.join(_COLUMNS)}")
    if not filters:
        return "", []
    return " WHERE " + " AND ".join(f"{key} = ?" for key in filters), list(filters.values())


# The record fields each row holds, by column (read by bench/schema/metrics.py's PathReader over a batch
# of records: each path once, from the models' instance dicts).
_FIELDS = {
    "point_id": "point_id", "sweep": "sweep", "status": "status", "error": "error", "model": "spec.model.name",
    "strategy": "spec.strategy", "precision": "spec.precision", "cluster": "spec.cluster.name",
    "launcher": "spec.launcher", "nodes": "spec.nodes", "gpus_per_node": "spec.gpus_per_node",
    "world_size": "spec.world_size", "micro_batch": "spec.train.micro_batch", "grad_accum": "spec.train.grad_accum",
    "seq_len": "spec.train.seq_len", "repeat": "spec.repeat", "started_at": "started_at",
    "finished_at": "finished_at", "git_sha": "env.git_sha",
}  # fmt: skip


def _rows(records: Sequence[RunResult], sources: Sequence[str | None]) -> list[tuple]:
    """The row of each record, in order: the fields and metrics read column by column over the
    batch, not a record's `metrics.values` one record at a time."""
    read = PathReader(records)
    read.read_all(_FIELDS.values())
    texts = [record.model_dump_json() for record in records]
    fingerprints: dict[tuple, str] = {}  # runs of one environment share it: json + sha256 once per environment
    columns = {column: read(path) for column, path in _FIELDS.items()}
    columns |= metric_columns(records, "store", read)
    columns |= {
        "content_hash": [_hash(text) for text in texts],
        "env_fingerprint": [_fingerprint_of(env.fingerprint(), fingerprints) for env in read("env")],
        "source": list(sources),
        "ingested_at": [datetime.now(timezone.utc).isoformat() for _ in records],
        "record": texts,
    }
    return list(zip(*(columns[column] for column in _COLUMNS)))


_PREFLIGHT_COLUMNS = [
    "sweep", "shape", "content_hash", "status", "cluster", "nodes", "gpus_per_node", "started_at", "source",
    "ingested_at", "record",
]  # fmt: skip


def _preflight_row(record: PreflightResult, source: str | None) -> tuple:
    spec, text = record.spec, record.model_dump_json()
    values = {
        "sweep": record.sweep, "shape": f"{spec.nodes}x{spec.gpus_per_node}", "content_hash": _hash(text),
        "status": record.status, "cluster": spec.cluster.name, "nodes": spec.nodes,
        "gpus_per_node": spec.gpus_per_node, "started_at": record.started_at, "source": source,
        "ingested_at": datetime.now(timezone.utc).isoformat(), "record": text,
    }  # fmt: skip
    return tuple(values[column] for column in _PREFLIGHT_COLUMNS)


def add(store_path: Path | str, roots: Sequence[Path | str]) -> IngestReport:
    """Ingest every record under each of `roots` into the store (created if missing); the report's
    `total` is the store's record count after it. StoreError when an existing file is not a store."""
    store_path = Path(store_path)
    if store_path.exists() and not is_store(store_path):
        raise StoreError(f"{store_path} exists and is not an SQLite store")
    if store_path.exists() and schema_version(store_path) == 0 and (tables := _tables(store_path)):
        raise StoreError(f"{store_path} is a foreign SQLite file (tables: {', '.join(tables)}), not a store")
    store, report = _opened(store_path), IngestReport()
    for root in roots:
        report.merge(store.ingest_paths(root))
    report.total = store.count()
    return report


def rebuild(store_path: Path | str, roots: Sequence[Path | str]) -> IngestReport:
    """Recreate the store from the JSON records under `roots` (the records are the truth). StoreError
    when an existing file is not a store (it is never deleted)."""
    store_path = Path(store_path)
    if store_path.exists() and not is_store(store_path):
        raise StoreError(f"{store_path} exists and is not an SQLite store")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store_path}{suffix}").unlink(missing_ok=True)
    return add(store_path, roots)


def open_existing(store_path: Path | str) -> ResultStore:
    """An existing store, opened (migrated if older) only when it is one: StoreError for a file that
    is not SQLite, or an SQLite file that holds no store (opening it would create the tables in it)."""
    store_path = Path(store_path)
    if not is_store(store_path):
        raise StoreError(f"{store_path} is not an SQLite store")
    try:
        version = schema_version(store_path)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{store_path}: {exc}") from None
    if version == 0:
        raise StoreError(f"{store_path} holds no readable record (an empty or foreign SQLite file)")
    return _opened(store_path)


def _tables(store_path: Path) -> list[str]:
    return [name for (name,) in _read(store_path, "SELECT name FROM sqlite_master WHERE type = 'table'")]


def _opened(store_path: Path) -> ResultStore:
    """The store opened (created, or migrated when older); StoreError for a file SQLite cannot read
    as one or a store newer than this code (a disk that takes no writes raises its OSError)."""
    try:
        return ResultStore(store_path)
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise StoreError(f"{store_path}: {exc}" if str(store_path) not in str(exc) else str(exc)) from None


@dataclass(frozen=True)
class StoreStats:
    records: int
    preflights: int
    schema: int


def stats(store_path: Path | str) -> StoreStats:
    """How many records and preflights an existing store holds (StoreError if it is not one)."""
    store = open_existing(store_path)
    return StoreStats(store.count(), store.count_preflights(), schema_version(store.path))


def export(store_path: Path | str, out: Path | str, **where: object) -> Path:
    """Write the stored records' per-point table (with efficiencies, as results.csv) as CSV or Parquet."""
    from bench.analysis.report.export import write_csv, write_parquet
    from bench.analysis.report.views import analyse

    out = Path(out)
    writers = dict(zip(EXPORT_FORMATS, (write_csv, write_parquet)))
    if out.suffix not in writers:
        raise ValueError(f"export: unknown format '{out.suffix}'; allowed: {', '.join(EXPORT_FORMATS)}")
    records, _ = open_existing(store_path).records(**where)
    return writers[out.suffix](analyse(records).points, out)
