"""Small disks for the storage-fault tests: a tmpfs of a few MiB, filled or remounted read-only.

Mounting needs root (CI runs as root); elsewhere the tests that need it are skipped with the reason.
A module of its own beside bench_cli.py, shared by the e2e tests that fill or freeze a disk.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(where: Path, size: str = "16m") -> Iterator[Path]:
    """`where` (created) as a fresh tmpfs of `size` for the block; unmounted after it."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount_read_only(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)


def fill(disk: Path) -> None:
    """Write a ballast file until the disk says it is full (ENOSPC)."""
    with open(disk / "ballast", "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
