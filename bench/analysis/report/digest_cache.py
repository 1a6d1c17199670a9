"""A results folder's rows kept from one report to the next: a record whose file has not changed is
not read again (`Kept`, `load`, `save`, `plan`, `Plan.assemble`, `with_first_tuned`).

Reading, validating and taking the rows of a big folder's records is the largest share of its
report after the figures; and a folder is reported many times (while its sweep runs, after it,
with another title, after one more point), each time mostly of records read the time before. So a
report of a folder keeps its rows (bench/analysis/report/digest.py `RecordRows`: each record's row
of the frame's columns, which rows are autotuned, the few records kept whole) with each file's
identity (size, modification and change times in ns, inode: what a rewrite changes, even an atomic
one or one in place that keeps the size and sets the modification time back) in the user's cache
folder (bench/config/paths.py `cache_dir`), one file per folder. The next report of the folder lists
it, stats its result files, reads only those that are new or whose identity changed, drops those
that are gone, and keeps the rows again when anything changed. Its digest is the digest of reading
every record: the same rows in the same order.

Two rewrites of a file within one tick of the file system's clock, with a report statting it in
between, would leave its identity as it was; so, as git does with its index, a file changed within
RACY_NS (RACY_WHOLE_SECONDS_NS where the file system keeps whole seconds) of the moment it was statted
is kept without an identity, and read again by the next report.

Kept rows are used only by the code that made them (`code_version`: every file of the bench package
by name, size and modification time, the Python and the pydantic), so a change to the columns, the
record schema or a migration (its data files too) reads every record again. Kept rows that cannot be
read (none yet, another version, damaged, foreign, not this user's own or writable by others) are no
kept rows, and a cache folder that cannot be written (or no home folder to put it in) is no cache:
the report is the same either way, only slower. The file holds plain values (marshal) and the records
kept whole as JSON: nothing in it is code, and it is read only from the user's own cache folder.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import operator
import os
import stat as stat_mode
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.analysis.folder_listing import FileKey, Identities
from bench.config.paths import cache_dir
from bench.schema.files import write_bytes_atomic

if TYPE_CHECKING:  # imported when rows are put together: digest.py brings in the planner
    from bench.analysis.report.digest import RecordRows
    from bench.schema.record import RunResult

# The layout of a kept-rows file; part of `code_version`, so a new layout never reads an old one.
KEPT_FORMAT = 3
# The cache's sub-folder of kept rows (one file per results folder), this user's alone.
KEPT_FOLDER = "report-rows"
# Kept rows not used for this long are deleted when another folder's are kept (a folder reported
# once, a temporary one, a sweep long gone).
KEPT_DAYS = 30
# A file changed this close to its stat may change again in the same clock tick unseen: it is kept
# without an identity. A tick of a file system with sub-second times is a kernel tick (at most 10 ms).
RACY_NS = 50_000_000
RACY_WHOLE_SECONDS_NS = 2_000_000_000
# A kept-rows file: the header's size in this many bytes, the header (marshal: the format, the code's
# version, the folder), then the rows (marshal), read only where the header is this code's and folder's.
_SIZE_BYTES = 8


@dataclass(frozen=True)
class Kept:
    """A folder's rows as the last report left them: `names` (each file relative to the folder),
    `keys` (their identities then; None: read again), and the rows read from them: `columns`,
    `notable` (row -> record) and `tuned`, as in RecordRows."""

    names: list[str]
    keys: list[FileKey | None]
    columns: dict[str, list[Any]]
    notable: dict[int, RunResult]
    tuned: list[int]

    def rows(self, files: Sequence[str]) -> RecordRows:
        """These rows, read from `files` (one per row)."""
        from bench.analysis.report.digest import RecordRows

        return RecordRows(list(files), self.columns, self.notable, self.tuned)


@functools.cache
def code_version() -> str:
    """What kept rows must have been made by to be used: this code (every file of the package by name,
    size and modification time: any edit, checkout or install changes it), the Python and the pydantic.
    The `report` command asks first thing, so rows read by code edited meanwhile carry its old version."""
    import pydantic

    package = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256(f"{KEPT_FORMAT} {sys.version} {pydantic.VERSION}\n".encode())
    for folder, subfolders, files in os.walk(package):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__" and not name.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or name.endswith((".pyc", ".pyo")):
                continue  # an editor's lock or swap file, bytecode
            try:
                found = os.lstat(os.path.join(folder, name))
            except OSError:  # gone since the walk listed it
                continue
            digest.update(f"{os.path.relpath(folder, package)}/{name} {found.st_size} {found.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def kept_file(folder: Path | str) -> Path:
    """Where the kept rows of a results folder are (named by its real path: any spelling of it)."""
    name = hashlib.sha256(os.path.realpath(folder).encode()).hexdigest()[:32]
    return cache_dir() / KEPT_FOLDER / f"{name}.rows"


def load(folder: Path | str) -> Kept | None:
    """The kept rows of `folder`, or None where there are none this code may use."""
    try:
        return _load(folder)
    except Exception:  # none yet, damaged, foreign, no home folder: no kept rows
        return None


def save(folder: Path | str, kept: Kept) -> None:
    """Keep `kept` as the rows of `folder` (atomically: a report reading at the same time gets the old
    rows or the new; not fsynced: a crash loses a cache, never a result). Anything that stops it (no
    cache folder to be had, a full disk) leaves the cache as it was."""
    with contextlib.suppress(Exception):
        _save(folder, kept)


def _load(folder: Path | str) -> Kept | None:
    expected = _header(folder)  # the code's version first, whether or not rows are kept yet
    path = kept_file(folder)
    with open(path, "rb") as file:
        if not (_owned(os.fstat(file.fileno())) and _owned(os.stat(path.parent))):
            return None
        data = file.read()  # whole: marshal.load of a file reads it a few bytes at a time
    size = int.from_bytes(data[:_SIZE_BYTES], "little")
    if marshal.loads(data[_SIZE_BYTES : _SIZE_BYTES + size]) != expected:  # other code, another folder
        return None  # its values are not read
    body = marshal.loads(memoryview(data)[_SIZE_BYTES + size :])
    os.utime(path)  # used: not deleted as unused for KEPT_DAYS
    notable = {}
    if body["notable"]:
        from bench.schema.record import RunResult

        notable = {row: RunResult.model_validate_json(text) for row, text in body["notable"].items()}
    return Kept(body["names"], body["keys"], body["columns"], notable, body["tuned"])


def _save(folder: Path | str, kept: Kept) -> None:
    path = kept_file(folder)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    notable = {row: record.model_dump_json() for row, record in kept.notable.items()}
    body = {"names": kept.names, "keys": kept.keys, "columns": kept.columns, "notable": notable, "tuned": kept.tuned}
    header = marshal.dumps(_header(folder))
    data = len(header).to_bytes(_SIZE_BYTES, "little") + header + marshal.dumps(body)
    write_bytes_atomic(path, data, durable=False, mode=0o600)  # a cache: no fsync, this user's alone
    _forget_unused(path.parent)


def _header(folder: Path | str) -> dict[str, Any]:
    return {"format": KEPT_FORMAT, "version": code_version(), "folder": os.path.realpath(folder)}


def _owned(found: os.stat_result) -> bool:
    """This user's own, and no one else may write it (a cache folder may be set to a shared place)."""
    return found.st_uid == os.getuid() and not found.st_mode & (stat_mode.S_IWGRP | stat_mode.S_IWOTH)


