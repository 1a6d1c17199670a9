"""Timing-sensitive blocks run while the other xdist workers run nothing.

A timing-sensitive fixture (tests/e2e/test_history_cli.py's nights compare tokens/s across runs)
measures what the two cores give its ranks; when another worker starts ranks of its own halfway,
one run gets both cores and the next half of them, and a 3x step between runs of the same point
looks like a change. So every test holds a shared lock on a file every worker sees while it runs
(setup, call and teardown), and a block inside a test that must run alone (`alone()`) trades it
for an exclusive one: it waits until the other workers' current tests end, and their next tests
wait until the block ends. Only the measuring block, not every test of its file: each exclusive
taker waits for the other worker's current test, so eleven exclusive tests in a row left their
worker idle for up to eleven of the other worker's tests. A second lock, the gate, gives the
exclusive taker precedence: flock alone lets a worker that takes the shared lock between its
tests over and over starve a waiting exclusive taker. Machine load from outside the suite is not
covered.

Without xdist (one process) tests run one at a time anyway: nothing is locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

# This worker's current test: (its open shared lock file, the gate's path), while it runs.
_HELD: list[tuple] = []


def _lock_paths() -> tuple[Path, Path] | None:
    """The gate and the lock of this test run (named by xdist's id of the run, which every worker
    of the run has and no other run); None outside xdist."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not os.environ.get("PYTEST_XDIST_WORKER") or not run:
        return None
    gate, lock = (Path(tempfile.gettempdir()) / f"fsdp-bench-tests-{run}.{name}" for name in ("gate", "lock"))
    return gate, lock


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pass_the_gate(gate: Path) -> None:
    with _flock(gate, fcntl.LOCK_SH):
        pass  # waits while an exclusive taker holds or waits for the lock


@contextlib.contextmanager
def share_of_the_machine() -> Iterator[None]:
    """Hold the suite's lock, shared, for the block (a test's setup, call and teardown)."""
    paths = _lock_paths()
    if paths is None:
        yield
        return
    gate, lock = paths
    _pass_the_gate(gate)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        _HELD.append((handle, gate))
        try:
            yield
        finally:
            _HELD.clear()
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Inside a test: run the block while the other workers run nothing, then share again.

    The shared lock is given up first and the exclusive one taken after the gate: converting in
    place would deadlock two workers that both wait for exclusivity while holding a share."""
    if not _HELD:
        yield
        return
    handle, gate = _HELD[0]
    fcntl.flock(handle, fcntl.LOCK_UN)
    try:
        with _flock(gate, fcntl.LOCK_EX):
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        _pass_the_gate(gate)
        fcntl.flock(handle, fcntl.LOCK_SH)
