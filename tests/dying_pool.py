"""A worker pool whose every worker dies as it starts (`dying_pool`: an OOM kill, a signal), for the
tests of what a command does when its pool's tasks fail: each task ends with BrokenProcessPool. A
module of its own, not conftest (tests/bench_cli.py says why)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from contextlib import contextmanager

from bench.analysis.pool import WorkerPool, start_method


@contextmanager
def dying_pool(*args, **kwargs) -> Iterator[WorkerPool]:
    """bench.analysis.pool.worker_pool's shape (its arguments ignored), its workers exiting at their start."""
    context = multiprocessing.get_context(start_method())
    pool = WorkerPool(2, mp_context=context, initializer=os._exit, initargs=(3,))
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