def _forget_unused(folder: Path) -> None:
    """Delete the kept rows of folders not reported for KEPT_DAYS."""
    oldest = time.time() - KEPT_DAYS * 86400
    for entry in os.scandir(folder):
        with contextlib.suppress(OSError):
            if entry.name.endswith(".rows") and entry.stat().st_mtime < oldest:
                os.unlink(entry.path)


@dataclass(frozen=True)
class Plan:
    """Which of a folder's listed result files must be read (`unread`, their positions in the list)
    and which rows of `kept` the others are (`kept_rows`: list position -> kept row)."""

    folder: str
    files: list[str]
    found: Identities
    kept: Kept | None
    kept_rows: dict[int, int]
    unread: list[int]

    def assemble(
        self, fresh: Sequence[RecordRows], read: Callable[[list[str]], RecordRows]
    ) -> tuple[RecordRows, Kept | None]:
        """The folder's rows in list order, from the kept rows and `fresh` (the rows read from the
        unread files, in their order; a file that could not be read has none), and what to keep for
        the next report (None: what is kept already, or nothing: no records, or a file was gone before
        it was read). `read`: how to read files here (`with_first_tuned`)."""
        from bench.analysis.report.digest import concat_rows

        kept = self.kept.rows(self.kept.names) if self.kept is not None else None
        together = concat_rows([kept, *fresh] if kept is not None else list(fresh))
        kept_count = len(kept) if kept is not None else 0
        fresh_row = {file: kept_count + row for row, file in enumerate(together.files[kept_count:])}
        sources, positions = [], []
        for position, file in enumerate(self.files):
            source = self.kept_rows.get(position)
            if source is None:
                source = fresh_row.get(file)
            if source is not None:
                sources.append(source)
                positions.append(position)
        files = [self.files[p] for p in positions]
        in_order = sources == list(range(len(together)))
        if in_order and self.kept is not None and kept_count == len(together):
            return self.kept.rows(files), None  # every file kept, none read: nothing new to keep
        rows = _take(together, sources, files) if not in_order else _with_files(together, files)
        rows = with_first_tuned(rows, read)
        keys = [self.found.keys[p] for p in positions]
        if not keys or any(key is None for key in keys):  # no records, or gone before they were read
            return rows, None
        strip = len(os.path.join(self.folder, ""))
        names = [file[strip:] for file in files]
        return rows, Kept(names, [_settled(key, self.found.taken_ns) for key in keys], rows.columns, rows.notable,
                          rows.tuned)  # fmt: skip


