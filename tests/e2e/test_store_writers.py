"""Two processes writing one SQLite results store at once (bench/analysis/store/sqlite.py): no row lost or
doubled, WAL journal. Real processes, so not in tests/unit."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record  # noqa: E402

from bench.analysis.records import write_record  # noqa: E402
from bench.analysis.store import SQLiteStore  # noqa: E402


def _write_many(root: Path, count: int, sweep: str) -> None:
    """`count` distinct valid records (distinct seeds -> distinct point ids) under root/<sweep>/."""
    template = make_record(sweep=sweep)
    for seed in range(count):
        spec = template.spec.model_copy(update={"train": template.spec.train.model_copy(update={"seed": seed})})
        record = template.model_copy(update={"spec": spec, "point_id": spec.point_id})
        write_record(record, root / sweep / record.point_id / "result.json")


def test_two_processes_ingesting_500_records_each_end_with_1000_rows(tmp_path):
    _write_many(tmp_path / "a", 500, "sweep_a")
    _write_many(tmp_path / "b", 500, "sweep_b")
    db = tmp_path / "shared.sqlite"
    command = [
        sys.executable,
        "-c",
        "import sys; from bench.analysis.store import SQLiteStore; "
        "from bench.analysis.store import rows; rows.BATCH_SIZE = 25; "  # many small transactions: real interleaving
        "r = SQLiteStore(sys.argv[1]).ingest_paths(sys.argv[2]); print(r.added, len(r.problems))",
    ]
    procs = [
        subprocess.Popen([*command, str(db), str(tmp_path / part)], stdout=subprocess.PIPE, text=True)
        for part in ("a", "b")
    ]
    outputs = [proc.communicate(timeout=120)[0].split() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outputs == [["500", "0"], ["500", "0"]]
    store = SQLiteStore(db)
    assert store.count() == 1000
    assert store.count(sweep="sweep_a") == 500 and store.count(sweep="sweep_b") == 500
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
