"""The process that draws history.html, started before the store is read.

Importing the drawing libraries (matplotlib, pandas, Jinja2: ~2 s of CPU) and drawing the figures
(~1.5 s for ten) are a third of `fsdp-bench history` over a 10,000-run store, and none of it needs
the store: a process forked when the command starts imports them while the command loads and
analyses, then receives bench/present/history/inputs.py's PageInputs and sends back the PNG bytes and
the page's text (bench/present/history/draw.py). The command writes every file itself, so a full
or read-only disk fails there as it always did. Where fork is not safe (no fork, or other threads
running) `drawing_process` gives None and the page is drawn in the command's own process: the same
bytes either way.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.analysis.forking import can_fork


class DrawingProcess:
    """One forked process: imports bench/present/history/draw.py, renders one PageInputs."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), name="fsdp-bench history drawing")
        self._process.start()
        child.close()

    def send(self, inputs: Any) -> None:
        self._conn.send(inputs)

    def receive(self) -> tuple[list[tuple[str, bytes]], str]:
        """The figures and the page's text; the drawing's exception, raised here, where it failed."""
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
    from bench.present.history.draw import render_page  # the imports this process exists for

    try:
        inputs = conn.recv()
    except EOFError:  # the command ended before it had a page to draw
        return
    try:
        result = (True, render_page(inputs))
    except BaseException as exc:  # noqa: BLE001 - raised again in the command (DrawingProcess.receive)
        result = (False, exc)
    conn.send(result)
    conn.close()


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
