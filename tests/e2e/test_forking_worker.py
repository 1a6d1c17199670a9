"""bench/analysis/forking.py's Worker with real forked processes: each item of its first task is sent
while the next is computed, so an item bigger than a pipe holds does not hold back the work after it;
items arrive whole and in order, even where computing a later one fails; and a result it never sent
is computed here."""

from __future__ import annotations

import os
import time

import pytest

from bench.analysis.forking import Worker, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="fork is not safe in this process (another thread runs)")

BIG = 1_300_000  # bytes: twenty times what a pipe holds


def _big_then_timed(started: float):
    """A big item, then the time at which the worker began the work after it."""
    yield b"x" * BIG
    yield time.monotonic() - started


def _big_then_fail():
    yield b"y" * BIG
    raise MemoryError("the second item fails")


def _in_order(count: int):
    for index in range(count):
        yield (index, os.getpid(), b"z" * (BIG if index % 2 else 10))


def test_the_work_after_a_big_item_does_not_wait_for_the_parent_to_take_it():
    with Worker.start(_big_then_timed, time.monotonic()) as worker:
        assert worker.running
        time.sleep(1.0)  # the parent is busy elsewhere: the big item sits in the pipe meanwhile
        first = worker.result(lambda: "computed here")
        began = worker.result(lambda: "computed here")
    assert first == b"x" * BIG
    assert isinstance(began, float) and began < 0.9  # before, it began once the parent took the first


def test_an_item_being_sent_arrives_whole_when_the_next_one_fails():
    with Worker.start(_big_then_fail) as worker:
        time.sleep(0.5)
        assert worker.result(lambda: "computed here") == b"y" * BIG
        assert worker.result(lambda: "computed here") == "computed here"  # the failed one, here


def test_items_arrive_in_order_from_the_worker():
    with Worker.start(_in_order, 6) as worker:
        got = [worker.result(lambda: None) for _ in range(6)]
    assert [index for index, _, _ in got] == list(range(6))
    assert {pid for _, pid, _ in got} != {os.getpid()}  # sent by the worker, not computed here
    assert [len(blob) for _, _, blob in got] == [10, BIG, 10, BIG, 10, BIG]


def test_a_finished_worker_ends_by_itself_and_close_reaps_it():
    """finish(): the worker reads the end of its pipe and exits on its own (status 0, not killed) while
    this process goes on, even where a process forked since holds a copy of this end (the report's
    figure workers do); results asked for later are computed here; close() then only reaps it."""
    worker = Worker.start(_in_order, 2)
    assert worker.running
    assert [worker.result(lambda: None)[0] for _ in range(2)] == [0, 1]
    holder = os.fork()  # holds the parent's end of the worker's pipe, as a figure worker does
    if holder == 0:
        time.sleep(30)
        os._exit(0)
    try:
        worker.finish()
        deadline, ended = time.monotonic() + 10, None
        while ended is None and time.monotonic() < deadline:  # the exit, left unreaped (WNOWAIT)
            ended = os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            time.sleep(0.01)
        assert ended is not None, "the worker did not end within 10 s of finish()"
        assert (ended.si_code, ended.si_status) == (os.CLD_EXITED, 0)
        assert worker.result(lambda: "computed here") == "computed here"
        pid = worker.pid
        worker.close()
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped
    finally:
        os.kill(holder, 9)
        os.waitpid(holder, 0)
