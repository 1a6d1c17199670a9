"""Locks that keep measurements clean.

- The **sweep lock** (`<results>/<sweep>/.lock`): one `sweep` or `run` at a time writes into a sweep
  folder, so no point is ever run twice, or two points at once, by two commands.
- The **host lock** (`$FSDP_BENCH_LOCK_DIR/fsdp-bench-host.lock`, default the system's temp folder):
  one local benchmark at a time on this machine, so two never share the cores they measure
  (`sweep.allow_concurrent=true` skips it, and the record says so).

Both are `flock` locks on a file that names the holder (pid, host, since, command): the kernel
releases them when the holder dies, however it dies, so a stale lock can never block a rerun.
A second command either waits (saying whom it waits for) or, with `sweep.wait=false`, stops.

The sweep lock also names a fresh `token` per holder, which every launch file carries: ranks
write only while the lock still names their launch's token and its holder lives
(fsdp_core/lifeline.py), so ranks that outlived a dead parent never write beside a rerun. Taking
the sweep lock settles cluster jobs a dead holder left running (bench/run/ownership/jobs.py): cancelled, or with
`sweep.orphans=wait` waited for, their tokens then `adopted` so their records still count.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.run.ownership.jobs import JobWontStop, adoptable_tokens, settle_left_jobs
from bench.schema.protocol import OWNER_HEARTBEAT_S, SWEEP_LOCK

LOCK_DIR_ENV = "FSDP_BENCH_LOCK_DIR"
HOST_LOCK = "fsdp-bench-host.lock"
POLL_S = 0.5


class LockBusy(RuntimeError):
    """The folder cannot be taken now: its lock is held by another process, or a job an earlier
    holder left will not stop (one line naming it; the commands exit 2, nothing launched)."""


def host_lock_path() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or tempfile.gettempdir()) / HOST_LOCK


def sweep_lock_path(sweep_dir: Path) -> Path:
    return Path(sweep_dir) / SWEEP_LOCK


class FileLock:
    """An exclusive flock on `path`, whose content names the holder while it is held."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = Path(path), what
        self._fd: int | None = None
        self.previous: dict = {}  # what the file said when this process took it (an earlier holder)
        self._holder: dict = {}

    def try_acquire(self, **extra: object) -> bool:
        """Take the lock if free; `extra` fields join the holder (a callable is called once it is held)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd, self.previous = fd, self.holder()
        try:
            self._holder = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
                **{key: value() if callable(value) else value for key, value in extra.items()},
            }
            self._write()
        except BaseException:
            self.release()
            raise
        return True

    @property
    def holding(self) -> dict:
        """What this process wrote as the holder (empty when it does not hold the lock)."""
        return dict(self._holder) if self._fd is not None else {}

    def update(self, **fields: object) -> None:
        """Change fields of the holder while holding the lock."""
        self._holder.update(fields)
        self._write()

    def _write(self) -> None:
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(self._holder).encode(), 0)
        except OSError as exc:  # a full or read-only disk: say which file
            exc.filename = str(self.path)
            raise

    def holder(self) -> dict:
        """Who holds it, as written in the file (empty while the holder is still writing)."""
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def held_elsewhere(self) -> bool:
        """Whether another process holds the lock now; asked without creating or writing the file."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return False  # no lock file: nobody has taken it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock this test took
        return False

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
            raise LockBusy(f"{message} (sweep.wait=false)")
        on_wait(f"waiting: {message}")
        while not self.try_acquire(**extra):
            time.sleep(POLL_S)

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass  # a read-only disk: the kernel still drops the lock below
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def held_now(locks: MeasurementLocks) -> list[str]:
    """Who holds the locks a measurement would take, for each one another process holds now."""
    return [lock.describe_holder() for lock in (locks.sweep, locks.host) if lock is not None and lock.held_elsewhere()]


ALLOW_CONCURRENT_ENV = "FSDP_BENCH_ALLOW_CONCURRENT"


def allow_concurrent(configured: bool) -> bool:
    """sweep.allow_concurrent, or FSDP_BENCH_ALLOW_CONCURRENT=1 (for a CI job that runs several at once)."""
    return configured or os.environ.get(ALLOW_CONCURRENT_ENV, "") not in ("", "0", "false")


class MeasurementLocks:
    """The sweep folder's lock, and the host's for launches that run on this machine.

    `conditions` says what the record should know: whether the point measured this host alone.
    `token` goes into every launch file of this holder (LaunchFile.owner). `orphans` says what to do
    with cluster jobs an earlier, dead holder left running: "cancel" them or "wait" for them.
    """

    def __init__(self, sweep_dir: Path, runs_here: bool, wait: bool, concurrent: bool, orphans: str = "cancel") -> None:
        self.sweep_dir = Path(sweep_dir)
        self.sweep = FileLock(sweep_lock_path(sweep_dir), f"the sweep folder {sweep_dir}")
        self.host = FileLock(host_lock_path(), "this host's benchmark lock") if runs_here and not concurrent else None
        self.wait, self.orphans = wait, orphans
        self.conditions = {"exclusive_host": None if not runs_here else not concurrent}
        self.token = uuid.uuid4().hex
        self._alive = threading.Event()

    def __enter__(self) -> MeasurementLocks:
        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        # Tokens of jobs to wait for are adopted in the same write that takes the folder, so their
        # ranks never see the folder as someone else's.
        adopted = (lambda: adoptable_tokens(self.sweep_dir)) if self.orphans == "wait" else []
        self.sweep.acquire(self.wait, say, token=self.token, adopted=adopted)
        try:
            try:
                settle_left_jobs(self.sweep_dir, self.orphans, self.sweep.previous, say)
            except JobWontStop as exc:
                raise LockBusy(str(exc)) from None
            if self.sweep.holding.get("adopted"):
                self.sweep.update(adopted=[])
            if self.host is not None:
                self.host.acquire(self.wait, say)
        except BaseException:
            self.sweep.release()
            raise
        threading.Thread(target=self._heartbeat, name="sweep-lock-heartbeat", daemon=True).start()
        return self

    def _heartbeat(self) -> None:
        """Touch the sweep lock while holding it: ranks on other hosts see that their owner lives."""
        while not self._alive.wait(OWNER_HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.sweep.path)

    def __exit__(self, *exc: object) -> None:
        self._alive.set()
        if self.host is not None:
            self.host.release()
        self.sweep.release()
