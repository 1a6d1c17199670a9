"""What every results store does, whichever database holds it: ingest records and preflights
(idempotently, BATCH_SIZE rows per write transaction), count them, and read them back in order
through the records' versioned paths. A back-end (sqlite.py, postgres.py) supplies the database's
part: inserting rows under the table's key, reading rows in one snapshot, its schema version."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path

from bench.analysis.records import RecordProblem
from bench.analysis.store import rows as store_rows
from bench.analysis.store.rows import (
    COLUMNS,
    PREFLIGHT_COLUMNS,
    IngestReport,
    files_under,
    preflight_rows,
    record_rows,
    result_rows,
    stored_record,
)
from bench.schema.migrations import PREFLIGHT
from bench.schema.preflight import PreflightResult
from bench.schema.record import RunResult


class StoreError(ValueError):
    """A location given as a store that cannot be used as one (one line naming it, its password
    masked; the CLI exits 2)."""


class Store(ABC):
    """A results store: an index of result and preflight records, keyed by their content."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The store as it may be printed (a path, or a URL with its password masked)."""

    @abstractmethod
    def schema_version(self) -> int:
        """The store's own schema version."""

    @abstractmethod
    def insert_batches(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> int:
        """Insert the rows not yet present (by the table's key), BATCH_SIZE rows per write transaction;
        returns how many were new."""

    @abstractmethod
    def count_rows(self, table: str, **where: object) -> int:
        """The table's rows matching column=value filters."""

    def count(self, **where: object) -> int:
        """Results matching column=value filters (e.g. count(status="ok"))."""
        return self.count_rows("results", **where)

    def count_preflights(self) -> int:
        return self.count_rows("preflights")

    @abstractmethod
    def rows_in_order(self, table: str, columns: Sequence[str], **where: object) -> list[tuple]:
        """The table's rows (results: oldest run first, by finished_at then ingested_at, ties in insertion
        order; preflights: by started_at then ingested_at), read in one snapshot."""

    @abstractmethod
    def clear(self) -> None: ...

    def ingest(self, records: Iterable[RunResult], source: str | None = None) -> IngestReport:
        """Insert records not yet present, BATCH_SIZE per write transaction."""
        records = list(records)
        rows = record_rows(records, [source] * len(records))
        added = self.insert_batches("results", COLUMNS, rows)
        return IngestReport(added=added, unchanged=len(rows) - added)

    def ingest_paths(self, root: Path | str) -> IngestReport:
        """Ingest every result.json and preflight.json under `root` (or one file); unreadable records
        become problems."""
        paths, preflight_paths = files_under(root)
        report = IngestReport()
        rows = result_rows(paths, report)
        if preflights := preflight_rows(preflight_paths, report):
            added = self.insert_batches("preflights", PREFLIGHT_COLUMNS, preflights)
            report.preflights_added += added
            report.preflights_unchanged += len(preflights) - added
        added = self.insert_batches("results", COLUMNS, rows)
        report.merge(IngestReport(added=added, unchanged=len(rows) - added))
        return report

    def records(self, latest_only: bool = True, **where: object) -> tuple[list[RunResult], list[RecordProblem]]:
        """Stored records (re-validated); by default the latest per (sweep, point id).

        A row that no longer validates (written by a newer fsdp-bench) is a problem, not an error.
        """
        rows = self.rows_in_order("results", ("sweep", "point_id", "source", "record"), **where)
        chosen = {(sweep, pid): (source, blob) for sweep, pid, source, blob in rows}
        selected = chosen.values() if latest_only else [(source, blob) for *_, source, blob in rows]
        records, problems = [], []
        for source, blob in selected:
            try:
                records.append(stored_record(blob))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError too
                problems.append(RecordProblem(Path(source or self.name), f"stored record invalid: {exc}"))
        return records, problems

    def preflights(self) -> tuple[list[PreflightResult], list[RecordProblem]]:
        """Every stored preflight record (each measurement, also a rerun of a sweep's shape), oldest first."""
        records, problems = [], []
        for source, blob in self.rows_in_order("preflights", ("source", "record")):
            try:
                records.append(PREFLIGHT.parse(json.loads(blob)))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError too
                problems.append(RecordProblem(Path(source or self.name), f"stored preflight invalid: {exc}"))
        return records, problems


def batches(rows: Sequence[tuple]) -> Iterable[Sequence[tuple]]:
    """The rows, BATCH_SIZE at a time (read when called: a test may make the batches small)."""
    size = store_rows.BATCH_SIZE
    return (rows[start : start + size] for start in range(0, len(rows), size))
