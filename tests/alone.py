"""Tests marked `alone` run while the other xdist workers run nothing.

A timing-sensitive test (tests/e2e/test_history_cli.py compares tokens/s across runs) measures
what the two cores give its ranks; when another worker starts ranks of its own halfway, one run
gets both cores and the next half of them, and a 3x step between runs of the same point looks like
a change. So every test holds a shared lock on a file every worker sees while it runs (setup, call
and teardown: module fixtures are set up inside the first test that needs them), and an `alone`
test an exclusive one: it waits until the other workers' current tests end, and their next
tests wait until the `alone` test ends. A second lock, the gate, gives the exclusive taker
precedence: flock alone lets a worker that takes the shared lock between its tests over and over
starve a waiting exclusive taker. Machine load from outside the suite is not covered.

Without xdist (one process) tests run one at a time anyway: nothing is locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def share_of_the_machine(alone: bool) -> Iterator[None]:
    """Hold the suite's lock (shared, or exclusive when `alone`) for the block. The lock files are
    named by xdist's id of this test run, which every worker of the run has and no other run."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not os.environ.get("PYTEST_XDIST_WORKER") or not run:
        yield
        return
    gate, lock = (Path(tempfile.gettempdir()) / f"fsdp-bench-tests-{run}.{name}" for name in ("gate", "lock"))
    if alone:
        with _flock(gate, fcntl.LOCK_EX), _flock(lock, fcntl.LOCK_EX):
            yield
        return
    with _flock(gate, fcntl.LOCK_SH):
        pass  # waits while an `alone` test holds or waits for the lock
    with _flock(lock, fcntl.LOCK_SH):
        yield
