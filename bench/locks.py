"""Locks that keep measurements clean.

- The **sweep lock** (`<results>/<sweep>/.lock`): one `sweep` or `run` at a time writes into a sweep
  folder, so no point is ever run twice, or two points at once, by two commands.
- The **host lock** (`$FSDP_BENCH_LOCK_DIR/fsdp-bench-host.lock`, default the system's temp folder):
  one local benchmark at a time on this machine, so two never share the cores they measure
  (`sweep.allow_concurrent=true` skips it, and the record says so).

Both are `flock` locks on a file that names the holder (pid, host, since, command): the kernel
releases them when the holder dies, however it dies, so a stale lock can never block a rerun.
A second command either waits (saying whom it waits for) or, with `sweep.wait=false`, stops.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

LOCK_DIR_ENV = "FSDP_BENCH_LOCK_DIR"
SWEEP_LOCK = ".lock"
HOST_LOCK = "fsdp-bench-host.lock"
POLL_S = 0.5


class LockBusy(RuntimeError):
    """The lock is held by another process (one line naming it)."""


def host_lock_path() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or tempfile.gettempdir()) / HOST_LOCK


def sweep_lock_path(sweep_dir: Path) -> Path:
    return Path(sweep_dir) / SWEEP_LOCK


class FileLock:
    """An exclusive flock on `path`, whose content names the holder while it is held."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = Path(path), what
        self._fd: int | None = None

    def try_acquire(self, **extra: object) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
            **extra,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> dict:
        """Who holds it, as written in the file (empty while the holder is still writing)."""
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def describe_holder(self) -> str:
        h = self.holder()
        if not h:
            return f"{self.what} ({self.path}) is held by another process"
        return f"{self.what} ({self.path}) is held by pid {h.get('pid')} on {h.get('host')} since {h.get('since')} ({h.get('command')})"

    def acquire(self, wait: bool, on_wait: Callable[[str], None] = print, **extra: object) -> None:
        """Take the lock; when it is held: wait, saying so once, or raise LockBusy (wait=False)."""
        if self.try_acquire(**extra):
            return
        message = self.describe_holder()
        if not wait:
            raise LockBusy(message)
        on_wait(f"waiting: {message}")
        while not self.try_acquire(**extra):
            time.sleep(POLL_S)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


ALLOW_CONCURRENT_ENV = "FSDP_BENCH_ALLOW_CONCURRENT"


def allow_concurrent(configured: bool) -> bool:
    """sweep.allow_concurrent, or FSDP_BENCH_ALLOW_CONCURRENT=1 (for a CI job that runs several at once)."""
    return configured or os.environ.get(ALLOW_CONCURRENT_ENV, "") not in ("", "0", "false")


class MeasurementLocks:
    """The sweep folder's lock, and the host's for launches that run on this machine.

    `conditions` says what the record should know: whether the point measured this host alone.
    """

    def __init__(self, sweep_dir: Path, runs_here: bool, wait: bool, concurrent: bool) -> None:
        self.sweep = FileLock(sweep_lock_path(sweep_dir), f"the sweep folder {sweep_dir}")
        self.host = FileLock(host_lock_path(), "this host's benchmark lock") if runs_here and not concurrent else None
        self.wait = wait
        self.conditions = {"exclusive_host": None if not runs_here else not concurrent}

    def __enter__(self) -> MeasurementLocks:
        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        self.sweep.acquire(self.wait, say)
        try:
            if self.host is not None:
                self.host.acquire(self.wait, say)
        except BaseException:
            self.sweep.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.host is not None:
            self.host.release()
        self.sweep.release()
