"""A results folder's rows kept from one report to the next: a record whose file has not changed is
not read again (`Kept`, `plan`, `Plan.assemble`).

Reading, validating and taking the row of 10,000 records is 1.3-1.5 s of CPU, the largest share of
a big report after its figures; and a folder is reported many times (while its sweep runs, after it,
with another title, after one more point), each time mostly of records read the time before. So a
report of a folder keeps its rows (bench/analysis/report/digest.py `RecordRows`: each record's row
of the frame's columns, the notable records whole) with each file's identity (size, modification and
change times in ns, inode: what a rewrite, even an atomic one or one that keeps the size and the
modification time, changes) in the user's cache folder (bench/config/paths.py `cache_dir`), one file
per folder. The next report of the folder lists it, stats its result files, reads only those that
are new or whose identity changed, drops those that are gone, and writes the kept rows again when
anything changed. Its digest is the digest of reading every record: same rows, same order.

Kept rows are used only by the code that made them (`code_version`: the bench package's source
files by name, size and modification time, the Python and pydantic versions), so a change to the
columns, the record schema or a migration reads every record again. A file whose kept rows cannot be
read (none yet, another version, a damaged or foreign file) is no kept rows, and a cache folder that
cannot be written is no cache: the report is the same either way, only slower. The file is a pickle
(a tenth of the time of JSON for the nested columns): it is only ever read from the user's own cache
folder, never from a results folder or anything a report is pointed at.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import operator
import os
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.config.paths import cache_dir
from bench.schema.files import write_bytes_atomic

if TYPE_CHECKING:  # imported when rows are put together: the report's reader loads kept rows before it
    from bench.analysis.report.digest import RecordRows  # forks, and digest.py brings in the planner
    from bench.schema.record import RunResult

# The layout of a kept-rows file; part of `code_version`, so a new layout never reads an old one.
KEPT_FORMAT = 1
# The cache's sub-folder of kept rows (one file per results folder).
KEPT_FOLDER = "report-rows"
# A file's identity: size, modification and change times (ns), inode. None: it could not be statted.
FileKey = tuple[int, int, int, int]


@dataclass(frozen=True)
class Kept:
    """A folder's rows as the last report left them: `names` (each file relative to the folder),
    `keys` (their identities then), and the rows read from them: `columns` and `notable` (row ->
    record), as in RecordRows."""

    names: list[str]
    keys: list[FileKey]
    columns: dict[str, list[Any]]
    notable: dict[int, RunResult]

    def rows(self, files: Sequence[str]) -> RecordRows:
        """These rows, read from `files` (one per row)."""
        from bench.analysis.report.digest import RecordRows

        return RecordRows(list(files), self.columns, self.notable)


def file_keys(files: Sequence[str]) -> list[FileKey | None]:
    """Each file's identity now (None for one that is gone)."""
    keys: list[FileKey | None] = []
    for file in files:
        try:
            stat = os.stat(file)
        except OSError:
            keys.append(None)
            continue
        keys.append((stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino))
    return keys


