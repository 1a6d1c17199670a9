"""What filled memory, by category: one extra step under FSDP2's memory tracker (profile.memory_categories).

`FSDPMemTracker` (torch.distributed._tools, a private module: looked up tolerantly) counts every
tensor the step allocates by what it is (sharded and unsharded parameters, gradients, optimizer
state, activations, temporaries, the collectives' buffers, inputs) and keeps each category's size at
the moment of the total's peak. It works on CPU too. The step runs after the timed window (and after
any profiled steps), eager, because the tracker is a dispatch mode that torch.compile will not trace;
its loss is not kept. It costs several times a step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def tracker_class():
    """FSDPMemTracker, or None where this torch has no such module."""
    try:
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    except ImportError:
        return None
    return FSDPMemTracker


def categories_at_peak(model, optimizer, run_step: Callable[[], None]) -> tuple[dict[str, int] | None, str | None]:
    """({category: bytes} at the total's peak, on the device with the largest, "Total" among them; None)
    or (None, why not)."""
    tracker = tracker_class()
    if tracker is None:
        return None, "this torch has no torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker"
    try:
        mem = tracker(mod=model, optm=optimizer)
    except AssertionError as exc:  # a model FSDP2 did not wrap
        return None, f"FSDPMemTracker refused the model: {exc}"
    with torch.compiler.set_stance("force_eager"), mem:
        run_step()
    peaks = mem.get_tracker_snapshot("peak")
    if not peaks:
        return None, "FSDPMemTracker saw no allocation"
    snapshot = max(peaks.values(), key=lambda s: s.get("Total", 0))
    # The tracker's keys are its reference types (an enum whose values are the names it displays) and "Total".
    return {str(getattr(k, "value", k)): int(v) for k, v in snapshot.items()}, None
