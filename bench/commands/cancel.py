"""`fsdp-bench cancel RESULTS`: stop whatever a results folder's locks and launch files name.

For each sweep folder in RESULTS (RESULTS itself, or the sweep folders in it): an fsdp-bench on
this host that holds the folder's lock gets SIGTERM (it records its running point as
`interrupted` and stops its launch, as on Ctrl-C); then, holding the lock itself, it cancels every
cluster job a launch folder names that still runs (bench/jobs.py: `scancel`, `kubectl delete`).
Exit 0 when nothing named is left running, 1 when something could not be stopped (a holder on
another host, a job that did not end), 2 when RESULTS is not a folder.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

HELP = "stop the fsdp-bench and the cluster jobs that a results folder's locks and launch files name"
# How long a signalled holder gets to record its point and stop its launch (scancel waits up to 60 s).
HOLDER_STOP_S = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="a results folder (results_dir) or one sweep folder in it")


def sweep_dirs(results: Path) -> list[Path]:
    """RESULTS if it is a sweep folder (it has a lock or launch folders), else the sweep folders in it."""
    from fsdp_core.protocol import LAUNCHES_DIR, SWEEP_LOCK

    def is_sweep(folder: Path) -> bool:
        return (folder / SWEEP_LOCK).exists() or (folder / LAUNCHES_DIR).is_dir()

    if is_sweep(results):
        return [results]
    return sorted(d for d in results.iterdir() if d.is_dir() and is_sweep(d))


def main(args: argparse.Namespace) -> int:
    results = args.results
    if not results.is_dir():
        print(
            f"error: {results} is not a folder; give a results folder (results_dir) or a sweep folder", file=sys.stderr
        )
        return 2
    outcomes = [cancel_sweep(folder) for folder in sweep_dirs(results)]
    if not any(done or not ok for ok, done in outcomes):
        print(f"nothing to cancel in {results}")
    return 0 if all(ok for ok, _ in outcomes) else 1


def cancel_sweep(folder: Path) -> tuple[bool, bool]:
    """(everything named is stopped, something was stopped) for one sweep folder."""
    from bench.jobs import forget_job, left_jobs
    from bench.locks import FileLock, sweep_lock_path
    from fsdp_core.lifeline import pid_alive

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