@functools.cache
def code_version() -> str:
    """What kept rows must have been made by to be used: this code (its source files by name, size and
    modification time: any edit, checkout or install changes it), the Python and the pydantic."""
    import pydantic

    package = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256(f"{KEPT_FORMAT} {sys.version} {pydantic.VERSION}\n".encode())
    for folder, subfolders, files in os.walk(package):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                stat = os.stat(os.path.join(folder, name))
                digest.update(f"{os.path.relpath(folder, package)}/{name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def kept_file(folder: Path | str) -> Path:
    """Where the kept rows of a results folder are (named by its real path: any spelling of it)."""
    name = hashlib.sha256(os.path.realpath(folder).encode()).hexdigest()[:32]
    return cache_dir() / KEPT_FOLDER / f"{name}.pickle"


def load(folder: Path | str) -> Kept | None:
    """The kept rows of `folder`, or None where there are none this code may use."""
    try:
        with open(kept_file(folder), "rb") as file:
            kept = pickle.load(file)
    except Exception:  # none yet, unreadable, damaged or from other code: no kept rows
        return None
    if not isinstance(kept, dict) or kept.get("version") != code_version():
        return None
    if kept.get("folder") != os.path.realpath(folder) or not isinstance(kept.get("kept"), Kept):
        return None
    return kept["kept"]


def save(folder: Path | str, kept: Kept) -> None:
    """Keep `kept` as the rows of `folder` (atomically: a report reading at the same time gets the old
    rows or the new); a cache folder that cannot be written is left as it is."""
    data = {"version": code_version(), "folder": os.path.realpath(folder), "kept": kept}
    path = kept_file(folder)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass(frozen=True)
class Plan:
    """Which of a folder's listed result files must be read (`unread`, their positions in the list)
    and which rows of `kept` the others are (`kept_rows`: list position -> kept row)."""

    folder: str
    files: list[str]
    keys: list[FileKey | None]
    kept: Kept | None
    kept_rows: dict[int, int]
    unread: list[int]

    def assemble(self, fresh: Sequence[RecordRows]) -> tuple[RecordRows, Kept | None]:
        """The folder's rows in list order, from the kept rows and `fresh` (the rows read from the
        unread files, in their order; a file that could not be read has none), and what to keep for
        the next report (None: the same as what is kept already)."""
        kept = self.kept.rows(self.kept.names) if self.kept is not None else None
        read = _concat([kept, *fresh] if kept is not None else list(fresh))
        kept_count = len(kept) if kept is not None else 0
        fresh_row = {file: kept_count + row for row, file in enumerate(read.files[kept_count:])}
        sources, positions = [], []
        for position, file in enumerate(self.files):
            source = self.kept_rows.get(position)
            if source is None:
                source = fresh_row.get(file)
            if source is not None:
                sources.append(source)
                positions.append(position)
        if sources == list(range(kept_count)) and len(read) == kept_count and self.kept is not None:
            return self.kept.rows([self.files[p] for p in positions]), None
        rows = _take(read, sources, [self.files[p] for p in positions])
        strip = len(os.path.join(self.folder, ""))
        names = [self.files[p][strip:] for p in positions]
        keys = [self.keys[p] for p in positions]
        if any(key is None for key in keys):  # gone before it was read: nothing to keep for it
            return rows, None
        return rows, Kept(names, keys, rows.columns, rows.notable)


def plan(folder: Path | str, files: list[str], keys: list[FileKey | None], kept: Kept | None) -> Plan:
    """What to read of `files` (a folder's result files as listed: the folder joined with each one's
    path in it) given their identities now and the rows kept by the last report."""
    folder = str(folder)
    if kept is None:
        return Plan(folder, files, keys, None, {}, list(range(len(files))))
    strip = len(os.path.join(folder, ""))
    row_of = dict(zip(kept.names, range(len(kept.names))))
    kept_rows, unread = {}, []
    for position, (file, key) in enumerate(zip(files, keys, strict=True)):
        row = row_of.get(file[strip:])
        if row is not None and key is not None and kept.keys[row] == key:
            kept_rows[position] = row
        else:
            unread.append(position)
    return Plan(folder, files, keys, kept, kept_rows, unread)


def _concat(parts: Sequence[RecordRows]) -> RecordRows:
    """The rows of every part (at least one), one after the other."""
    from bench.analysis.report.digest import RecordRows

    parts = [part for part in parts if len(part)] or list(parts[:1])
    if len(parts) == 1:
        return parts[0]
    files, notable, offset = [], {}, 0
    for part in parts:
        files += part.files
        notable |= {offset + row: record for row, record in part.notable.items()}
        offset += len(part)
    columns = {name: [value for part in parts for value in part.columns[name]] for name in parts[0].columns}
    return RecordRows(files, columns, notable)


def _take(rows: RecordRows, sources: list[int], files: list[str]) -> RecordRows:
    """Rows `sources` of `rows`, in that order, as the rows of `files`."""
    from bench.analysis.report.digest import RecordRows

    if not sources:
        return RecordRows([], {name: [] for name in rows.columns}, {})
    take = operator.itemgetter(*sources)
    single = len(sources) == 1
    columns = {name: [take(values)] if single else list(take(values)) for name, values in rows.columns.items()}
    notable = {row: rows.notable[source] for row, source in enumerate(sources) if source in rows.notable}
    return RecordRows(files, columns, notable)
