"""No idle helper threads in a command that forks (`no_helper_threads`), set before numpy and pyarrow load.

Two native libraries start threads of their own when they load: numpy's OpenBLAS one per further
CPU, each spinning for work for a while before it sleeps (about 0.05 s of CPU at numpy's import
on 2 cores: 0.13 s against 0.07 s with one thread), and the jemalloc inside pyarrow a background
thread that purges memory; together about 1.6 % of the CPU samples of `fsdp-bench report` of 10,000
records (`perf record -a`, at 30c256d), taken from the two cores its processes share. The report
multiplies no large matrices, and Arrow allocates by malloc there (bench/analysis/heap.py). Nor does
fork copy a thread, only its locks, wherever they stand: a process that forks its workers is safer
without them (bench/analysis/forking.py `can_fork` sees Python's threads only).

Set by the libraries' own variables, for this process and what it forks, only before the library is
loaded (after, the threads are running and the setting would only reach later processes); a
setting the user made is kept.
"""

from __future__ import annotations

import os
import sys

# OpenBLAS's thread count and the configuration of pyarrow's jemalloc (its prefix is je_arrow_).
BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"
ARROW_JEMALLOC_VARIABLE = "JE_ARROW_MALLOC_CONF"
SETTINGS = {
    "numpy": (BLAS_THREADS_VARIABLE, "1"),
    "pyarrow": (ARROW_JEMALLOC_VARIABLE, "background_thread:false"),
}


def no_helper_threads() -> list[str]:
    """Ask numpy's OpenBLAS for no threads of its own and pyarrow's jemalloc for no background thread,
    where each library is not loaded yet; returns the variables this set."""
    taken = []
    for module, (variable, value) in SETTINGS.items():
        if module not in sys.modules and variable not in os.environ:
            os.environ[variable] = value
            taken.append(variable)
    return taken
