"""The C heap kept for reuse by a command that builds and drops large arrays (`keep_freed_memory`).

glibc's malloc gives an allocation above its mmap threshold (128 KiB at first, rising with what is
freed) pages of its own and returns them to the system when it is freed; the next one of the same size
gets fresh pages, each zeroed by the kernel at its first touch. numpy asks for huge pages for arrays of
4 MiB and more (madvise), so that such a touch zeroes 2 MiB, and where the kernel compacts memory to find
one (transparent huge pages' "madvise" defrag, a common default) it stalls the fault. A report of 10,000
records makes and drops thousands of such arrays and frames (columns, bootstrap resamples, pickled
frames): about 207,000 page faults and 1.3 s of system time over its processes, 0.3 s of it in the
aggregation's bootstrap, which everything after it waits for. Served from the heap instead, the heap's
top kept, a freed block is reused as it is (180,000 faults with this alone); without huge pages a fault
zeroes 4 KiB, not 2 MiB, and never waits for compaction (as many faults again, but cheap ones): the
aggregation's bootstrap took 0.31-0.36 s of wall time instead of 0.47-0.49 s (docs/results/reports.md).

pyarrow (pandas' strings) allocates from a pool of its own, mimalloc in its wheels, which takes its
memory in huge pages: each first touch zeroes 2 MiB for a few strings, 2.5-4.3 % of the command's CPU
samples in the kernel's page clearing against 0.9-1.0 % with Arrow's system pool, glibc's malloc
(`perf record -a` of `fsdp-bench report` of 10,000 records, three runs each, at 30c256d). So Arrow is
told to use malloc too, by its variable before pyarrow is imported (a setting the user made is kept).

Process-wide and for the rest of the process, so only for the commands whose work is one big batch
(`report`); where the C library is not glibc, malloc is left alone.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
# Allocations up to this size come from the heap: glibc's largest mmap threshold (HEAP_MAX / 2 on 64 bits).
MMAP_THRESHOLD = 32 << 20
# The heap's free top is kept up to this much (mallopt takes an int), and grown this much at a time.
TRIM_THRESHOLD = 1 << 30
TOP_PAD = 64 << 20
# numpy's switch of huge pages (read when numpy is imported; its documented runtime setting).
NUMPY_HUGEPAGE_VARIABLE = "NUMPY_MADVISE_HUGEPAGE"
# Arrow's default memory pool (read at pyarrow's import) and the pool that is the C library's malloc.
ARROW_POOL_VARIABLE, ARROW_SYSTEM_POOL = "ARROW_DEFAULT_MEMORY_POOL", "system"


def keep_freed_memory() -> bool:
    """Serve allocations up to MMAP_THRESHOLD from the heap and keep what is freed for reuse, and let
    numpy ask for no huge pages, and Arrow allocate by malloc where pyarrow is not imported yet; True
    where the C library took the settings (glibc), False elsewhere. Forked children inherit them."""
    _no_huge_pages()
    if "pyarrow" not in sys.modules:  # once imported, its pool is chosen: pandas' frames of this process use it
        os.environ.setdefault(ARROW_POOL_VARIABLE, ARROW_SYSTEM_POOL)
    mallopt = _mallopt()
    if mallopt is None:
        return False
    settings = ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_TOP_PAD, TOP_PAD))
    taken = [mallopt(parameter, value) == 1 for parameter, value in settings]  # each one tried
    return all(taken)


@functools.cache
def _mallopt():
    """glibc's mallopt(int, int) -> int, or None (another C library, or none to be found)."""
    try:  # CDLL(None) is this process's own symbols on POSIX; elsewhere it raises TypeError
        libc = ctypes.CDLL(None)
        mallopt, version = libc.mallopt, libc.gnu_get_libc_version
    except (OSError, AttributeError, TypeError):
        return None
    del version  # glibc's own function: its presence says the mallopt is glibc's
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt


def _no_huge_pages() -> None:
    """numpy without madvise(MADV_HUGEPAGE): by its variable before it is imported (a setting the user
    made is kept), by its own switch after."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        os.environ.setdefault(NUMPY_HUGEPAGE_VARIABLE, "0")
        return
    if os.environ.get(NUMPY_HUGEPAGE_VARIABLE) is None:
        switch = getattr(getattr(getattr(numpy, "_core", None), "multiarray", None), "_set_madvise_hugepage", None)
        if switch is not None:
            switch(False)
