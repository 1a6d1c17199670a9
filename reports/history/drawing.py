"""The process that finds history's change points and draws history.html, started before the store
is read.

Importing the detector's libraries (Otava and scipy.stats: ~1.2 s of CPU) and the drawing libraries
(matplotlib and Jinja2), and drawing the figures (~1.5 s for ten), are half of
`fsdp-bench history` over a 10,000-run store, and none of it needs the store: a process forked when
the command starts imports them while the command reads the store and builds the series. It then
answers two requests, in order: the change points of the series' values (`detect_each`,
bench/analysis/history/detect.py, the same function the command would call; found while the command
checks the loss curves), and, from
reports/history/inputs.py's PageInputs, the PNG bytes and the page's text
(reports/history/draw.py). The command writes every file itself, so a full or read-only disk
fails there as it always did. Where fork is not safe (no fork, or other threads running)
`drawing_process` gives None and the command does both itself: the same results either way.

The change points are the command's one wait between reading the store and drawing, and the
command's own process does little meanwhile: with two CPUs or more the early process forks a second
detector once Otava is imported (bench/analysis/forking.py `Worker`), which finds the change points of the second half of
the series while the early process finds those of the first (each series' are its own: the same
results as one `detect_each` of all).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.analysis.forking import Worker, can_fork, cpus

DETECT, PAGE = "detect", "page"


class DrawingProcess:
    """One forked process: imports the detector and reports/history/draw.py, finds the change
    points of one batch of series and renders one PageInputs."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), name="fsdp-bench history drawing")
        self._process.start()
        child.close()

    def ask_detect(self, values_of: list[list[float]]) -> Callable[[], list]:
        """bench.analysis.history.detect.detect_each, asked of the process now; the function that
        waits for its answer (the command checks the loss curves meanwhile: a DetectEach)."""
        self._conn.send((DETECT, values_of))
        return self._answer

    def send(self, inputs: Any) -> None:
        """The page to draw (the answer: `receive`)."""
        self._conn.send((PAGE, inputs))

    def receive(self) -> tuple[list[tuple[str, bytes]], str]:
        """The figures and the page's text."""
        return self._answer()

    def _answer(self) -> Any:
        """The request's result; its exception, raised here, where it failed."""
        ok, value = self._conn.recv()
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Stop the process whatever it is doing (the command failed before the page, or is done)."""
        self._conn.close()
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()


def _nothing() -> Iterator[Any]:
    """The second detector's first task: none (it is forked early, to be asked once its batch is known)."""
    return iter(())


def detect_in_two(helper: Worker | None, values_of: list[list[float]]) -> list:
    """detect_each of every series: the second half (by runs, which the detector's time follows) by
    `helper` while this process finds the first half's; all of them here without a helper. A helper
    that died, or failed, has its half found here (bench/analysis/forking.py Worker): the same
    change points, or the same error, as one process."""
    from bench.analysis.history.detect import detect_each

    if helper is None or not helper.running or len(values_of) < 2:
        return detect_each(values_of)
    total, runs, half = sum(len(v) for v in values_of), 0, 0
    while half < len(values_of) - 1 and runs + len(values_of[half]) <= total / 2:
        runs += len(values_of[half])
        half += 1
    half = max(half, 1)
    with helper:  # one batch each: stopped (and reaped) once its answer is in
        helper.submit(detect_each, values_of[half:])
        first = detect_each(values_of[:half])
        return first + helper.result()


def _serve(conn) -> None:
    from bench.analysis.history.detect import import_detector

    import_detector()  # first: the change points are asked for first
    # A second detector, one batch: a later batch is found here. Worker.start forks only where it is safe.
    helpers = [Worker.start(_nothing)] if cpus() >= 2 else []
    handlers: dict[str, Callable[[Any], Any]] = {
        DETECT: lambda values_of: detect_in_two(helpers.pop() if helpers else None, values_of)
    }
    while True:
        if PAGE not in handlers and not conn.poll():  # nothing asked yet: the drawing libraries meanwhile
            handlers[PAGE] = _page_renderer()
        try:
            kind, payload = conn.recv()
        except EOFError:  # the command ended (or failed) before asking
            return
        handler = handlers.get(kind) or handlers.setdefault(PAGE, _page_renderer())
        try:
            result = (True, handler(payload))
        except BaseException as exc:  # noqa: BLE001 - raised again in the command (DrawingProcess._answer)
            result = (False, exc)
        conn.send(result)
        if kind == PAGE:
            conn.close()
            return


def _page_renderer() -> Callable[[Any], Any]:
    from reports.history.draw import render_page  # matplotlib and Jinja2 (no pandas)

    return render_page


@contextmanager
def drawing_process() -> Iterator[DrawingProcess | None]:
    """A DrawingProcess for the block (stopped when it ends), or None where fork is not safe."""
    if not can_fork():
        yield None
        return
    process = DrawingProcess()
    try:
        yield process
    finally:
        process.close()
