"""Files the harness writes: atomically (a reader never sees half a file), naming the path in every
error (a full disk says which file it could not write; bench/run/ownership/storage.py words it)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON through a temporary file and a rename: a reader never sees half a file."""
    write_text_atomic(path, json.dumps(data, indent=2))


def write_text_atomic(path: Path, text: str) -> None:
    """Write text through a temporary file and a rename: a reader never sees half a file.

    On a full or read-only disk the temporary file is removed and the error names `path`.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if exc.filename is None or exc.filename == str(tmp):
            exc.filename = str(path)
        raise


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Name `path` in an OSError that names no file (a failed write() or close() does not)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise
