"""No cyclic garbage collection while a large object graph is built and kept (`gc_paused`).

Loading 10,000 records, planning 10,080 points and rendering a report each build millions of
objects that all stay alive until the command ends: the collector's passes over them find nothing
to free (the same peak memory without them) and are a large part of those commands' time
(docs/results/planner.md). Nested pauses keep the outer one's state. Used by `report`, `plan`, `check`,
`baseline save`, `store`, `history`, the report's builder (which the sweep calls too) and the
records reader (bench/analysis/records.py: every command that loads a results folder)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The block without cyclic GC; the collector as it was afterwards.

    What the block made and kept is then as old as what was there before it (freeze, then unfreeze:
    every tracked object into the oldest generation, two list splices): re-enabled as it was, the
    collector would traverse all of it at the next allocation as its youngest generation, with the
    modules imported in the block, to free next to nothing. (Objects frozen before, by anyone, are unfrozen with them; only the console script
    freezes, bench/cli/main.py `entry`, after everything.)"""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
