"""Every path a user gives, checked before anything launches or is written: one rule, one wording.

A path a command reads (a results folder, `--baseline`, `--store` for history, `--config-dir`,
`train.data`, `--preflight`) must exist, be of the kind it needs (a file, a folder, or either) and
be readable. A path a command writes (`results_dir`, `-o/--out`, `train.checkpoint_dir`, a store
it adds to, `calibrate -o`) may not exist yet (it is created, with its parents), but what exists of
it must be of the right kind, and its nearest existing folder writable by this user; a folder is
also tried (`failed_probe`: created, a file written and removed, left as it was; once per folder
in a sweep's checks, `one_try_per_folder`). Each problem
is one line that names the key (the config key or the flag) and the path; the command exits 2
(bench.config.problems.ConfigError).

A disk that takes no writes at all (full, over quota, mounted read-only) is not the user's input
but a storage fault: it is left to the first write (a folder's probe among them), whose OSError becomes the one line of
bench/run/ownership/storage.py and exit 1 (the parent's first write, the sweep lock or an output
file, comes before any launch).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Literal

from bench.config.problems import ConfigError

# Where fsdp-bench keeps what it can always rebuild (the report's kept rows, the local calibration):
# this variable, else $XDG_CACHE_HOME/fsdp-bench, else ~/.cache/fsdp-bench.
CACHE_DIR_VARIABLE = "FSDP_BENCH_CACHE_DIR"

Kind = Literal["file", "folder", "any"]


def input_problem(key: str, path: str | Path, kind: Kind = "any", *, what: str = "", hint: str = "") -> str | None:
    """Why `path` (given as `key`) cannot be read as a `kind`, or None.

    `what` names the thing before the path ("token file"); `hint` follows the problem ("allowed: ...").
    """
    path = Path(path)
    if not path.exists():
        return _line(key, f"{what} {path}".strip(), "does not exist", hint)
    if kind == "folder" and not path.is_dir():
        return _line(key, path, "is not a folder", hint)
    if kind == "file" and not path.is_file():
        return _line(key, path, "is not a file", hint)
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        return _line(key, path, "is not readable (no read permission)", hint)
    return None


def output_problem(key: str, path: str | Path, kind: Literal["file", "folder"], *, hint: str = "") -> str | None:
    """Why `path` (given as `key`) cannot be written as a `kind` (created where missing), or None."""
    path = Path(path)
    if path.exists():
        if kind == "folder" and not path.is_dir():
            return _line(key, path, "is not a folder", hint)
        if kind == "file" and path.is_dir():
            return _line(key, path, "is a folder; give a file", hint)
        if kind == "file" and not _may_write(path):
            return _line(key, path, "is not writable (no write permission)", hint)
    folder = path if kind == "folder" else path.parent
    if reason := unwritable(folder) or (kind == "folder" and failed_probe(folder)):
        return _line(key, path, f"is not writable ({reason})", hint)
    return None


# Errors of a disk rather than of the user's input: left to bench/run/ownership/storage.py's line, exit 1.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


# While `one_try_per_folder()` is open: (nearest existing folder, whether it is the folder asked
# for) -> the answer of its try.
_TRIED: ContextVar[dict[tuple[Path, bool], str | None] | None] = ContextVar("tried_folders", default=None)


@contextlib.contextmanager
def one_try_per_folder() -> Iterator[None]:
    """Within it a folder is tried once, however many points ask (a sweep's checks): the points of
    a grid share `results_dir`, and their own missing folders (the default checkpoint folders) share
    the try of the existing folder they would be created in. A try is a few file system round trips,
    milliseconds each on a shared file system; once per point it would cost a large grid seconds."""
    token = _TRIED.set({})
    try:
        yield
    finally:
        _TRIED.reset(token)


def failed_probe(folder: str | Path) -> str | None:
    """Why writing in `folder` failed when tried, or None: what is missing of it is created, a probe
    file written and removed, and what was created removed again, so the folder is left as it was.

    Permission bits alone say yes to root on a file system that takes no writes (/proc, a
    read-only bind mount with permissive bits, a FUSE mount that refuses); trying is the answer a
    run would meet. A disk fault (full, over quota, read-only) is raised as the OSError it is."""
    folder = Path(folder)
    tried = _TRIED.get()
    if tried is None:
        return _try_folder(folder)
    existing = nearest_existing(folder)
    key = (existing, existing == folder)
    if key not in tried:
        tried[key] = _try_folder(folder)
    return tried[key]


def _try_folder(folder: Path) -> str | None:
    created: list[Path] = []
    try:
        for missing in reversed([folder, *folder.parents]):
            if not missing.exists():
                missing.mkdir()
                created.append(missing)
        try:
            handle, probe = tempfile.mkstemp(prefix=".fsdp-bench-probe-", dir=folder)
        except OSError as exc:
            exc.filename = str(folder)  # the folder, not the probe's random name
            raise
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise
        return f"a test write failed: {exc.strerror or exc}"
    finally:
        for made in reversed(created):
            with contextlib.suppress(OSError):
                made.rmdir()
    return None


def unwritable(folder: str | Path) -> str | None:
    """Why `folder` could not be created or written in by this user, or None: its nearest existing
    ancestor decides. A read-only file system is not reported here (a storage fault: see above)."""
    existing = nearest_existing(folder)
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not _may_write(existing, os.W_OK | os.X_OK):
        return f"no write permission in {existing}"
    return None


def require(problems: Iterable[str | None]) -> None:
    """Raise ConfigError with every problem found (None entries are paths that are fine)."""
    if lines := [p for p in problems if p]:
        raise ConfigError(lines)


def nearest_existing(path: str | Path) -> Path:
    """`path` itself, or the closest of its parents that exists (what creating it would write in)."""
    existing = Path(path)
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    return existing


def on_read_only_disk(path: str | Path) -> bool:
    """Whether the file system that holds `path` (or would hold it) is mounted read-only."""
    try:
        return bool(os.statvfs(nearest_existing(path)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def read_only_error(path: str | Path) -> OSError | None:
    """The OSError (EROFS) a write under `path` would meet on a read-only file system, or None: for
    a folder only the ranks write, the command raises it before anything launches (bench/run/ownership/
    storage.py words it, exit 1)."""
    if on_read_only_disk(path):
        return OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    return None


def cache_dir() -> Path:
    """The user's fsdp-bench cache folder (CACHE_DIR_VARIABLE): it may not exist yet."""
    if os.environ.get(CACHE_DIR_VARIABLE):
        return Path(os.environ[CACHE_DIR_VARIABLE])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fsdp-bench"


def _may_write(path: Path, mode: int = os.W_OK) -> bool:
    """Whether this user may write `path`. On a read-only file system access() always says no
    (EROFS): that is the disk's fault, left to the write that meets it, so it counts as yes here."""
    return os.access(path, mode) or on_read_only_disk(path)


def _line(key: str, path: str | Path, problem: str, hint: str) -> str:
    return f"{key}: {path} {problem}" + (f"; {hint}" if hint else "")
