"""A results folder's record files listed in one walk (`file_texts_by_name`, `listed`), with the
result files' identities where the report keeps rows (`identities`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.schema.protocol_names import PREFLIGHT_RECORD, RESULT_FILE

# A file's identity: size, modification and change times (ns), inode. None: not statted, or racy.
FileKey = tuple[int, int, int, int]
# What the report lists: the result files and the preflight records.
LISTED = (RESULT_FILE, PREFLIGHT_RECORD)


@dataclass(frozen=True)
class Identities:
    """The identities of a folder's result files (None for a file that is gone) and when they were
    taken (ns since the epoch, the clock file times are on)."""

    keys: list[FileKey | None]
    taken_ns: int


def identities(files: Sequence[str]) -> Identities:
    """Each file's identity now."""
    keys: list[FileKey | None] = []
    for file in files:
        try:
            found = os.stat(file)
        except OSError:
            keys.append(None)
            continue
        keys.append((found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino))
    return Identities(keys, time.time_ns())


def file_texts_by_name(root: Path | str, names: Iterable[str]) -> dict[str, list[str]]:
    """For each of `names`, every file of that name under `root` as a text, in the order
    `sorted(Path(root).rglob(name))` gives (symlinked folders not entered, unreadable ones skipped,
    as rglob does): one walk for several names (the report lists result and preflight records at once).

    By os.scandir and texts, not rglob or os.walk, which build a Path or a list per folder and stat
    each entry again. Every text here is `root` joined
    with entry names, so sorting the texts split at the separator is sorting the Paths' parts (on
    POSIX; elsewhere Paths compare their parts case-folded, so they sort themselves).
    """
    found: dict[str, list[str]] = {name: [] for name in names}
    folders = [str(root)]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif entry.name in found:
                        found[entry.name].append(entry.path)
        except PermissionError:
            continue
    for name, paths in found.items():
        if os.name != "posix":
            found[name] = list(map(str, sorted(map(Path, paths))))
        else:
            paths.sort(key=lambda path: path.split(os.sep))
    return found


def listed(path: Path | str, keep: bool) -> tuple[dict[str, list[str]], Identities]:
    """The folder's result and preflight files (LISTED, as texts), and the result files' identities
    (none statted when no rows are kept)."""
    files = file_texts_by_name(path, LISTED)
    results = files[RESULT_FILE]
    return files, identities(results) if keep else Identities([None] * len(results), 0)
