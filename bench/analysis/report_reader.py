"""A results folder read for the report by two processes at once (`ReportLoader`).

Reading, validating and turning 10,000 records into the frame's columns is a third of what a big
report costs, and every record is read alone. So the report reads only the records whose files are
new or changed since the last report of the folder (bench/analysis/report/digest_cache.py: the
others' rows are kept in the user's cache folder), and shares those out. The `report` command forks
a process that lists the folder first thing, before it imports the record schema
(bench/analysis/folder_listing.py: the result and preflight files in one walk, the result files'
identities where rows are kept); once the schema is imported, `start` loads the folder's kept rows,
takes the listing, plans what to read (digest_cache.plan) and forks the reader on the later share of
it (bench/analysis/forking.py `Worker`), before this process imports pandas. The reader reads its
share and sends their rows (report/digest.py `RecordRows`: the frame's columns and the few records
the report shows whole: a fraction of what its records would cost to send, a validated record
pickling as slowly as it validates) and the problems of those it could not read. This process
meanwhile imports what the report needs, then reads its own share, and the kept rows and the two
shares are put together in file order into the rows one process makes of the whole folder; they
are kept again when anything changed. A store or one result.json (no listing, no reader, nothing
kept), one CPU or a platform where forking is unsafe (none forked): everything is listed and read
here, with the same result; so is the reader's share when it dies. Fewer than PARALLEL_MIN_RECORDS
files to read: no reader, they are read here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.analysis import folder_listing
from bench.analysis.forking import Worker
from bench.analysis.report import digest_cache
from bench.schema.protocol import PREFLIGHT_RECORD, RESULT_FILE

if TYPE_CHECKING:
    from bench.analysis.records import RecordProblem
    from bench.analysis.report.digest import RecordRows, RecordsDigest
    from bench.analysis.report.digest_cache import Kept

# Below this many records to read one process reads them in well under a second: the reader reads none.
PARALLEL_MIN_RECORDS = 1000
# The share of the files this process reads itself: the reader starts reading as soon as the schema
# is imported (the folder's list is there by then), this process only after pandas and the report's
# modules, 0.3-0.4 s later, so the reader takes the larger share. At 37 % this process finished its
# share from 0.27 s before the reader to 0.25 s after it (six runs; timestamps of both processes'
# reading, docs/results/reports.md).
OWN_SHARE = 0.37


@dataclass(frozen=True)
class Loaded:
    """A results folder or store as the report reads it: the digest of its records (in file order),
    the files that could not be read, each record's folder by (sweep, point id) (none for a store),
    and the folder's preflight records' files where the reader's walk found them (None: not listed)."""

    digest: RecordsDigest
    problems: list[RecordProblem]
    point_dirs: Mapping[tuple[str, str], Path]
    preflight_files: list[str] | None = None


class PointDirs(Mapping[tuple[str, str], Path]):
    """(sweep, point id) -> the folder of the result file read for it, made a Path when asked for: the
    report asks for the few whose telemetry it draws, and 10,000 Paths cost 0.15-0.2 s to build."""

    def __init__(self, files: Mapping[tuple[str, str], str]) -> None:
        self._files = files

    def __getitem__(self, key: tuple[str, str]) -> Path:
        return Path(self._files[key]).parent

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


