"""A results folder read for the report (`read_folder`): the digest of its records, the files that
could not be read, each record's folder and the folder's preflight records (`Loaded`; `loaded` of
records read elsewhere: a store's, one result.json's, bench/analysis/sources.py).

A folder is listed in one walk (bench/analysis/folder_listing.py: its result and preflight files),
and only the result files whose rows were not kept by the last report of it are read
(bench/analysis/report/digest_cache.py); the kept rows and the rows read are put together in file
order, the rows of reading every record, and kept again when anything changed. Reading and
validating records is most of a big folder's reading, and every record is read alone: with a worker
pool (bench/analysis/pool.py) and at least PARALLEL_MIN_RECORDS files to read, the files go to the
workers in chunks of CHUNK_RECORDS, each task returning its chunk's rows
(bench/analysis/report/digest.py `RecordRows`: the frame's columns and the few records the report
shows whole, a fraction of what pickling the validated records would cost) and the problems of the
files it could not read. The last chunks are read here while the pool's first worker is starting,
and so is a chunk whose worker failed. Fewer files, or no pool: they are all read here. The result
is the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from bench.analysis import records
from bench.analysis.folder_listing import Identities, listed
from bench.analysis.pool import result_or_here, starting, submit
from bench.analysis.records import RecordProblem
from bench.analysis.report import digest_cache
from bench.analysis.report.digest import RecordRows, RecordsDigest, digest, record_rows
from bench.schema.protocol import PREFLIGHT_RECORD, RESULT_FILE
from bench.schema.record import RunResult

# Below this many files to read, one process reads them faster than a pool starts: no worker reads.
PARALLEL_MIN_RECORDS = 1000
# Files per task: small enough that the workers finish together, big enough that a task's own cost is small.
CHUNK_RECORDS = 500


@dataclass(frozen=True)
class Loaded:
    """A results folder or store as the report reads it: the digest of its records (in file order),
    the files that could not be read, each record's folder by (sweep, point id) (none for a store),
    and the folder's preflight records' files where its listing found them (None: not listed)."""

    digest: RecordsDigest
    problems: list[RecordProblem]
    point_dirs: Mapping[tuple[str, str], Path]
    preflight_files: list[str] | None = None


class PointDirs(Mapping[tuple[str, str], Path]):
    """(sweep, point id) -> the folder of the result file read for it, made a Path when asked for (the
    report asks for the few whose telemetry it draws, not for every point's)."""

    def __init__(self, files: Mapping[tuple[str, str], str]) -> None:
        self._files = files

    def __getitem__(self, key: tuple[str, str]) -> Path:
        return Path(self._files[key]).parent

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def read_folder(
    path: Path | str, keep: bool = True, pool: Executor | None = None, listing: Listing | None = None
) -> Loaded:
    """Every record's digest, the problems and the point folders of a results folder. `keep`: use and
    update the folder's kept rows (False: read every record, keep nothing). `pool`: the workers that
    read a big folder's files (None: all read here). `listing`: the folder's `listed(path, keep)`,
    where the caller has it (None: listed here)."""
    path = Path(path)
    files, found = listing or listed(path, keep)
    results = files[RESULT_FILE]
    plan = digest_cache.plan(path, results, found, digest_cache.load(path) if keep else None)
    unread = [results[position] for position in plan.unread]
    shares = _read_chunks(unread, pool) if pool is not None and len(unread) >= PARALLEL_MIN_RECORDS else [_read(unread)]
    rows, kept = plan.assemble([rows for rows, _ in shares], lambda files: _read(files)[0])
    if keep and kept is not None:
        digest_cache.save(path, kept)
    problems = [problem for _, share in shares for problem in share]
    columns = rows.columns
    point_files = dict(zip(zip(columns["sweep"], columns["point_id"]), rows.files, strict=True))
    return Loaded(rows.digest(), problems, PointDirs(point_files), files[PREFLIGHT_RECORD])


def loaded(
    records: list[RunResult], problems: list[RecordProblem], point_dirs: Mapping[tuple[str, str], Path]
) -> Loaded:
    """Records read elsewhere (a store's, one result.json's: bench.analysis.sources.load_results) as the report reads them."""
    return Loaded(digest(records), problems, point_dirs)


# A folder's files by name (bench/analysis/folder_listing.py `listed`) and its result files' identities.
Listing = tuple[dict[str, list[str]], Identities]
# What reading some files gives: the rows of the records read, the problems of the others.
_Share = tuple[RecordRows, list[RecordProblem]]


def _read(files: list[str]) -> _Share:
    """These result files read: their records' rows, the problems of the others (a worker's task)."""
    if not files:
        return record_rows([], []), []
    located, problems = records.read_records(files)
    return record_rows([record for record, _ in located], [str(file) for _, file in located]), problems


def _read_chunks(files: list[str], pool: Executor) -> list[_Share]:
    """`_read` of the files in chunks of CHUNK_RECORDS, in file order: by the pool's workers, but for
    the last chunks, read here while the pool's first worker is still starting (a task given to the
    pool would wait for it: this process would only wait too); a chunk whose worker failed is read here."""
    chunks = [files[start : start + CHUNK_RECORDS] for start in range(0, len(files), CHUNK_RECORDS)]
    read_here: list[_Share] = []
    while starting(pool) and len(chunks) > 1:
        read_here.insert(0, _read(chunks.pop()))
    tasks = [submit(pool, _read, chunk) for chunk in chunks]
    return [
        result_or_here(task, lambda chunk=chunk: _read(chunk), "reading records")
        for task, chunk in zip(tasks, chunks, strict=True)
    ] + read_here
