"""A results disk that is full, over quota or read-only: one line naming the path, what failed and
the space left, never a traceback.

Every write of the parent (records, the ledger, launch files, the lock, reports) and of the ranks
(marks, records, errors) raises its OSError up to the command; `bench.cli.main` turns those with an
errno in STORAGE_ERRNOS into `storage_error_line`, exit 1. Nothing is left half-written on the
way (records and launch files are written through a temporary file and a rename, and the
temporary file is removed on failure), and the sweep stops instead of running points whose
results it could not store; the same command continues once there is room.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from pathlib import Path

from bench.schema.units import human_bytes

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def is_storage_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def space_left(path: Path) -> str:
    """'X free of Y' on the filesystem that holds `path` (its nearest existing folder)."""
    for folder in (Path(path), *Path(path).parents):
        with contextlib.suppress(OSError):
            if folder.exists():
                usage = shutil.disk_usage(folder)
                return f"{human_bytes(usage.free)} free of {human_bytes(usage.total)}"
    return "free space unknown"


def storage_error_line(exc: OSError) -> str:
    """`cannot write PATH: REASON (ERRNO); X free of Y there; ...`: what a user needs, on one line."""
    path = Path(exc.filename) if exc.filename else None
    name = errno.errorcode.get(exc.errno, str(exc.errno))
    where = f"cannot write {path}" if path else "cannot write the results"
    space = f"; {space_left(path)} there" if path else ""
    return (
        f"{where}: {exc.strerror} ({name}){space}; stopped before running anything it could not store, "
        "records already written are kept: make room and run the same command again"
    )
