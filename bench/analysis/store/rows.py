"""What a store row is, whichever database holds it: the columns, the row of a record or a preflight
record, the content hash that keys it, and a stored record read back through its versioned path.

Both back-ends (sqlite.py, postgres.py) store exactly these rows, so a record ingested into either
gives the same row, and `store copy` moves rows between them as they are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from bench.analysis.records import RESULT_FILE, RecordProblem, files_named, parse_record, read_record
from bench.schema.metrics import PathReader, shown_in
from bench.schema.metrics import columns as metric_columns
from bench.schema.preflight import PreflightResult
from bench.schema.protocol import PREFLIGHT_RECORD
from bench.schema.record import RunResult

# 2: the git sha of each run as a column, and an index by start time (history's order).
# 3: the preflights table. 4: rows keyed by the migrated record. 5: the content hash of the model's
# own JSON (content_hash), rows and preflights rekeyed. A PostgreSQL store starts at 5; every later
# step is written for both back-ends (sqlite.py's and postgres.py's STORE_MIGRATIONS).
STORE_SCHEMA_VERSION = 5
# Records per write transaction: small enough that concurrent writers interleave, large
# enough that ingesting thousands of records is not dominated by commits.
BATCH_SIZE = 200

# The metric columns (bench/schema/metrics.py: the metrics whose views include "store"). A metric added
# to them changes the table: it needs a STORE_MIGRATIONS step (in both back-ends) that adds and fills it.
METRICS = shown_in("store")
COLUMNS = [
    "point_id", "content_hash", "sweep", "status", "error", "model", "strategy", "precision", "cluster",
    "launcher", "nodes", "gpus_per_node", "world_size", "micro_batch", "grad_accum", "seq_len", "repeat",
    *(m.key for m in METRICS), "env_fingerprint", "started_at", "finished_at", "source", "ingested_at", "record",
    "git_sha",
]  # fmt: skip
PREFLIGHT_COLUMNS = [
    "sweep", "shape", "content_hash", "status", "cluster", "nodes", "gpus_per_node", "started_at", "source",
    "ingested_at", "record",
]  # fmt: skip
# Each table's key (the database enforces it: the same record twice is one row).
RESULT_KEY = ("point_id", "content_hash")
PREFLIGHT_KEY = ("sweep", "shape", "content_hash")


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
    return hash_text(record.model_dump_json())


def hash_text(text: str) -> str:
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


def stored_record(blob: str) -> RunResult:
    """A stored record's JSON as today's RunResult. A row written by this schema holds the current
    version's JSON, which pydantic validates from the text directly (as bench/analysis/records.py reads
    a current result.json: several times faster than json.loads and validating the objects); anything
    else (an older row's version, a broken row) takes the migrating path, which reads it or says why not."""
    try:
        return RunResult.model_validate_json(blob)
    except ValidationError:
        return parse_record(json.loads(blob))


def checked_filters(filters: dict[str, object]) -> tuple[list[str], list[object]]:
    """The filters' columns and values (column=value, ANDed); ValueError for a column the table lacks."""
    unknown = set(filters) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown store column(s) {sorted(unknown)}; allowed: {', '.join(COLUMNS)}")
    return list(filters), list(filters.values())


def files_under(root: Path | str) -> tuple[list[Path], list[Path]]:
    """The result.json and preflight.json files under `root` (a folder at any level, or one file)."""
    root = Path(root)
    if root.is_file():
        return ([], [root]) if root.name == PREFLIGHT_RECORD else ([root], [])
    return files_named(root, RESULT_FILE), files_named(root, PREFLIGHT_RECORD)


def rows_of(paths: Sequence[Path], row: Callable[[Path], tuple], report: IngestReport) -> list[tuple]:
    """The row of each file that reads; each other one a problem in `report`."""
    rows = []
    for path in paths:
        try:
            rows.append(row(path))
        except ValueError as exc:
            report.problems.append(RecordProblem(path, str(exc)))
    return rows


def result_rows(paths: Sequence[Path], report: IngestReport) -> list[tuple]:
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
        rows += record_rows(records, sources)
    return rows


def preflight_rows(paths: Sequence[Path], report: IngestReport) -> list[tuple]:
    """The row of each preflight file that reads (each other one a problem in `report`)."""
    if not paths:
        return []
    from bench.analysis.preflight import read_preflight  # imports the planner's modules: only for preflights

    return rows_of(paths, lambda path: preflight_row(read_preflight(path), str(path)), report)


# The record fields each row holds, by column (read by bench/schema/metrics.py's PathReader over a batch
# of records: each path once, from the models' instance dicts).
FIELDS = {
    "point_id": "point_id", "sweep": "sweep", "status": "status", "error": "error", "model": "spec.model.name",
    "strategy": "spec.strategy", "precision": "spec.precision", "cluster": "spec.cluster.name",
    "launcher": "spec.launcher", "nodes": "spec.nodes", "gpus_per_node": "spec.gpus_per_node",
    "world_size": "spec.world_size", "micro_batch": "spec.train.micro_batch", "grad_accum": "spec.train.grad_accum",
    "seq_len": "spec.train.seq_len", "repeat": "spec.repeat", "started_at": "started_at",
    "finished_at": "finished_at", "git_sha": "env.git_sha",
}  # fmt: skip


def record_rows(records: Sequence[RunResult], sources: Sequence[str | None]) -> list[tuple]:
    """The row of each record, in order: the fields and metrics read column by column over the
    batch, not a record's `metrics.values` one record at a time."""
    read = PathReader(records)
    read.read_all(FIELDS.values())
    texts = [record.model_dump_json() for record in records]
    fingerprints: dict[tuple, str] = {}  # runs of one environment share it: json + sha256 once per environment
    columns = {column: read(path) for column, path in FIELDS.items()}
    columns |= metric_columns(records, "store", read)
    columns |= {
        "content_hash": [hash_text(text) for text in texts],
        "env_fingerprint": [_fingerprint_of(env.fingerprint(), fingerprints) for env in read("env")],
        "source": list(sources),
        "ingested_at": [datetime.now(timezone.utc).isoformat() for _ in records],
        "record": texts,
    }
    return list(zip(*(columns[column] for column in COLUMNS)))


def preflight_row(record: PreflightResult, source: str | None) -> tuple:
    spec, text = record.spec, record.model_dump_json()
    values = {
        "sweep": record.sweep, "shape": f"{spec.nodes}x{spec.gpus_per_node}", "content_hash": hash_text(text),
        "status": record.status, "cluster": spec.cluster.name, "nodes": spec.nodes,
        "gpus_per_node": spec.gpus_per_node, "started_at": record.started_at, "source": source,
        "ingested_at": datetime.now(timezone.utc).isoformat(), "record": text,
    }  # fmt: skip
    return tuple(values[column] for column in PREFLIGHT_COLUMNS)
