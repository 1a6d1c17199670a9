"""Read result records from a results folder: the JSON files are the source of truth.

Reading validates a record's structure and schema version only, never today's registries: an
older record is migrated on read (the record kind of bench/schema/migrations, read through
bench/schema/files.py), a newer one is reported as such. A truncated
or invalid file is reported as a problem, never raised: one bad point must not hide the others.

A record of the current version needs no migration: pydantic validates its bytes directly (several
times faster than parsing the JSON into Python objects and validating those, which is what a
10,000-record report spends most of its reading on). Anything that does not validate so (an older
version, whose `schema_version` the model refuses, a value a rename within the version rewrites,
which the model refuses too, or a broken file) takes the migrating path, which reads it or says in
one line why not.

Loading runs without the cyclic garbage collector (bench/analysis/gc_pause.py): every record read
stays alive, so the collector's passes over the growing graph free nothing, and they are most of
the time pydantic spends on a large folder.
Every command that loads records gets this, not only those that pause the collector themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.analysis.folder_listing import file_texts_by_name
from bench.analysis.gc_pause import gc_paused
from bench.schema.files import write_json_atomic
from bench.schema.migrations import RECORD
from bench.schema.protocol import RESULT_FILE
from bench.schema.record import RunResult

__all__ = [
    "RESULT_FILE",
    "RecordProblem",
    "file_texts_by_name",
    "file_texts_named",
    "files_named",
    "load_located_records",
    "load_records",
    "parse_record",
    "read_record",
    "read_records",
    "write_record",
]


@dataclass(frozen=True)
class RecordProblem:
    path: Path
    reason: str


def parse_record(data: Any) -> RunResult:
    """A record's JSON data (any schema version) as today's RunResult (ValueError with one line)."""
    return RECORD.parse(data)


def read_record(path: Path | str) -> RunResult:
    """Parse, migrate and validate one result.json (raises ValueError with a one-line reason)."""
    try:
        return RunResult.model_validate_json(_file_bytes(path))
    except (OSError, ValidationError):
        return RECORD.read(path)  # migrates what it can; the one-line reason of what it cannot


def _file_bytes(path: Path | str) -> bytes:
    """A file's bytes in four system calls (open, read until empty, close): a buffered open() adds
    fstat, isatty, seek and more, ten in all, and a folder's 10,000 records are read one file each.
    os.open takes a str or a Path as it is (Path(path) parses it again)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, _READ_SIZE):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# A record is a few kB: one read takes it whole, the next sees the end.
_READ_SIZE = 1 << 16


def load_records(root: Path) -> tuple[list[RunResult], list[RecordProblem]]:
    """Every valid record under `root` (a folder of sweeps, one sweep, or one result.json)."""
    located, problems = load_located_records(root)
    return [record for record, _ in located], problems


def load_located_records(root: Path) -> tuple[list[tuple[RunResult, Path]], list[RecordProblem]]:
    """load_records, each record with the path it was read from (its folder holds its other files)."""
    root = Path(root)
    return read_records([root] if root.is_file() else files_named(root, RESULT_FILE))


def read_records(paths: Iterable[Path | str]) -> tuple[list[tuple[RunResult, Path | str]], list[RecordProblem]]:
    """Each of these result files read (read_record), in order: the records with their paths as
    given, and a problem for each file that cannot be read (a part of a folder's files, for a caller
    that shares them out among processes: texts cross a pipe for a fraction of what Paths cost)."""
    located, problems = [], []
    with gc_paused():
        for path in paths:
            try:
                located.append((read_record(path), path))
            except ValueError as exc:
                problems.append(RecordProblem(Path(path), str(exc)))
    return located, problems


def files_named(root: Path, name: str) -> list[Path]:
    """Every file called `name` under `root`, in the order `sorted(root.rglob(name))` gives (symlinked
    folders not entered, unreadable ones skipped, as rglob does): file_texts_named's, as Paths."""
    return list(map(Path, file_texts_named(root, name)))


def file_texts_named(root: Path | str, name: str) -> list[str]:
    """files_named's paths as texts, for a caller that needs no Path (building one per file is not free)."""
    return file_texts_by_name(root, (name,))[name]


def write_record(record: RunResult, path: Path) -> None:
    """Write a record atomically and durably (bench/schema/files.py): readers never see half a file."""
    write_json_atomic(Path(path), record.model_dump(mode="json"))
