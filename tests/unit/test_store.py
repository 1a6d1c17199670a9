"""The SQLite results store: idempotent ingest, refused records, rebuild, export (concurrent writers,
which need processes of their own: tests/e2e/test_store_writers.py)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pandas as pd
import pytest
from bench_cli import in_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, sample_sweep  # noqa: E402

from bench.analysis.records import write_record  # noqa: E402
from bench.analysis.store import SQLiteStore, content_hash, export, rebuild  # noqa: E402


def test_ingest_is_idempotent(tmp_path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    first = store.ingest(sample_sweep())
    assert (first.added, first.unchanged) == (8, 0)
    again = store.ingest(sample_sweep())
    assert (again.added, again.unchanged) == (0, 8)
    assert store.count() == 8
    assert store.count(status="oom") == 1 and store.count(strategy="full_shard", status="ok") == 3


def test_content_hash_ignores_key_order_on_disk(tmp_path):
    record = make_record()
    data = json.loads(record.model_dump_json())
    path = tmp_path / "r" / "result.json"
    path.parent.mkdir()
    path.write_text(json.dumps(dict(reversed(list(data.items())))))
    store = SQLiteStore(tmp_path / "s.sqlite")
    store.ingest([record])
    report = store.ingest_paths(path)
    assert (report.added, report.unchanged) == (0, 1)


def test_a_remeasured_point_is_kept_beside_the_old_and_latest_wins(tmp_path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    old = make_record(tokens_per_s=500.0)
    new = make_record(tokens_per_s=800.0).model_copy(update={"finished_at": "2025-03-01T00:00:00+00:00"})
    assert old.point_id == new.point_id and content_hash(old) != content_hash(new)
    store.ingest([new, old])
    assert store.count(point_id=old.point_id) == 2
    latest, problems = store.records()
    assert problems == [] and [r.metrics.tokens_per_s for r in latest] == [800.0]
    assert len(store.records(latest_only=False)[0]) == 2


def test_invalid_and_unknown_schema_records_are_reported_and_skipped(tmp_path):
    results = tmp_path / "results"
    write_record(make_record(), results / "unit" / "good" / "result.json")
    unknown = json.loads(make_record(nodes=2).model_dump_json()) | {"schema_version": 99}
    invalid = json.loads(make_record(nodes=4).model_dump_json()) | {"status": "exploded"}
    for name, data in {"unknown": unknown, "invalid": invalid}.items():
        (results / "unit" / name).mkdir(parents=True)
        (results / "unit" / name / "result.json").write_text(json.dumps(data))
    (results / "unit" / "truncated").mkdir()
    (results / "unit" / "truncated" / "result.json").write_text('{"schema_version": 1, "point')
    store = SQLiteStore(tmp_path / "s.sqlite")
    report = store.ingest_paths(results)
    assert report.added == 1
    reasons = {p.path.parent.name: p.reason for p in report.problems}
    assert sorted(reasons) == ["invalid", "truncated", "unknown"]
    assert reasons["unknown"].startswith("schema_version 99 is unknown")
    assert "status" in reasons["invalid"]
    assert reasons["truncated"].startswith("unreadable JSON")
    assert store.count() == 1


def test_rebuild_from_json_records(tmp_path):
    results = tmp_path / "results"
    for record in sample_sweep():
        write_record(record, results / record.sweep / record.point_id / "result.json")
    db = tmp_path / "s.sqlite"
    SQLiteStore(db).ingest([make_record(sweep="stale", nodes=16)])
    report = rebuild(db, [results])
    assert (report.added, report.problems) == (8, [])
    store = SQLiteStore(db)
    assert store.count() == 8 and store.count(sweep="stale") == 0


def test_store_of_another_schema_version_is_refused(tmp_path):
    db = tmp_path / "s.sqlite"
    SQLiteStore(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 7")
    with pytest.raises(ValueError, match="schema version 7"):
        SQLiteStore(db)


def test_export_csv_and_parquet(tmp_path):
    db = tmp_path / "s.sqlite"
    SQLiteStore(db).ingest(sample_sweep())
    frame = pd.read_csv(export(db, tmp_path / "out.csv"))
    assert len(frame) == 8
    two = frame[(frame["strategy"] == "full_shard") & (frame["nodes"] == 2)].iloc[0]
    assert two["tokens_per_s"] == 1900.0 and two["scaling_efficiency"] == pytest.approx(0.95)
    parquet = pd.read_parquet(export(db, tmp_path / "out.parquet"))
    assert len(parquet) == 8 and list(parquet.iloc[0]["step_times_s"])
    with pytest.raises(ValueError, match="allowed: .csv, .parquet"):
        export(db, tmp_path / "out.xlsx")


def test_store_command_add_rebuild_export_stats(tmp_path):
    """`fsdp-bench store`, the one store CLI: each action's line and exit code."""
    results = tmp_path / "results"
    write_record(make_record(), results / "unit" / "p" / "result.json")
    db = tmp_path / "s.sqlite"
    run = in_process("store", "add", results, "--store", db)
    assert (run.rc, run.stdout) == (0, f"store {db}: 1 added, 0 already stored, 0 refused; 1 records in all\n")
    (results / "unit" / "bad").mkdir()
    (results / "unit" / "bad" / "result.json").write_text("{")
    code, out, err, _ = in_process("store", "add", results, "--store", db)
    assert code == 1  # one record refused
    assert out == f"store {db}: 0 added, 1 already stored, 1 refused; 1 records in all\n"
    assert "store add: skipped " in err and "bad/result.json: unreadable JSON" in err
    run = in_process("store", "rebuild", results, "--store", db)
    assert (run.rc, run.stdout) == (1, f"store {db}: 1 added, 0 already stored, 1 refused; 1 records in all\n")
    run = in_process("store", "stats", "--store", db)
    assert (run.rc, run.stdout) == (0, f"store {db}: 1 records, 0 preflights (schema 5)\n")
    run = in_process("store", "export", tmp_path / "t.csv", "--store", db)
    assert (run.rc, run.stdout) == (0, f"store {db}: wrote {tmp_path / 't.csv'}\n")
    assert len(pd.read_csv(tmp_path / "t.csv")) == 1
    run = in_process("store", "export", tmp_path / "t.xlsx", "--store", db)
    assert (run.rc, run.stderr) == (
        2,
        f"error: OUT: {tmp_path / 't.xlsx'}: unknown format '.xlsx'; allowed: .csv, .parquet\n",
    )
    assert not (tmp_path / "t.xlsx").exists()


