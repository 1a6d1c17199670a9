"""A results folder read for the report by two processes at once (`ReportLoader`).

Reading, validating and turning 10,000 records into the frame's columns is a third of what a big
report costs, and every record is read alone. So the `report` command forks a reader first thing
(bench/analysis/forking.py `Worker`), before this process imports pandas: the reader lists the
folder's result and preflight files in one walk (`file_texts_by_name`), sends the list, then reads the later share of them and
sends its digest (report/digest.py: the frame's columns and the few records the report shows whole: a
fraction of what its records would cost to send, a validated record pickling as slowly as it
validates), the files it read and the problems of those it could not. This process meanwhile
imports what the report needs, then reads its own share, and the two digests merge in file order
into the digest one process makes of the whole folder. A store or one result.json (no reader), one
CPU or a platform where forking is unsafe (none forked): everything is read here
(bench/analysis/sources.py), with the same result; so is the reader's share when it dies. A folder
of fewer than PARALLEL_MIN_RECORDS files is listed by the reader, which is then stopped, and read here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.analysis.forking import Worker
from bench.schema.protocol import PREFLIGHT_RECORD, RESULT_FILE

if TYPE_CHECKING:
    from bench.analysis.records import RecordProblem
    from bench.analysis.report.digest import RecordsDigest

# Below this many records one process reads them in well under a second: the reader reads none.
PARALLEL_MIN_RECORDS = 1000
# The share of the files this process reads itself: it imports pandas and the report's modules
# while the reader lists the folder and imports the record schema, so the reader takes the larger
# share (both shares took as long at 45 %, docs/results/reports.md).
OWN_SHARE = 0.45


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

    def __init__(self, path: Path, worker: Worker | None = None) -> None:
        self._path, self._worker = path, worker

    @classmethod
    def start(cls, path: Path | str) -> ReportLoader:
        """Fork the reader on a results folder now (where it may fork); nothing starts for a file."""
        path = Path(path)
        return cls(path, Worker.start(_list_and_read, path) if path.is_dir() else None)

    def load(self) -> Loaded:
        """Every record's digest, the problems and the point folders (ValueError where `path` is
        neither a results folder, a result.json nor a store, as bench.analysis.sources.load_results)."""
        if self._worker is None or not self._worker.running:
            return _load_here(self._path)
        listed = self._worker.result(lambda: _listed(self._path))
        files = listed[RESULT_FILE]
        split = own_share(len(files))
        if split == len(files):  # a small folder: read here, the reader stopped before it reads
            self._worker.close()
        own = _read(files[:split])
        theirs = self._worker.result(lambda: _read(files[split:]))
        return _merged([own, theirs], listed[PREFLIGHT_RECORD])

    def close(self) -> None:
        """Stop the reader (reaped; killed if it still works)."""
        if self._worker is not None:
            self._worker.close()

    def __enter__(self) -> ReportLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def own_share(files: int) -> int:
    """How many of a folder's files (the first ones) this process reads: all of a small folder."""
    return files if files < PARALLEL_MIN_RECORDS else round(files * OWN_SHARE)


# What a share's reading gives: its digest, the paths it read (as texts, in order), its problems.
_Share = tuple["RecordsDigest", list[str], list["RecordProblem"]]


def _list_and_read(path: Path) -> Iterator[object]:
    """The reader's task: the folder's result and preflight files (one walk; as texts: a fraction of
    the cost of sending Paths), then its share's `_read`."""
    listed = _listed(path)
    yield listed
    files = listed[RESULT_FILE]
    yield _read(files[own_share(len(files)) :])


def _listed(path: Path) -> dict[str, list[str]]:
    from bench.analysis.records import file_texts_by_name

    return file_texts_by_name(path, (RESULT_FILE, PREFLIGHT_RECORD))


def _read(paths: list[str]) -> _Share:
    """These result files read: their records' digest, the paths read, the problems of the others."""
    from bench.analysis.records import read_records
    from bench.analysis.report.digest import digest

    located, problems = read_records(paths)
    return digest([record for record, _ in located]), [str(path) for _, path in located], problems


def _merged(shares: list[_Share], preflight_files: list[str]) -> Loaded:
    from bench.analysis.report.digest import merge

    found = merge([digest for digest, _, _ in shares])
    paths = [path for _, read, _ in shares for path in read]
    columns = found.columns
    files = dict(zip(zip(columns["sweep"], columns["point_id"]), paths, strict=True))
    return Loaded(
        found, [problem for _, _, problems in shares for problem in problems], PointDirs(files), preflight_files
    )


def _load_here(path: Path) -> Loaded:
    from bench.analysis.report.digest import digest
    from bench.analysis.sources import load_results

    records, problems, point_dirs = load_results(path)
    return Loaded(digest(records), problems, point_dirs)
