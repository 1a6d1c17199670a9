"""What the report needs of many records, small enough to send between processes (`RecordsDigest`).

The report reads its records through the frame's columns (columns.py), but for a few records it
shows more than a row: a point whose ranks include a step-time straggler, a point measured on a
loaded host (both in the cluster health section) and the first autotuned point (whose prediction
names the search's objective). A digest is the columns plus those few records whole (`notable`),
so a reader forked by the `report` command (bench/analysis/report_reader.py) sends its share as a digest, at a fraction
of what sending its records would cost, and digests of consecutive shares `merge` into the digest
of all of them. The report built from a digest is the report built from its records.

`RecordRows` is the same, row by row: each record's file, its row of the columns, which rows are
autotuned and, by row, the records kept whole.
The report's reader reads records into rows, which bench/analysis/report/digest_cache.py keeps
between reports and puts together with rows read afresh; `RecordRows.digest()` is the digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.analysis.report.columns import concat_columns, frame_columns
from bench.analysis.stats import stragglers
from bench.schema.options import PreflightSettings
from bench.schema.record import RunResult


@dataclass(frozen=True)
class RecordsDigest:
    """`columns`: frame_columns of the records, in their order; `notable`: the records that show
    more than their row (`is_notable`), in the same order."""

    columns: dict[str, list[Any]]
    notable: list[RunResult]

    def __len__(self) -> int:
        return len(self.columns["status"])

    @property
    def ok(self) -> int:
        """How many of the records finished ok."""
        return self.columns["status"].count("ok")


def digest(records: Sequence[RunResult]) -> RecordsDigest:
    """The digest of these records."""
    records = list(records)
    return RecordsDigest(frame_columns(records), _notable(records))


def merge(parts: Sequence[RecordsDigest]) -> RecordsDigest:
    """The digest of the records of every part, in the order given (parts of consecutive records)."""
    return RecordsDigest(
        concat_columns([p.columns for p in parts]), _first_autotuned([r for p in parts for r in p.notable])
    )


@dataclass(frozen=True)
class RecordRows:
    """Records as rows: `files` (each record's file, as a text), `columns` (frame_columns of the records,
    in the same order), `tuned` (the rows of autotuned records, in order) and `notable` (row -> record:
    every record that shows health, and the first autotuned one, which is all of an autotuned record the
    report reads: an autotuned sweep's every point is autotuned, and its records are not kept whole).
    The first of `tuned` has its record in `notable` (bench/analysis/report/digest_cache.py plans for it
    when it puts rows together)."""

    files: list[str]
    columns: dict[str, list[Any]]
    notable: dict[int, RunResult]
    tuned: list[int]

    def __len__(self) -> int:
        return len(self.files)

    def digest(self) -> RecordsDigest:
        """The digest of these records."""
        # The first autotuned row always has its record (but where its file went between the listing and
        # the reading: then the next one's, whose objective is the same: a sweep autotunes by one).
        first = next((row for row in self.tuned if row in self.notable), None)
        rows = sorted(row for row, record in self.notable.items() if row == first or _shows_health(record))
        return RecordsDigest(self.columns, [self.notable[row] for row in rows])


def record_rows(records: Sequence[RunResult], files: Sequence[str]) -> RecordRows:
    """These records (read from `files`, in the same order) as rows."""
    records = list(records)
    tuned = [row for row, record in enumerate(records) if autotune_objective(record) is not None]
    notable = {row: record for row, record in enumerate(records) if _shows_health(record)}
    if tuned:
        notable[tuned[0]] = records[tuned[0]]
    return RecordRows(list(files), frame_columns(records), notable, tuned)


def step_time_stragglers(record: RunResult) -> dict[int, float]:
    """rank -> how much slower its median step time is than the point's ranks' median (a fraction), for
    the ranks beyond the straggler rule (bench.analysis.stats.stragglers with the preflight's
    settings); empty for a point that did not finish ok or ran on one rank."""
    medians = record.metrics.rank_step_time_medians_s
    if record.status != "ok" or len(medians) < 2:
        return {}
    rule = PreflightSettings()
    return stragglers(dict(enumerate(medians)), rule.straggler_k, rule.straggler_floor)


def autotune_objective(record: RunResult) -> str | None:
    """The objective the sweep's search ranked this point's configuration by (None: not autotuned)."""
    autotune = (record.prediction or {}).get("autotune")
    if isinstance(autotune, dict) and autotune.get("objective"):
        return str(autotune["objective"])
    return None


def is_notable(record: RunResult) -> bool:
    """Whether the report shows something of this record beyond its row: a step-time straggler or a
    loaded host (cluster health), or its autotune objective."""
    return _shows_health(record) or autotune_objective(record) is not None


def _notable(records: list[RunResult]) -> list[RunResult]:
    return _first_autotuned([record for record in records if is_notable(record)])


def _first_autotuned(records: list[RunResult]) -> list[RunResult]:
    """The records, but for every autotuned one after the first that shows nothing else: only the first
    one's objective is read (an autotuned sweep's every point carries it)."""
    kept, objective_seen = [], False
    for record in records:
        tuned = autotune_objective(record) is not None
        if tuned and objective_seen and not _shows_health(record):
            continue
        objective_seen |= tuned
        kept.append(record)
    return kept


def _shows_health(record: RunResult) -> bool:
    """Whether the cluster health section has a row of this record."""
    return bool(step_time_stragglers(record)) or any(host.loaded for host in record.metrics.host_load)