class ReportLoader:
    """`start` (takes the folder's listing, forks the reader on its share), then `load()`; `close` stops
    the reader and the listing process."""

    def __init__(self, path: Path, keep: bool = False) -> None:
        self._path, self._keep = path, keep
        self._kept: Kept | None = None  # the folder's rows the last report kept (`keep`)
        self._workers: list[Worker] = []  # the listing process and the reader, stopped at close
        self._reader: Worker | None = None
        self._plan: digest_cache.Plan | None = None  # what to read, once the folder is listed

    @classmethod
    def start(cls, path: Path | str, keep: bool = True, listing: Worker | None = None) -> ReportLoader:
        """Load the folder's kept rows, take its listing (`listing`: the process listing it since the
        command started, bench/analysis/folder_listing.py `start`; None: listed here), plan what to read
        and fork the reader on the later share of it now (where it may fork and there is enough to
        read); nothing starts for a file. `keep`: use and update the kept rows (False: read every
        record, keep nothing)."""
        path = Path(path)
        loader = cls(path, keep=keep)
        if listing is not None:
            loader._workers.append(listing)
        try:
            if path.is_dir():
                loader._kept = digest_cache.load(path) if keep else None
                loader._plan_reading(listing or Worker())
        except BaseException:  # nothing forked is left behind
            loader.close()
            raise
        return loader

    def _plan_reading(self, listing: Worker) -> None:
        listed, found = listing.result(lambda: folder_listing.listed(self._path, self._keep))
        listing.finish()  # it has sent everything: it ends while this process goes on
        self._listed = listed
        files = listed[RESULT_FILE]
        self._plan = digest_cache.plan(self._path, files, found, self._kept)
        self._unread = [files[position] for position in self._plan.unread]
        self._split = own_share(len(self._unread))
        if self._split < len(self._unread):
            reader = Worker.start(_read_share, self._unread[self._split :])
            if reader.running:
                self._reader = reader
                self._workers.append(reader)
            else:  # one CPU, or forking unsafe or failing: all of it read here, at once
                self._split = len(self._unread)

    def load(self) -> Loaded:
        """Every record's digest, the problems and the point folders (ValueError where `path` is
        neither a results folder, a result.json nor a store, as bench.analysis.sources.load_results)."""
        if not self._path.is_dir():
            return _load_here(self._path)
        if self._plan is None:  # a folder now, not when the loader started: listed here
            self._plan_reading(Worker())
        unread, split = self._unread, self._split
        shares = [_read(unread[:split])]
        if self._reader is not None:
            shares.append(self._reader.result(lambda: _read(unread[split:])))
            self._reader.finish()  # it has sent everything: it ends while this process goes on
        rows, kept = self._plan.assemble([rows for rows, _ in shares], lambda files: _read(files)[0])
        if self._keep and kept is not None:
            digest_cache.save(self._path, kept)
        problems = [problem for _, problems in shares for problem in problems]
        return _loaded(rows, problems, self._listed[PREFLIGHT_RECORD])

    def close(self) -> None:
        """Stop the reader and the listing process (reaped; killed if still at work)."""
        for worker in self._workers:
            worker.close()

    def __enter__(self) -> ReportLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def own_share(files: int) -> int:
    """How many of the files to read (the first ones) this process reads: all of a few."""
    return files if files < PARALLEL_MIN_RECORDS else round(files * OWN_SHARE)


# What a share's reading gives: the rows of the records read, the problems of the others.
_Share = tuple["RecordRows", list["RecordProblem"]]


def _read_share(paths: list[str]) -> Iterator[_Share]:
    """The reader's task: its share's `_read`."""
    yield _read(paths)


def _read(paths: list[str]) -> _Share:
    """These result files read: their records' rows, the problems of the others."""
    from bench.analysis.records import read_records
    from bench.analysis.report.digest import record_rows

    if not paths:
        return record_rows([], []), []
    located, problems = read_records(paths)
    return record_rows([record for record, _ in located], [str(path) for _, path in located]), problems


def _loaded(rows: RecordRows, problems: list[RecordProblem], preflight_files: list[str]) -> Loaded:
    columns = rows.columns
    files = dict(zip(zip(columns["sweep"], columns["point_id"]), rows.files, strict=True))
    return Loaded(rows.digest(), problems, PointDirs(files), preflight_files)


def _load_here(path: Path) -> Loaded:
    """A store or one result.json, read here."""
    from bench.analysis.report.digest import digest
    from bench.analysis.sources import load_results

    records, problems, point_dirs = load_results(path)
    return Loaded(digest(records), problems, point_dirs)
