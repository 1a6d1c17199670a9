"""Every path a user gives, checked before anything launches or is written: one rule, one wording.

A path a command reads (a results folder, `--baseline`, `--store` for history, `--config-dir`,
`train.data`, `--preflight`) must exist, be of the kind it needs (a file, a folder, or either) and
be readable. A path a command writes (`results_dir`, `-o/--out`, `train.checkpoint_dir`, a store
it adds to, `calibrate -o`) may not exist yet (it is created, with its parents), but what exists of
it must be of the right kind, and its nearest existing folder writable by this user. Each problem
is one line that names the key (the config key or the flag) and the path; the command exits 2
(bench.config.problems.ConfigError).

A disk that takes no writes at all (full, over quota, mounted read-only) is not the user's input
but a storage fault: it is left to the first write, whose OSError becomes the one line of
bench/run/ownership/storage.py and exit 1 (the parent's first write, the sweep lock or an output
file, comes before any launch).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from bench.config.problems import ConfigError

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
    if reason := unwritable(folder):
        return _line(key, path, f"is not writable ({reason})", hint)
    return None


def unwritable(folder: str | Path) -> str | None:
    """Why `folder` could not be created or written in by this user, or None: its nearest existing
    ancestor decides. A read-only file system is not reported here (a storage fault: see above)."""
    existing = Path(folder)
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not _may_write(existing, os.W_OK | os.X_OK):
        return f"no write permission in {existing}"
    return None


def require(problems: Iterable[str | None]) -> None:
    """Raise ConfigError with every problem found (None entries are paths that are fine)."""
    if lines := [p for p in problems if p]:
        raise ConfigError(lines)


def _may_write(path: Path, mode: int = os.W_OK) -> bool:
    """Whether this user may write `path`. On a read-only file system access() always says no
    (EROFS): that is the disk's fault, left to the write that meets it, so it counts as yes here."""
    if os.access(path, mode):
        return True
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _line(key: str, path: str | Path, problem: str, hint: str) -> str:
    return f"{key}: {path} {problem}" + (f"; {hint}" if hint else "")
