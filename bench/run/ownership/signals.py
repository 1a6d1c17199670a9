"""SIGTERM and SIGHUP handled like Ctrl-C: a scheduler's stop, a closed terminal or SSH session
records the running point as interrupted, stops its process groups and keeps completed records."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

# What a scheduler (SIGTERM) or a closing terminal or SSH session (SIGHUP) sends; Ctrl-C is SIGINT.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_signals_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does.

    A signal this process was told to ignore stays ignored: `nohup fsdp-bench sweep ...` must
    survive the terminal closing.
    """
    ignored = [sig for sig in STOP_SIGNALS if signal.getsignal(sig) == signal.SIG_IGN]
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in STOP_SIGNALS if sig not in ignored}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