def with_first_tuned(rows: RecordRows, read: Callable[[list[str]], RecordRows]) -> RecordRows:
    """`rows` with the record of their first autotuned row, which `plan` reads where it was not kept;
    where that read found no record (its file went or broke between the listing and the reading), the
    next autotuned rows' files are read (`read`) until one gives its record, as a report that read
    every record would have taken the first autotuned one it could read."""
    for row in rows.tuned:
        if row in rows.notable:
            return rows
        found = read([rows.files[row]])
        if found.tuned:
            return _with_files(rows, rows.files, notable={**rows.notable, row: found.notable[found.tuned[0]]})
    return rows


def plan(folder: Path | str, files: list[str], found: Identities, kept: Kept | None) -> Plan:
    """What to read of `files` (a folder's result files as listed: the folder joined with each one's
    path in it) given their identities now and the rows kept by the last report.

    Of the autotuned records only the first of each share read has its record kept whole: where the
    folder's first autotuned row kept has no record (the first one's file gone or changed), its file is
    read again, so the folder's first autotuned row has its record."""
    folder = str(folder)
    if kept is None:
        return Plan(folder, files, found, None, {}, list(range(len(files))))
    strip = len(os.path.join(folder, ""))
    row_of = dict(zip(kept.names, range(len(kept.names))))
    tuned, first_tuned_seen = set(kept.tuned), False
    kept_rows, unread = {}, []
    for position, (file, key) in enumerate(zip(files, found.keys, strict=True)):
        row = row_of.get(file[strip:])
        if row is None or key is None or kept.keys[row] != key:
            unread.append(position)
        elif row in tuned and not first_tuned_seen and row not in kept.notable:
            unread.append(position)  # the first autotuned, but not kept whole: read for its record
            first_tuned_seen = True
        else:
            first_tuned_seen |= row in tuned
            kept_rows[position] = row
    return Plan(folder, files, found, kept, kept_rows, unread)


def _settled(key: FileKey, taken_ns: int) -> FileKey | None:
    """The identity to keep: None for a file changed so shortly before it was statted that it might
    change again unseen in the same tick of the file system's clock."""
    _, modified, changed, _ = key
    whole_seconds = modified % 1_000_000_000 == 0 and changed % 1_000_000_000 == 0
    racy = RACY_WHOLE_SECONDS_NS if whole_seconds else RACY_NS
    return None if max(modified, changed) >= taken_ns - racy else key


def _take(rows: RecordRows, sources: list[int], files: list[str]) -> RecordRows:
    """Rows `sources` of `rows`, in that order, as the rows of `files`."""
    from bench.analysis.report.digest import RecordRows

    if not sources:
        return RecordRows([], {name: [] for name in rows.columns}, {}, [])
    take = operator.itemgetter(*sources)  # one C loop per column
    single = len(sources) == 1
    columns = {name: [take(values)] if single else list(take(values)) for name, values in rows.columns.items()}
    notable = {row: rows.notable[source] for row, source in enumerate(sources) if source in rows.notable}
    tuned_sources = set(rows.tuned)
    tuned = [row for row, source in enumerate(sources) if source in tuned_sources]
    return RecordRows(files, columns, notable, tuned)


def _with_files(rows: RecordRows, files: list[str], notable: dict[int, RunResult] | None = None) -> RecordRows:
    """The same rows, read from `files` (and with `notable` records, where given)."""
    from bench.analysis.report.digest import RecordRows

    return RecordRows(files, rows.columns, rows.notable if notable is None else notable, rows.tuned)
