"""Whether work may go to forked worker processes here (`can_fork`), and how many CPUs they may use.

A forked child copies every lock of its parent as it was: with another thread running (a test
runner's, a library's pool) a lock held mid-use stays held in the child forever. So work is forked
only where fork exists and this process runs one thread; elsewhere it runs serially, with the same
results. Used by history's drawing process and its figure workers, the report's figure workers, check's
and the report's readers and the report's folder listing (`Worker`, below).

`Worker` is a forked process that works for this one while it goes on, each result sent back
pickled. `check` spends its time on work that splits into independent shares (reading records,
comparing points): a share goes to a process forked at the start, while this one's memory is small
(a fork of a big heap costs both processes a copy of every page either writes) and before the
imports both need (each imports them at once, on its own CPU). The worker runs a first task from
its own copy of the arguments, a generator whose every item is sent back as it comes, then the
calls sent to it, in order. Where forking is unsafe or there is one CPU there is no worker; where
there is none, or it died or failed, each result is computed here when asked for (the caller says
how: `result(otherwise)`), so the results are the same either way, and an error is raised here,
where it would be without a worker.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pickle
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import multiprocessing.connection


def can_fork() -> bool:
    """fork is there and safe: no other thread whose locks the child would copy mid-use."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


_PROTOCOL = pickle.HIGHEST_PROTOCOL


class Worker:
    """`start` forks the worker on its first task; `result(otherwise)` returns its next result;
    `submit` sends it a call (a module-level function and picklable arguments) once every result
    before it was taken (two results crossing in two pipes' buffers could each wait for the other
    to be read); `finish` tells it nothing more is coming (it ends by itself). A context manager whose
    exit stops the worker and reaps it."""

    def __init__(self) -> None:
        self._conn: multiprocessing.connection.Connection | None = None
        self._pid: int | None = None
        self._submitted: tuple[Callable[..., Any], tuple[Any, ...]] | None = None

    @classmethod
    def start(cls, task: Callable[..., Iterator[Any]], *args: Any, then_import: Sequence[str] = ()) -> Worker:
        """Fork the worker on `task(*args)` now (its items are the first results), after which it
        imports the modules `then_import` (what later calls need, loaded while this process works);
        with one CPU or where forking is unsafe, none starts."""
        worker = cls()
        if cpus() >= 2 and can_fork():
            worker._fork(task, args, then_import)
        return worker

    @property
    def pid(self) -> int | None:
        """The worker's process id (None: there is none)."""
        return self._pid

    @property
    def running(self) -> bool:
        """Whether a forked worker is there (False: every result is computed here)."""
        return self._pid is not None

    def _fork(self, task: Callable[..., Iterator[Any]], args: tuple[Any, ...], then_import: Sequence[str]) -> None:
        here, there = multiprocessing.Pipe(duplex=True)
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a pids limit, no memory): everything is computed here
            here.close()
            there.close()
            return
        if pid == 0:  # the worker: never returns, and leaves the parent's state alone (os._exit)
            status = 1
            try:
                here.close()
                _serve(there, task(*args), then_import)
                status = 0
            finally:
                os._exit(status)
        there.close()
        self._conn, self._pid = here, pid

    def submit(self, function: Callable[..., Any], *args: Any) -> None:
        """Send the worker a call; `result()` returns its result (computed here where there is no worker)."""
        self._submitted = (function, args)
        if self._conn is not None:
            try:
                self._conn.send_bytes(pickle.dumps((function, args), protocol=_PROTOCOL))
            except OSError:  # the worker is gone: the call runs here
                self.close()

    def result(self, otherwise: Callable[[], Any] | None = None) -> Any:
        """The worker's next result; without a worker, `otherwise()` (by default the submitted call, run here)."""
        if otherwise is None:
            if self._submitted is None:
                raise RuntimeError("Worker.result: nothing to compute it from")
            function, args = self._submitted
            self._submitted = None
            otherwise = lambda: function(*args)  # noqa: E731
        if self._conn is not None:
            try:
                return pickle.loads(self._conn.recv_bytes())
            except (EOFError, OSError):  # the worker ended without this result
                self.close()
        return otherwise()

    def finish(self) -> None:
        """Nothing more for the worker: its pipe is shut down and closed, it ends by itself and gives
        its memory back on its own time (tens of ms for a reader's hundreds of MB), not while this
        process waits in `close`, which then finds it ended and reaps it. Shut down, not only closed:
        processes forked since (the report's figure workers) hold copies of this end, and the worker
        would see no end before theirs closed. Later results are computed here."""
        if self._conn is not None:
            shut_down(self._conn)
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Stop the worker (if it still runs) and reap it."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def _serve(conn: multiprocessing.connection.Connection, items: Iterator[Any], then_import: Sequence[str]) -> None:
    """The worker's life: the first task's items, the imports, then each call received until the pipe closes.

    Each item of the first task is sent by a thread while the next one is computed: a pipe holds
    64 KiB, so a big item (a 10,000-path list is 600 KiB) waits until this worker's parent takes it,
    which may be after its own imports and work; the next item should not wait with it. (Only the
    worker runs a thread, and it forks nothing.)"""
    sending: Sending | None = None
    try:
        for item in items:
            payload = pickle.dumps(item, protocol=_PROTOCOL)
            if sending is not None and not sending.done():
                return  # the parent is gone: nothing more to send
            sending = Sending(conn, payload)
    finally:  # an item being sent arrives whole, even where computing the next one failed
        if sending is not None:
            sending.done()
    if sending is not None and not sending.done():
        return
    for name in then_import:
        importlib.import_module(name)
    while True:
        try:
            function, args = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        conn.send_bytes(pickle.dumps(function(*args), protocol=_PROTOCOL))


class Sending:
    """One payload being sent on a thread of its own, after `after` (the one sent before it on the same
    pipe) has gone; `done()` waits for it: True once sent, False where the pipe broke (the other end is
    gone). A pipe holds 64 KiB: a bigger payload is written as the other end reads it, and the sender
    need not wait for that."""

    def __init__(
        self, conn: multiprocessing.connection.Connection, payload: bytes, after: Sending | None = None
    ) -> None:
        self._conn, self._payload, self._after, self._sent = conn, payload, after, False
        self._thread = threading.Thread(target=self._send, daemon=True)
        self._thread.start()

    def _send(self) -> None:
        if self._after is not None and not self._after.done():
            return
        self._after = None
        try:
            self._conn.send_bytes(self._payload)
            self._sent = True
        except OSError:
            pass

    def done(self) -> bool:
        self._thread.join()
        return self._sent


def shut_down(conn: multiprocessing.connection.Connection) -> None:
    """Shut both directions of a pipe to a worker (a socket pair) down without closing it: a send under
    way ends with an error, and the worker reads the end even where other processes hold copies of
    this end (forked after it)."""
    with contextlib.suppress(OSError):
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as end:
            end.shutdown(socket.SHUT_RDWR)
