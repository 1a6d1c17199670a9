"""Worker processes for work that splits into independent tasks (`worker_pool`): a
concurrent.futures.ProcessPoolExecutor whose workers never start as a fork of the calling process.

A fork copies the caller as it is, every lock of its threads included (a test runner's, a library's
pool, the executor's own manager thread), and a lock held mid-use stays held in the child. So the
workers come from multiprocessing's forkserver where the platform has one: a fresh server process
imports the modules the tasks need (`preload`) once, and each worker is forked from it, one thread,
those modules loaded. Elsewhere they are spawned: a fresh interpreter each, which imports them first.

A pool costs a process start and the imports: the callers use one only for work big enough to pay
for it and do everything else, small inputs whole, in their own process. With one CPU there is no
pool (`worker_pool` gives None). Each task's arguments and result are pickled: a task takes the
data it reads, not a whole frame.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
# More workers than this wait on each other (and on the caller's process) more than they work.
MAX_WORKERS = 4


def cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def start_method() -> str:
    """forkserver where the platform has it, else spawn: never a fork of the caller."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


class WorkerPool(ProcessPoolExecutor):
    """A ProcessPoolExecutor whose first worker can be started without waiting for it (`warm`): starting
    a worker waits for the forkserver's imports, and `starting()` says whether that is still under way
    (a task given to the pool now would wait for it, and so would the caller)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Public names: ProcessPoolExecutor keeps its own state in `_`-prefixed attributes, which a
        # subclass must not shadow.
        self.warm_requested = False
        self.first_worker_started = threading.Event()

    def warm(self) -> None:
        """Start the first worker (and with it the forkserver, which imports the preloaded modules) by
        giving it a task that does nothing, on a thread of its own."""
        self.warm_requested = True
        threading.Thread(target=self.start_first_worker, name="worker pool start", daemon=True).start()

    def starting(self) -> bool:
        """Whether the first worker `warm` started is still starting."""
        return self.warm_requested and not self.first_worker_started.is_set()

    def start_first_worker(self) -> None:
        """Give the pool a task that does nothing (`warm` calls it on a thread of its own)."""
        try:
            with contextlib.suppress(RuntimeError):  # shut down first, or broken: nothing to start
                self.submit(int)
        finally:
            self.first_worker_started.set()


@contextmanager
def worker_pool(preload: Sequence[str] = (), workers: int | None = None) -> Iterator[WorkerPool | None]:
    """A pool of `workers` processes (None: one per CPU, at most MAX_WORKERS) for the block, shut down
    at its end (tasks not started are cancelled); None where that is fewer than two. `preload`: the
    modules every task imports, loaded once by the forkserver before it forks the workers (a forkserver
    started earlier in this process keeps the modules it was given)."""
    count = min(cpus() if workers is None else workers, MAX_WORKERS)
    if count < 2:
        yield None
        return
    context = multiprocessing.get_context(start_method())
    if preload and context.get_start_method() == "forkserver":
        context.set_forkserver_preload(list(preload))
    pool = WorkerPool(count, mp_context=context, initializer=_import, initargs=(tuple(preload),))
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def submit(pool: Executor, function: Callable[..., T], *args: Any) -> Future[T] | None:
    """`pool.submit(function, *args)`; None where the pool takes no more tasks (a worker of it died,
    BrokenProcessPool): `result_or_here` then does the work here."""
    try:
        return pool.submit(function, *args)
    except BrokenProcessPool:
        return None


def result_or_here(task: Future[T] | None, here: Callable[[], T], what: str) -> T:
    """The task's result; where the task failed (its worker died, or it raised there) or was never
    given to a worker (`submit` gave None), `here()`, with a warning that names `what` and why: a
    worker's failure costs time, not the output, and an error of the work's own is raised here, with
    this process's traceback."""
    if task is None:
        warnings.warn(f"{what} was not given to a worker (the pool had stopped): done in this process", stacklevel=2)
        return here()
    try:
        return task.result()
    except Exception as exc:  # noqa: BLE001 - done here instead, where its own error is raised again
        warnings.warn(f"{what} failed in a worker process ({exc!r}): done in this process", stacklevel=2)
        return here()


def _import(modules: tuple[str, ...]) -> None:
    """A worker's start: the preloaded modules imported (already, where the forkserver forked it)."""
    for name in modules:
        importlib.import_module(name)


def warm(pool: WorkerPool | None) -> None:
    """`pool.warm()` where there is a pool."""
    if pool is not None:
        pool.warm()


def starting(pool: Executor | None) -> bool:
    """Whether the pool's first worker is still starting (WorkerPool.starting; False for any other pool)."""
    return isinstance(pool, WorkerPool) and pool.starting()
