"""A results folder read for the report by two processes at once (`ReportLoader`).

Reading, validating and turning 10,000 records into the frame's columns is a third of what a big
report costs, and every record is read alone. So the report reads only the records whose files are
new or changed since the last report of the folder (bench/analysis/report/digest_cache.py: the
others' rows are kept in the user's cache folder), and shares those out: the `report` command
loads the folder's kept rows, then forks a reader first thing (bench/analysis/forking.py `Worker`),
before this process imports pandas. The reader lists the folder's result and preflight files in one
walk (`file_texts_by_name`), stats the result files and sends both; both processes then know which
files to read (digest_cache.plan, from the same list, identities and kept rows), and the reader
reads the later share of them and sends their rows (report/digest.py `RecordRows`: the frame's columns
and the few records the report shows whole: a fraction of what its records would cost to send, a
validated record pickling as slowly as it validates) and the problems of those it could not read.
This process meanwhile imports what the report needs, then reads its own share, and the kept rows
and the two shares are put together in file order into the rows one process makes of the whole
folder; they are kept again when anything changed. A store or one result.json (no reader, nothing
kept), one CPU or a platform where forking is unsafe (none forked): everything is read here, with
the same result; so is the reader's share when it dies. Fewer than PARALLEL_MIN_RECORDS files to read:
the reader lists and stats, is then stopped, and they are read here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.analysis.forking import Worker
from bench.analysis.report import digest_cache
from bench.schema.protocol import PREFLIGHT_RECORD, RESULT_FILE

if TYPE_CHECKING:
    from bench.analysis.records import RecordProblem
    from bench.analysis.report.digest import RecordRows, RecordsDigest
    from bench.analysis.report.digest_cache import Identities, Kept

# Below this many records to read one process reads them in well under a second: the reader reads none.
PARALLEL_MIN_RECORDS = 1000
# The share of the files this process reads itself: it imports pandas and the report's modules
# while the reader lists the folder, so the reader takes the larger share. At 45 % this process
# finished its share 0.10-0.31 s after the reader (three runs), at 40 % from 0.07 s after it to
# 0.30 s before it (four runs; timestamps of both processes' reading at 9e23ee7, the VM in a slow
# phase, docs/results/reports.md): 42 %, between.
OWN_SHARE = 0.42


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
    """`start` (forks the reader on a folder), then `load()`; `close` stops the reader."""

    def __init__(self, path: Path, worker: Worker | None = None, kept: Kept | None = None, keep: bool = False) -> None:
        self._path, self._worker, self._kept, self._keep = path, worker, kept, keep

    @classmethod
    def start(cls, path: Path | str, keep: bool = True) -> ReportLoader:
        """Load the folder's kept rows and fork the reader on it now (where it may fork); nothing starts
        for a file. `keep`: use and update the kept rows (False: read every record, keep nothing)."""
        path = Path(path)
        if not path.is_dir():
            return cls(path)
        # Before the fork: the reader shares them, and the code's version is taken before anything is read.
        kept = digest_cache.load(path) if keep else None
        return cls(path, Worker.start(_list_and_read, path, kept, keep), kept, keep)

    def load(self) -> Loaded:
        """Every record's digest, the problems and the point folders (ValueError where `path` is
        neither a results folder, a result.json nor a store, as bench.analysis.sources.load_results)."""
        if not self._path.is_dir():
            return _load_here(self._path)
        worker = self._worker if self._worker is not None and self._worker.running else None
        if worker is None:
            listed, found = _listed_with_identities(self._path, self._keep)
        else:
            listed, found = worker.result(lambda: _listed_with_identities(self._path, self._keep))
        files = listed[RESULT_FILE]
        plan = digest_cache.plan(self._path, files, found, self._kept)
        unread = [files[position] for position in plan.unread]
        split = own_share(len(unread)) if worker is not None else len(unread)
        if worker is not None and split == len(unread):  # few to read: read here, the reader stopped before it reads
            worker.close()
        shares = [_read(unread[:split])]
        if split < len(unread):
            shares.append(worker.result(lambda: _read(unread[split:])))
            worker.finish()  # it has sent everything: it ends while this process goes on
        rows, kept = plan.assemble([rows for rows, _ in shares], lambda files: _read(files)[0])
        if self._keep and kept is not None:
            digest_cache.save(self._path, kept)
        problems = [problem for _, problems in shares for problem in problems]
        return _loaded(rows, problems, listed[PREFLIGHT_RECORD])

    def close(self) -> None:
        """Stop the reader (reaped; killed if it still works)."""
        if self._worker is not None:
            self._worker.close()

    def __enter__(self) -> ReportLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def own_share(files: int) -> int:
    """How many of the files to read (the first ones) this process reads: all of a few."""
    return files if files < PARALLEL_MIN_RECORDS else round(files * OWN_SHARE)


# What a share's reading gives: the rows of the records read, the problems of the others.
_Share = tuple["RecordRows", list["RecordProblem"]]


def _list_and_read(path: Path, kept: Kept | None, keep: bool) -> Iterator[object]:
    """The reader's task: the folder's result and preflight files (one walk; as texts: a fraction of
    the cost of sending Paths) with the result files' identities, then its share's `_read`."""
    listed, found = _listed_with_identities(path, keep)
    yield listed, found
    files = listed[RESULT_FILE]
    unread = [files[position] for position in digest_cache.plan(path, files, found, kept).unread]
    yield _read(unread[own_share(len(unread)) :])


def _listed_with_identities(path: Path, keep: bool) -> tuple[dict[str, list[str]], Identities]:
    """The folder's result and preflight files, and the result files' identities (none statted when
    no rows are kept)."""
    from bench.analysis.records import file_texts_by_name

    listed = file_texts_by_name(path, (RESULT_FILE, PREFLIGHT_RECORD))
    files = listed[RESULT_FILE]
    return listed, digest_cache.identities(files) if keep else digest_cache.Identities([None] * len(files), 0)


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
