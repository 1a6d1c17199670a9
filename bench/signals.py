"""SIGTERM handled like Ctrl-C, so a scheduler's stop records the running point as interrupted."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def _raise_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
