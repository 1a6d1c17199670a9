"""Opt-in CPU accounting of every Python process a test run starts (tests/accounting/summary.py sums it).

With this folder first on PYTHONPATH and FSDP_BENCH_CPU_LOG naming a file, each Python process
appends one JSON line when it exits: the test it ran under (PYTEST_CURRENT_TEST, which children
inherit), its argv, its own user+sys CPU seconds and its wall time. Ranks, torchrun agents and
fsdp-bench parents are Python processes, so a pytest run shows where its CPU went:

    FSDP_BENCH_CPU_LOG=/tmp/cpu.jsonl PYTHONPATH=tests/accounting:. .venv/bin/python -m pytest -n 0 FILE
    .venv/bin/python tests/accounting/summary.py /tmp/cpu.jsonl

A process killed by a signal (SIGKILL, or a rank stopped by its agent) writes no line, and a test
that replaces the environment (env=...) drops the variables: such processes are missing.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import sys
import time

_STARTED = time.time()


def _log_cpu() -> None:
    path = os.environ.get("FSDP_BENCH_CPU_LOG")
    if not path:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    line = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        "argv": " ".join(sys.argv)[:300],
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": time.time() - _STARTED,
    }
    try:
        with open(path, "a") as out:  # one short append per process: lines do not interleave
            out.write(json.dumps(line) + "\n")
    except OSError:  # a test's full or read-only disk must not change how the process exits
        pass


atexit.register(_log_cpu)
