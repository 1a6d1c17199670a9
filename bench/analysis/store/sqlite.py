"""The embedded back-end: the results store as one SQLite file (stdlib sqlite3, WAL mode), the default.

- Concurrent writers: WAL lets readers proceed during a write; writers take the lock with
  BEGIN IMMEDIATE and wait up to BUSY_TIMEOUT_S, so parallel sweeps on one host lose nothing (WAL
  needs shared memory between the writers: the file belongs on a local disk, not NFS).
- Records last: the store's own schema is versioned (PRAGMA user_version): an older store is
  migrated in place when opened (STORE_MIGRATIONS, stepped by bench/schema/files.py `Versioned`), a
  newer one is refused with a message to rebuild it from the JSON records; a file that is not
  SQLite, or an SQLite file that holds other tables, is refused as foreign and left as it is.
- A disk that takes no writes raises the OSError every other write raises there (`storage_fault`).

What a row holds and what every store does: rows.py and base.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from bench.analysis.records import parse_record
from bench.analysis.store.base import Store, StoreError, batches
from bench.analysis.store.rows import COLUMNS, METRICS, STORE_SCHEMA_VERSION, checked_filters, hash_text
from bench.config.paths import nearest_existing, read_only_error
from bench.schema.files import Versioned, VersionError
from bench.schema.migrations import PREFLIGHT

# Parallel sweeps on one store wait for each other's short write transactions; 60 s is far
# beyond any one batch (a few hundred small rows) yet still fails loudly on a stuck writer.
BUSY_TIMEOUT_S = 60.0
# Rows from which an ingest into an empty store is one transaction with the indexes built after the
# rows (`bulk_insert`): a first ingest of a results folder, or a rebuild.
BULK_ROWS = 1000
SQLITE_MAGIC = b"SQLite format 3\x00"
# Free space under which SQLite's "disk I/O error" means a full disk (it needs a few pages to go on).
NEARLY_FULL_BYTES = 1 << 20

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS results (
    point_id TEXT NOT NULL, content_hash TEXT NOT NULL, sweep TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
    model TEXT, strategy TEXT, precision TEXT, cluster TEXT, launcher TEXT, nodes INTEGER, gpus_per_node INTEGER,
    world_size INTEGER, micro_batch INTEGER, grad_accum INTEGER, seq_len INTEGER, repeat INTEGER,
    """
    + "".join(f"{m.key} {m.store_type}, " for m in METRICS)
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
        key = (record.point_id, hash_text(text))
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
        key = (sweep, shape, hash_text(text))
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


class SQLiteStore(Store):
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

    @property
    def name(self) -> str:
        return str(self.path)

    def schema_version(self) -> int:
        return schema_version(self.path)

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

    def insert_batches(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> int:
        """BATCH_SIZE rows per write transaction, on one connection (each close of a WAL connection
        checkpoints: a connection per batch cost a checkpoint per 200 records); into an empty results
        table, BULK_ROWS or more rows in one transaction, its indexes built after them (`bulk_insert`)."""
        with self._connect() as conn:
            if table == "results" and len(rows) >= BULK_ROWS and (added := bulk_insert(conn, rows)) is not None:
                return added
            return sum(_insert_rows(conn, table, columns, batch) for batch in batches(rows))

    def count_rows(self, table: str, **where: object) -> int:
        clause, params = _where(where)
        with self._connect() as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {table}{clause}", params).fetchone()[0]

    def rows_in_order(self, table: str, columns: Sequence[str], **where: object) -> list[tuple]:
        clause, params = _where(where)
        with self._connect() as conn:
            if table == "results":
                return _in_order(conn, ", ".join(columns), clause, params)
            sql = f"SELECT {', '.join(columns)} FROM {table}{clause} ORDER BY started_at, ingested_at, rowid"
            return conn.execute(sql, params).fetchall()

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
        added = _insert(conn, "results", COLUMNS, rows)
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
    columns, values = checked_filters(filters)
    return (" WHERE " + " AND ".join(f"{key} = ?" for key in columns) if columns else ""), values


def opened(path: Path, *, create: bool) -> SQLiteStore:
    """The store in the file at `path`: created where missing when `create` (migrated when older);
    StoreError for a file that is not SQLite, an SQLite file that holds no store (opening it would
    create the tables in it: it is left as it is), or a store newer than this code."""
    path = Path(path)
    if not path.exists() and create:
        return _opened(path)
    if not is_store(path):
        raise StoreError(
            f"{path} exists and is not an SQLite store" if path.exists() else f"{path} is not an SQLite store"
        )
    try:
        version = schema_version(path)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: {exc}") from None
    if version == 0 and create and (tables := _tables(path)):
        raise StoreError(f"{path} is a foreign SQLite file (tables: {', '.join(tables)}), not a store")
    if version == 0 and not create:
        raise StoreError(f"{path} holds no readable record (an empty or foreign SQLite file)")
    return _opened(path)


def remove(path: Path) -> None:
    """Delete the store's file (and its WAL files); StoreError when an existing file is not a store
    (it is never deleted)."""
    if path.exists() and not is_store(path):
        raise StoreError(f"{path} exists and is not an SQLite store")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _tables(store_path: Path) -> list[str]:
    return [name for (name,) in _read(store_path, "SELECT name FROM sqlite_master WHERE type = 'table'")]


def _opened(store_path: Path) -> SQLiteStore:
    """The store opened (created, or migrated when older); StoreError for a file SQLite cannot read
    as one or a store newer than this code (a disk that takes no writes raises its OSError)."""
    try:
        return SQLiteStore(store_path)
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise StoreError(f"{store_path}: {exc}" if str(store_path) not in str(exc) else str(exc)) from None
