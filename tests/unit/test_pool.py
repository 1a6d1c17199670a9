"""bench/analysis/pool.py: a concurrent.futures pool whose workers never start as a fork of the
caller (a lock a thread of the caller holds is free in a worker), no pool with one CPU, and a task
that failed in its worker done here instead, its own error raised here where it fails here too.
The tasks are this module's functions: the workers import it by name (pytest put its folder on sys.path)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from bench.analysis import pool as pools

# Held by a thread of the test's process while a worker tries to take it.
_LOCK = threading.Lock()


def _pid() -> int:
    return os.getpid()


def _took_the_lock() -> bool:
    """In a worker: this module's lock, which a thread of the test's process holds there."""
    if _LOCK.acquire(timeout=5):
        _LOCK.release()
        return True
    return False


def _fails_in_a_worker(value: int) -> int:
    if multiprocessing.parent_process() is not None:
        raise MemoryError("a worker ran out of memory")
    return value * 2


def _fails_everywhere(value: int) -> int:
    raise ValueError(f"no figure for {value}")


def test_no_pool_with_one_cpu_or_one_worker(monkeypatch):
    with pools.worker_pool(workers=1) as pool:
        assert pool is None
    monkeypatch.setattr(pools, "cpus", lambda: 1)
    with pools.worker_pool() as pool:
        assert pool is None
    pools.warm(None)  # nothing to start
    assert not pools.starting(None)


def test_workers_are_processes_of_their_own_that_a_thread_here_does_not_block():
    """A fork would copy the lock as this process's thread holds it; a forkserver's worker imports this
    module afresh."""
    assert pools.start_method() == (
        "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    )
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with _LOCK:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(5)
        with pools.worker_pool(preload=["json"], workers=2) as pool:
            assert pool is not None
            pools.warm(pool)
            deadline = time.monotonic() + 120
            while pools.starting(pool) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not pools.starting(pool)  # the first worker has started
            pids = [task.result(timeout=120) for task in [pool.submit(_pid) for _ in range(4)]]
            assert os.getpid() not in pids
            assert pool.submit(_took_the_lock).result(timeout=60)
    finally:
        release.set()
        holder.join()


def test_a_task_that_failed_in_its_worker_is_done_here_and_its_own_error_raised_here():
    with pools.worker_pool(workers=2) as pool:
        failed = pool.submit(_fails_in_a_worker, 21)
        with pytest.warns(UserWarning, match=r"doubling failed in a worker process \(MemoryError"):
            assert pools.result_or_here(failed, lambda: _fails_in_a_worker(21), "doubling") == 42
        wrong = pool.submit(_fails_everywhere, 3)
        with pytest.warns(UserWarning, match="drawing failed in a worker process"):
            with pytest.raises(ValueError, match="no figure for 3"):
                pools.result_or_here(wrong, lambda: _fails_everywhere(3), "drawing")


def test_the_tasks_of_a_worker_that_died_are_done_here():
    from dying_pool import dying_pool

    with dying_pool() as pool:
        tasks = [pools.submit(pool, _pid) for _ in range(3)]
        with pytest.warns(UserWarning, match=r"a pid failed in a worker process \(BrokenProcessPool"):
            assert [pools.result_or_here(task, os.getpid, "a pid") for task in tasks] == [os.getpid()] * 3
        assert pools.submit(pool, _pid) is None  # the pool is broken: it takes nothing more
        with pytest.warns(UserWarning, match="a pid was not given to a worker"):
            assert pools.result_or_here(None, os.getpid, "a pid") == os.getpid()