def test_store_rebuild_never_deletes_a_file_that_is_not_a_store(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    run = in_process("store", "rebuild", tmp_path, "--store", notes)
    assert (run.rc, run.stderr) == (2, f"error: --store: {notes} exists and is not an SQLite store\n")
    assert notes.read_text() == "mine"
    run = in_process("store", "stats", "--store", tmp_path / "none.sqlite")
    assert (run.rc, run.stderr) == (2, f"error: --store: {tmp_path / 'none.sqlite'} does not exist\n")
    assert not (tmp_path / "none.sqlite").exists()


def test_a_store_this_code_cannot_read_is_one_line_exit_2_and_left_as_it_was(tmp_path):
    """A newer store, or a foreign SQLite file, given to any command that reads or adds to a store."""
    results, out = tmp_path / "results", tmp_path / "out"
    write_record(make_record(), results / "unit" / "p" / "result.json")
    newer, foreign = tmp_path / "v9.sqlite", tmp_path / "foreign.sqlite"
    sqlite3.connect(newer).execute("PRAGMA user_version = 9").connection.close()
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    for store, reason in ((newer, "schema version 9, this fsdp-bench reads up to 5; rebuild it"),
                          (foreign, "foreign SQLite file")):  # fmt: skip
        commands = [
            ["store", "stats", "--store", store], ["store", "export", tmp_path / "t.csv", "--store", store],
            ["history", "--store", store, "-o", out], ["report", store, "-o", out],
            ["check", store, "--baseline", results],
        ]  # fmt: skip
        commands.append(["store", "add", results, "--store", store])
        for argv in commands:
            code, _, err, _ = in_process(*argv)
            assert code == 2, argv
            assert err.count("\n") == 1 and reason in err and "Traceback" not in err, (argv, err)
    assert not out.exists() and not (tmp_path / "t.csv").exists()
    with sqlite3.connect(foreign) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]


