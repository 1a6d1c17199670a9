"""Files the harness writes and reads back: one atomic writer, and one read-with-migration path.

Writing (`atomic_path`, `write_bytes_atomic`, `write_text_atomic`, `write_json_atomic`): a temporary
file in the target's folder, fsynced, renamed onto the target, the folder fsynced (so the rename
survives a crash); on any error the temporary file is removed and an OSError names the target (a
full disk says which file it could not write; bench/run/ownership/storage.py words it). A reader
never sees half a file, and a crash never leaves a record that is not there after a reboot. Every
file the harness writes for others to read goes through it: records and failure records, rank
errors and marks of the protocol, preflight measurements and records, baselines, calibrations,
checkpoint markers, telemetry sidecars, report outputs; and a cache, the report's kept rows, without
the fsyncs (`durable=False`).

Reading (`Versioned`): each kind of versioned JSON file (record, preflight record, baseline,
calibration; the SQLite store's own tables step the same way) has one registry of its migrations,
`n -> n + 1` steps, where the kind is defined. `Versioned.migrate` checks the kind's tag and
version and applies the steps in turn; a version newer than the code knows (or one never written)
is reported as such in one line, never misread. The store's rows are records: they are read back
through the record kind's path (bench/analysis/store/), in the store's own transactions.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

# A folder's fsync is refused by some file systems (and a folder may not be openable for reading):
# the rename is then as durable as that file system makes it.
_FOLDER_SYNC_REFUSED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EACCES, errno.EPERM}


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError as exc:
        if exc.errno in _FOLDER_SYNC_REFUSED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _FOLDER_SYNC_REFUSED:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: Path | str, *, durable: bool = True) -> Iterator[Path]:
    """A temporary path beside `path` for a writer that wants a file name (pyarrow, a download);
    when the block ends it is fsynced and renamed onto `path`, and on any error removed.
    `durable=False`: no fsync, for a cache (a crash may lose it, never leave half of it)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
        if durable:
            _fsync_folder(path.parent)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename in (None, str(tmp)):
            exc.filename = str(path)
        raise


def write_bytes_atomic(path: Path | str, data: bytes, *, durable: bool = True, mode: int = 0o666) -> None:
    """Write `data` to `path` atomically and durably (see the module docstring). `durable`: as in
    atomic_path; `mode`: the new file's permissions before the umask (0o600: this user's alone)."""
    with atomic_path(path, durable=durable) as tmp:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as file:
            file.write(data)


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write UTF-8 `text` to `path` atomically and durably."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path | str, data: Any, *, indent: int = 2) -> None:
    """Write `data` as JSON to `path` atomically and durably."""
    write_text_atomic(path, json.dumps(data, indent=indent))


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Name `path` in an OSError that names no file (a failed write() or close() does not)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


class VersionError(ValueError):
    """A file of a schema version this fsdp-bench cannot read (newer than it knows, or never written)."""


def validation_line(exc: ValidationError) -> str:
    """A validation error in one line: how many problems, and where and what the first one is."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"({exc.error_count()} problem(s)); first: {where}: {first['msg']}"


@dataclass(frozen=True)
class Versioned:
    """One kind of versioned file: its current version and its registry of migrations on read.

    `steps[n]` turns version n into n + 1 (a dict for a JSON file; the store steps its connection).
    `renames` rewrite, after the steps, values whose meaning moved to a new name within the
    current version (the schema refuses the old value, so a stored one is never ambiguous)."""

    kind: str  # what messages call a file of it: "record", "baseline", ...
    current: int
    steps: Mapping[int, Callable[[Any], Any]] = field(default_factory=dict)
    tag: tuple[str, str] | None = None  # (key, value) every file of the kind carries
    unversioned: int | None = None  # the version of a file that names none (written before versions were)
    renames: tuple[Callable[[dict[str, Any]], dict[str, Any]], ...] = ()
    model: type[BaseModel] | None = None  # what `parse` validates the migrated data into

    def __post_init__(self) -> None:
        first = min(self.steps, default=self.current)
        if set(self.steps) != set(range(first, self.current)):
            raise ValueError(f"{self.kind}: migrations must be consecutive n -> n + 1 steps up to {self.current}")

    def check(self, version: Any) -> None:
        """VersionError (one line) unless `version` is one this code reads or migrates."""
        known = isinstance(version, int) and not isinstance(version, bool)
        if not known or version > self.current or (version < self.current and version not in self.steps):
            raise VersionError(
                f"schema_version {version!r} is unknown to this fsdp-bench (it reads versions up to "
                f"{self.current}); upgrade fsdp-bench to read this {self.kind}"
            )

    def upgrade(self, payload: Any, version: Any) -> Any:
        """`payload` of `version` brought to the current version, one step at a time."""
        self.check(version)
        while version < self.current:
            payload = self.steps[version](payload)
            version += 1
        return payload

    def migrate(self, data: Any) -> dict[str, Any]:
        """A file's JSON data, of any version this code knows, as the current version (not yet
        validated); ValueError with one line for anything else."""
        if not isinstance(data, dict):
            raise ValueError(f"not a {self.kind} (expected a JSON object)")
        if self.tag is not None and data.get(self.tag[0]) != self.tag[1]:
            raise ValueError(f"not an fsdp-bench {self.kind} ({self.tag[0]} must be {self.tag[1]!r})")
        data = self.upgrade(data, data.get("schema_version", self.unversioned))
        for rename in self.renames:
            data = rename(data)
        return data

    def parse(self, data: Any) -> Any:
        """`migrate`, then validate into the kind's model (ValueError with one line)."""
        data = self.migrate(data)
        if self.model is None:
            return data
        try:
            return self.model.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"invalid {self.kind} {validation_line(exc)}") from None

    def read(self, path: Path | str) -> Any:
        """`parse` of one file (ValueError with one line: unreadable, another kind, a newer version)."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"unreadable JSON: {exc}") from None
        return self.parse(data)
