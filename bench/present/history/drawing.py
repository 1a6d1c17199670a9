"""The process that finds history's change points and draws history.html, started before the store
is read.

Importing the detector's libraries (Otava and scipy.stats: ~1.2 s of CPU) and the drawing libraries
(matplotlib, pandas, Jinja2: ~2 s), and drawing the figures (~1.5 s for ten), are half of
`fsdp-bench history` over a 10,000-run store, and none of it needs the store: a process forked when
the command starts imports them while the command reads the store and builds the series. It then
answers two requests, in order: the change points of the series' values (`detect_each`,
bench/analysis/history/detect.py, the same function the command would call; found while the command
checks the loss curves), and, from
bench/present/history/inputs.py's PageInputs, the PNG bytes and the page's text
(bench/present/history/draw.py). The command writes every file itself, so a full or read-only disk
fails there as it always did. Where fork is not safe (no fork, or other threads running)
`drawing_process` gives None and the command does both itself: the same results either way.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.analysis.forking import can_fork

DETECT, PAGE = "detect", "page"


class DrawingProcess:
    """One forked process: imports the detector and bench/present/history/draw.py, finds the change
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


def _serve(conn) -> None:
    from bench.analysis.history.detect import detect_each, import_detector

    import_detector()  # first: the change points are asked for first
    handlers: dict[str, Callable[[Any], Any]] = {DETECT: detect_each}
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
    from bench.present.history.draw import render_page  # matplotlib, pandas, Jinja2

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
