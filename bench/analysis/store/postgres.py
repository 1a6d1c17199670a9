"""The shared back-end: the results store in a PostgreSQL database (psycopg 3, the `postgres` extra),
for a team whose clusters and CI runners all write one store.

- The same rows as the SQLite store (rows.py), keyed alike (PRIMARY KEY (point_id, content_hash);
  INSERT ... ON CONFLICT DO NOTHING), the record's JSON as `text` (not jsonb, which reorders keys and
  drops whitespace: the content hash is of the exact text). A `seq` identity column keeps the
  insertion order, SQLite's rowid, which breaks ties in history's order.
- Concurrent writers from many hosts: each batch is one transaction, the writers taking turns a batch
  at a time (an advisory lock: never a deadlock); the key, enforced by the database, keeps a record
  stored once. A reader reads one snapshot (a read-only REPEATABLE READ transaction).
- Records last: the store's schema version lives in a table of its own (VERSION_TABLE); a newer one
  is refused, a database with other tables but no version is refused as foreign, and `drop` (rebuild)
  drops only the store's own tables, never the database. Stores start at schema 5; STORE_MIGRATIONS
  holds the steps after it.
- The URL goes to libpq as it is (PGPASSWORD, ~/.pgpass, service files, sslmode all work); connecting
  gives up after CONNECT_TIMEOUT_S unless the URL or PGCONNECT_TIMEOUT says otherwise. Every error is
  one line naming the store with its password masked (location.py); a full disk on the server is the
  OSError a full local disk raises.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench.analysis.store.base import Store, StoreError, batches
from bench.analysis.store.location import masked, scrubbed
from bench.analysis.store.rows import (
    METRICS,
    STORE_SCHEMA_VERSION,
    checked_filters,
)
from bench.schema.files import Versioned, VersionError

EXTRA = "postgres"  # pip install 'fsdp-bench[postgres]'
# An unreachable server fails in this many seconds, not a hang (libpq waits forever by default).
CONNECT_TIMEOUT_S = 10
VERSION_TABLE = "fsdp_bench_store"
TABLES = ("results", "preflights", VERSION_TABLE)
# Serializes creating, migrating and dropping the store between processes (pg_advisory_xact_lock).
SCHEMA_LOCK = 0x46534450  # "FSDP"
# Taken by each write transaction: writers take turns a batch at a time (pg_advisory_xact_lock).
WRITE_LOCK = SCHEMA_LOCK + 1

_TYPES = {"TEXT": "text", "INTEGER": "bigint", "REAL": "double precision"}
_SCHEMA = f"""
CREATE TABLE results (
    point_id text NOT NULL, content_hash text NOT NULL, sweep text NOT NULL, status text NOT NULL, error text,
    model text, strategy text, precision text, cluster text, launcher text, nodes bigint, gpus_per_node bigint,
    world_size bigint, micro_batch bigint, grad_accum bigint, seq_len bigint, repeat bigint,
    {"".join(f"{m.key} {_TYPES[m.store_type]}, " for m in METRICS)}env_fingerprint text,
    started_at text, finished_at text, source text, ingested_at text NOT NULL, record text NOT NULL,
    git_sha text, seq bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (point_id, content_hash)
);
CREATE INDEX results_sweep ON results (sweep, point_id);
CREATE INDEX results_status ON results (status);
CREATE INDEX results_config ON results (model, strategy, precision, cluster, nodes);
CREATE INDEX results_env ON results (env_fingerprint);
CREATE INDEX results_time ON results (started_at);
CREATE TABLE preflights (
    sweep text NOT NULL, shape text NOT NULL, content_hash text NOT NULL, status text NOT NULL, cluster text,
    nodes bigint, gpus_per_node bigint, started_at text, source text, ingested_at text NOT NULL,
    record text NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (sweep, shape, content_hash)
);
CREATE INDEX preflights_time ON preflights (started_at);
CREATE TABLE {VERSION_TABLE} (schema_version integer NOT NULL);
"""
# Store schema n -> n + 1 after 5 (each a step of a connection, run in one transaction). A store
# schema step is written here and in sqlite.py alike.
STORE_MIGRATIONS: dict[int, Any] = {}
STORE = Versioned("store", current=STORE_SCHEMA_VERSION, steps=STORE_MIGRATIONS)
# History's order, as SQLite sorts it: text compared byte by byte (not by the database's collation),
# NULLs first, ties in insertion order.
_ORDER = {
    "results": 'finished_at COLLATE "C" NULLS FIRST, ingested_at COLLATE "C" NULLS FIRST, seq',
    "preflights": 'started_at COLLATE "C" NULLS FIRST, ingested_at COLLATE "C" NULLS FIRST, seq',
}


def driver(url: str) -> Any:
    """The psycopg module, or StoreError naming the store and the extra to install."""
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            f"{masked(url)}: a PostgreSQL store needs the psycopg driver: pip install 'fsdp-bench[{EXTRA}]'"
        ) from None
    return psycopg


class PostgresStore(Store):
    """The store in a PostgreSQL database; a connection per call, safe across processes and hosts."""

    def __init__(self, url: str, *, create: bool) -> None:
        self.url = url
        with self._connect() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            version = _version(conn)
            if version is None:
                if tables := _tables(conn):
                    raise StoreError(f"{self.name} is a foreign database (tables: {', '.join(tables)}), not a store")
                if not create:
                    raise StoreError(f"{self.name} holds no store; create it with `fsdp-bench store add`")
                conn.execute(_SCHEMA)
                conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (%s)", (STORE_SCHEMA_VERSION,))
                _compress_fast(conn, driver(self.url))
            elif version != STORE_SCHEMA_VERSION:
                try:
                    STORE.upgrade(conn, version)
                except VersionError:
                    raise StoreError(
                        f"{self.name}: schema version {version}, this fsdp-bench reads up to "
                        f"{STORE_SCHEMA_VERSION}; rebuild it from the JSON records "
                        "(fsdp-bench store rebuild RESULTS... --store URL)"
                    ) from None
                conn.execute(f"UPDATE {VERSION_TABLE} SET schema_version = %s", (STORE_SCHEMA_VERSION,))

    @property
    def name(self) -> str:
        return masked(self.url)

    def _connect(self) -> Any:
        return connect(self.url)

    def schema_version(self) -> int:
        with self._connect() as conn:
            return _version(conn) or 0

    def insert_batches(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> int:
        """BATCH_SIZE rows per write transaction, which takes WRITE_LOCK first (writers take turns a batch
        at a time, as SQLite's BEGIN IMMEDIATE makes them: never a deadlock between two batches that
        share rows); each batch is copied into a temporary table (COPY: far fewer round trips than a
        statement per row) and inserted from it in the given order (`seq`: history's tie-break), the
        rows already stored left out by the key."""
        names = ", ".join(columns)
        added = 0
        with self._connect() as conn:
            for batch in batches(rows):
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                    cursor.execute(f"CREATE TEMP TABLE incoming (LIKE {table}) ON COMMIT DROP")
                    with cursor.copy(f"COPY incoming ({names}, seq) FROM STDIN") as copy:
                        for order, row in enumerate(batch):
                            copy.write_row((*row, order))
                    cursor.execute(
                        f"INSERT INTO {table} ({names}) SELECT {names} FROM incoming ORDER BY seq ON CONFLICT DO NOTHING"
                    )
                    added += cursor.rowcount
        return added

    def count_rows(self, table: str, **where: object) -> int:
        clause, params = _where(where)
        with self._connect() as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {table}{clause}", params).fetchone()[0]

    def rows_in_order(self, table: str, columns: Sequence[str], **where: object) -> list[tuple]:
        psycopg = driver(self.url)
        clause, params = _where(where)
        sql = f"SELECT {', '.join(columns)} FROM {table}{clause} ORDER BY {_ORDER[table]}"
        with self._connect() as conn:
            conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
            with conn.transaction():
                return conn.execute(sql, params).fetchall()

    def clear(self) -> None:
        with self._connect() as conn, conn.transaction():
            conn.execute("DELETE FROM results")
            conn.execute("DELETE FROM preflights")


def drop(url: str) -> None:
    """Drop the store's own tables (rebuild), never the database, nor a foreign database's tables
    (StoreError)."""
    with connect(url) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        if _version(conn) is None:
            if tables := _tables(conn):
                raise StoreError(f"{masked(url)} is a foreign database (tables: {', '.join(tables)}), not a store")
            return
        conn.execute(f"DROP TABLE IF EXISTS {', '.join(TABLES)}")


@contextmanager
def connect(url: str) -> Iterator[Any]:
    """An autocommit connection (transactions are explicit); the driver's errors as one line
    naming the store (StoreError), a full disk on the server as ENOSPC."""
    psycopg = driver(url)
    conninfo = psycopg.conninfo.conninfo_to_dict(url) if _parses(psycopg, url) else {}
    timeout = {"connect_timeout": CONNECT_TIMEOUT_S}
    if "connect_timeout" in conninfo or "PGCONNECT_TIMEOUT" in os.environ:
        timeout = {}
    try:
        with psycopg.connect(url, autocommit=True, **timeout) as conn:
            yield conn
    except psycopg.errors.DiskFull as exc:
        # No file name: the full disk is the server's, whose free space this host cannot see.
        raise OSError(errno.ENOSPC, f"the database server's disk is full: {masked(url)}: {_line(exc, url)}") from None
    except psycopg.Error as exc:
        raise StoreError(f"{masked(url)}: {_line(exc, url)}") from None


def _line(exc: Exception, url: str) -> str:
    """The driver's message in one line, the URL's password masked."""
    return scrubbed(" ".join(str(exc).split()), url) or type(exc).__name__


def _compress_fast(conn: Any, psycopg: Any) -> None:
    """The record columns compressed with lz4 where the server has it (PostgreSQL 14 and newer, built
    with lz4, as Debian's is): inserting 10,000 records took 3.46 s with the default pglz, 1.95 s with
    lz4 (docs/results/store.md). How a value is stored, not what it is: the text read back is the
    same. Left at the default where the server says no."""
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the store's creation as it is
            for table in ("results", "preflights"):
                conn.execute(f"ALTER TABLE {table} ALTER COLUMN record SET COMPRESSION lz4")
    except psycopg.Error:
        pass


def _parses(psycopg: Any, url: str) -> bool:
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return False  # psycopg.connect says what is wrong with it
    return True


def _version(conn: Any) -> int | None:
    """The store's schema version, or None where the database holds no store."""
    if conn.execute("SELECT to_regclass(%s)", (VERSION_TABLE,)).fetchone()[0] is None:
        return None
    row = conn.execute(f"SELECT max(schema_version) FROM {VERSION_TABLE}").fetchone()
    return row[0]


def _tables(conn: Any) -> list[str]:
    """The tables in the database's current schema."""
    sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
    return [name for (name,) in conn.execute(sql).fetchall()]


def _where(filters: dict[str, object]) -> tuple[str, list[object]]:
    columns, values = checked_filters(filters)
    return (" WHERE " + " AND ".join(f"{key} = %s" for key in columns) if columns else ""), values
