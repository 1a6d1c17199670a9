"""Stop whatever a results folder's locks and launch files name (`fsdp-bench cancel RESULTS`).

For each sweep folder in RESULTS (RESULTS itself, or the sweep folders in it): an fsdp-bench on
this host that holds the folder's lock gets SIGTERM (it records its running point as
`interrupted` and stops its launch, as on Ctrl-C); then, holding the lock itself, every cluster
job a launch folder names that still runs is cancelled (bench/run/ownership/jobs.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

from bench.run.launch.base import forget_job
from bench.run.ownership.jobs import left_jobs
from bench.run.ownership.locks import FileLock, sweep_lock_path
from bench.schema.protocol import LAUNCHES_DIR, SWEEP_LOCK
from fsdp_core.lifeline import pid_alive

# How long a signalled holder gets to record its point and stop its launch (scancel waits up to 60 s).
HOLDER_STOP_S = 120.0


def sweep_dirs(results: Path) -> list[Path]:
    """RESULTS if it is a sweep folder (it has a lock or launch folders), else the sweep folders in it."""

    def is_sweep(folder: Path) -> bool:
        return (folder / SWEEP_LOCK).exists() or (folder / LAUNCHES_DIR).is_dir()

    if is_sweep(results):
        return [results]
    return sorted(d for d in results.iterdir() if d.is_dir() and is_sweep(d))


def cancel_sweep(folder: Path) -> tuple[bool, bool]:
    """(everything named is stopped, something was stopped) for one sweep folder."""
    lock, stopped = FileLock(sweep_lock_path(folder), f"the sweep folder {folder}"), False
    if not lock.try_acquire():
        holder = lock.holder()
        pid = holder.get("pid")
        if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
            print(f"error: {lock.describe_holder()}: stop it on {holder.get('host', 'its host')}", file=sys.stderr)
            return False, False
        print(f"stopping fsdp-bench pid {pid} ({holder.get('command')}), which holds {folder}", flush=True)
        with contextlib.suppress(ProcessLookupError):  # it may have ended on its own meanwhile
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + HOLDER_STOP_S
        while not lock.try_acquire():
            if time.monotonic() > deadline and pid_alive(pid):
                print(f"error: pid {pid} still holds {folder} after {HOLDER_STOP_S:g} s", file=sys.stderr)
                return False, True
            time.sleep(0.2)
        stopped = True
    try:
        ok = True
        for job in left_jobs(folder):
            if not job.running():
                forget_job(job.launch_dir)
            elif job.stop():
                print(f"cancelled {job}", flush=True)
                stopped = True
            else:
                print(f"error: {job} still runs after cancelling it", file=sys.stderr)
                ok = False
        return ok, stopped
    finally:
        lock.release()


def cancel_results(results: Path) -> tuple[bool, bool]:
    """(everything named is stopped, something was there to stop) over every sweep folder of RESULTS."""
    outcomes = [cancel_sweep(folder) for folder in sweep_dirs(results)]
    return all(ok for ok, _ in outcomes), any(done or not ok for ok, done in outcomes)
