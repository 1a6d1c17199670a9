"""Whether work may go to forked worker processes here (`can_fork`), and how many CPUs they may use.

A forked child copies every lock of its parent as it was: with another thread running (a test
runner's, a library's pool) a lock held mid-use stays held in the child forever. So work is forked
only where fork exists and this process runs one thread; elsewhere it runs serially, with the same
results. Used by history's drawing process and its figure workers, and the report's figure workers.
"""

from __future__ import annotations

import multiprocessing
import os
import threading


def can_fork() -> bool:
    """fork is there and safe: no other thread whose locks the child would copy mid-use."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
