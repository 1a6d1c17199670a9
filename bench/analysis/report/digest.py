"""What the report needs of many records, small enough to send between processes (`RecordsDigest`).

The report reads its records through the frame's columns (columns.py), but for a few records it
shows more than a row: a point whose ranks include a step-time straggler, a point measured on a
loaded host (both in the cluster health section) and the first autotuned point (whose prediction
names the search's objective). A digest is the columns plus those few records whole (`notable`).
The report built from a digest is the report built from its records.

`RecordRows` is the same, row by row: each record's file, its row of the columns, which rows are
autotuned and, by row, the records kept whole. A worker that reads a chunk of a folder for the
report (bench/analysis/report/reading.py) returns it as rows, at a fraction of what pickling its
records would cost; rows of consecutive chunks `concat_rows` into the rows of all of them,
bench/analysis/report/digest_cache.py keeps them between reports, and `RecordRows.digest()` is the
digest.
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
    more than their row (`is_notable`; of the autotuned ones the first), in the same order."""

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
    notable, tuned = _kept_whole(records)
    return _digest_of(frame_columns(records), notable, tuned)


@dataclass(frozen=True)
class RecordRows:
    """Records as rows: `files` (each record's file, as a text), `columns` (frame_columns of the records,
    in the same order), `tuned` (the rows of autotuned records, in order) and `notable` (row -> record:
    every record shown whole for another reason than its autotune objective, and the first autotuned one,
    which is all of an autotuned record the report reads: an autotuned sweep's every point is autotuned,
    and its records are not kept whole).
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
        return _digest_of(self.columns, self.notable, self.tuned)


def record_rows(records: Sequence[RunResult], files: Sequence[str]) -> RecordRows:
    """These records (read from `files`, in the same order) as rows."""
    records = list(records)
    notable, tuned = _kept_whole(records)
    return RecordRows(list(files), frame_columns(records), notable, tuned)


def concat_rows(parts: Sequence[RecordRows]) -> RecordRows:
    """The rows of every part (at least one), one after the other (parts of consecutive records)."""
    parts = [part for part in parts if len(part)] or list(parts[:1])
    if len(parts) == 1:
        return parts[0]
    files, notable, tuned, offset = [], {}, [], 0
    for part in parts:
        files += part.files
        notable |= {offset + row: record for row, record in part.notable.items()}
        tuned += [offset + row for row in part.tuned]
        offset += len(part)
    return RecordRows(files, concat_columns([part.columns for part in parts]), notable, tuned)


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
    loaded host (cluster health), or its autotune objective. A new reason goes into _shown_whole."""
    return _shown_whole(record) or autotune_objective(record) is not None


def _kept_whole(records: list[RunResult]) -> tuple[dict[int, RunResult], list[int]]:
    """(row -> record, for the records the report may show whole: those it shows more of for another
    reason than their autotune objective, and the first autotuned one; the autotuned rows): only the
    first autotuned record's objective is read (an autotuned sweep's every point carries it)."""
    tuned = [row for row, record in enumerate(records) if autotune_objective(record) is not None]
    notable = {row: record for row, record in enumerate(records) if _shown_whole(record)}
    if tuned:
        notable[tuned[0]] = records[tuned[0]]
    return notable, tuned


def _digest_of(columns: dict[str, list[Any]], notable: dict[int, RunResult], tuned: list[int]) -> RecordsDigest:
    """The digest of rows: their columns, and in row order the records the report reads whole (those
    shown whole, and the first autotuned one; where its file went between the listing and the reading,
    the next one kept, whose objective is the same: a sweep autotunes by one)."""
    first = next((row for row in tuned if row in notable), None)
    rows = sorted(row for row, record in notable.items() if row == first or _shown_whole(record))
    return RecordsDigest(columns, [notable[row] for row in rows])


def _shown_whole(record: RunResult) -> bool:
    """Whether the report shows more of this record than its row for another reason than its autotune
    objective: a row of the cluster health section (a step-time straggler, a loaded host), or a run the
    hosts that keep being slow count (bench/analysis/slow_hosts.py: ok, over two hosts or more)."""
    spans_hosts = record.status == "ok" and len(set(record.env.rank_hosts)) >= 2
    return spans_hosts or bool(step_time_stragglers(record)) or any(host.loaded for host in record.metrics.host_load)