def test_a_schema_4_store_is_rekeyed_so_its_records_are_not_stored_twice(tmp_path):
    """Schema 4 hashed the sorted-key JSON; schema 5 hashes the model's own JSON. Opening a schema-4
    store rekeys its rows, so adding the same result.json again finds it."""
    import hashlib
    import sqlite3
    from contextlib import closing

    from bench.analysis.store import STORE_SCHEMA_VERSION
    from bench.analysis.store.sqlite import schema_version

    record = make_record()
    path = tmp_path / "r" / "result.json"
    write_record(record, path)
    store_path = tmp_path / "s.sqlite"
    SQLiteStore(store_path).ingest([record])
    old = json.dumps(record.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    with closing(sqlite3.connect(store_path)) as conn, conn:
        conn.execute("UPDATE results SET content_hash = ?", (hashlib.sha256(old.encode()).hexdigest(),))
        conn.execute("PRAGMA user_version = 4")
    store = SQLiteStore(store_path)
    assert schema_version(store_path) == STORE_SCHEMA_VERSION == 5
    report = store.ingest_paths(path)
    assert (report.added, report.unchanged, store.count()) == (0, 1, 1)
    assert content_hash(store.records()[0][0]) == content_hash(record)


def test_a_bulk_ingest_into_an_empty_store_holds_the_same_rows_and_indexes(tmp_path, monkeypatch):
    """An ingest into an empty store from BULK_ROWS rows on builds the indexes after the rows: the
    rows, in rowid order, and the indexes are those of the ingest a batch at a time; a later ingest
    into the filled store goes a batch at a time again."""
    import bench.analysis.store.sqlite as store_module

    def rows_and_indexes(path):
        conn = sqlite3.connect(path)
        columns = [row[1] for row in conn.execute("PRAGMA table_info(results)") if row[1] != "ingested_at"]
        rows = conn.execute(f"SELECT {', '.join(columns)} FROM results ORDER BY rowid").fetchall()
        return rows, sorted(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall())

    records = sample_sweep()
    SQLiteStore(tmp_path / "batches.sqlite").ingest(records + records[:3])
    monkeypatch.setattr(store_module, "BULK_ROWS", 2)
    bulk_inserts = []
    real_bulk_insert = store_module.bulk_insert
    monkeypatch.setattr(
        store_module,
        "bulk_insert",
        lambda conn, rows: bulk_inserts.append(real_bulk_insert(conn, rows)) or bulk_inserts[-1],
    )
    bulk = SQLiteStore(tmp_path / "bulk.sqlite")
    first = bulk.ingest(records + records[:3])
    assert (first.added, first.unchanged) == (8, 3)
    batches, built = rows_and_indexes(tmp_path / "batches.sqlite"), rows_and_indexes(tmp_path / "bulk.sqlite")
    assert bulk_inserts == [8]
    assert built == batches and len(built[0]) == 8 and len(built[1]) == 8  # 5 results, 1 preflights, 2 keys
    again = bulk.ingest([make_record(tokens_per_s=123.0), *records])
    assert (again.added, again.unchanged) == (1, 8) and bulk.count() == 9
    assert bulk_inserts == [8, None]  # the table held rows: a batch at a time


@pytest.mark.parametrize(
    "location, shown",
    [
        ("postgresql://ci:secret@db.example:5432/bench", "postgresql://ci:***@db.example:5432/bench"),
        ("postgres://ci:s%40cret@db/bench?sslmode=require", "postgres://ci:***@db/bench?sslmode=require"),
        ("postgresql://db/bench?user=ci&password=secret&sslmode=verify-full", "postgresql://db/bench?user=ci&password=***&sslmode=verify-full"),
        ("postgresql://ci@db.example/bench", "postgresql://ci@db.example/bench"),
        ("results/fsdp-bench.sqlite", "results/fsdp-bench.sqlite"),
    ],
)  # fmt: skip
def test_a_store_is_printed_with_its_password_masked(location, shown):
    from urllib.parse import unquote

    from bench.analysis.store.location import masked, scrubbed, secrets

    assert masked(location) == shown
    message = scrubbed(f"failed for {location} ({unquote(location)})", location)
    assert [s for s in secrets(location) if s in message or unquote(s) in message] == []
    assert len(secrets(location)) == (shown != location)


def test_a_store_location_is_told_apart_by_its_scheme_not_by_a_file():
    from bench.analysis.store.location import is_url, parsed, scheme_problem

    assert [is_url(x) for x in ("postgresql://h/db", "POSTGRES://h/db", "postgresql:/h/db", "s.sqlite")] == [
        True, True, False, False,
    ]  # fmt: skip
    assert parsed("postgresql://h/db") == "postgresql://h/db" and parsed("a/b.sqlite") == Path("a/b.sqlite")
    assert scheme_problem("--store", "postgres://h/db") is None and scheme_problem("--store", "s.sqlite") is None
    assert scheme_problem("--store", "mysql://ci:pw@h/db") == (
        "--store: mysql://ci:***@h/db: unknown store scheme 'mysql://'; a store is a path (SQLite) or a "
        "postgresql:// or postgres:// URL"
    )


def test_a_store_url_is_never_taken_as_a_path(tmp_path):
    """An unknown scheme, a server that refuses the connection (nothing listens on port 1) and a missing
    driver: one line naming the store with its password masked, exit 2, no folder made of the URL."""
    results = tmp_path / "results"
    for record in sample_sweep():
        write_record(record, results / record.sweep / record.point_id / "result.json")
    for store, says in (
        ("mysql://ci:secret@127.0.0.1:1/bench", "unknown store scheme 'mysql://'"),
        ("postgresql://ci:secret@127.0.0.1:1/bench", "connection failed"),
    ):
        for args in (("store", "add", results, "--store", store), ("history", "--store", store)):
            run = in_process(*args, cwd=tmp_path)
            masked = store.replace("secret", "***")
            assert (run.rc, run.stdout) == (2, ""), run.stdout + run.stderr
            assert run.stderr.startswith(f"error: --store: {masked}: {says}") and "secret" not in run.stderr
            assert run.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_a_store_url_without_the_driver_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    run = in_process("store", "stats", "--store", "postgresql://ci:secret@db.example/bench")
    assert (run.rc, run.stderr) == (
        2,
        "error: --store: postgresql://ci:***@db.example/bench: a PostgreSQL store needs the psycopg driver: "
        "pip install 'fsdp-bench[postgres]'\n",
    )


def test_the_store_falls_back_to_fsdp_bench_store(tmp_path):
    import os

    for record in sample_sweep():
        write_record(record, tmp_path / "r" / record.sweep / record.point_id / "result.json")
    env = {**os.environ, "FSDP_BENCH_STORE": str(tmp_path / "env.sqlite")}
    run = in_process("store", "add", tmp_path / "r", env=env)
    assert run.rc == 0 and run.stdout.startswith(f"store {tmp_path / 'env.sqlite'}: 8 added"), run.stderr
    assert "FSDP_BENCH_STORE" in in_process("history", "--help", env=env).stdout
