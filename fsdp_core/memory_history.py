"""The CUDA allocator's history of a point's set-up and warm-up, and its snapshot on an out-of-memory
(profile.memory_history; CUDA only: bench/config/rules.py refuses it on a CPU cluster).

The history is recorded from model set-up through the warm-up steps, where a step's allocations first
happen, and stopped before the timed window, so no timed step runs under it. An out-of-memory later
still gets the allocator's segments: `record_failure` (fsdp_core/worker.py) writes the snapshot
(`torch.cuda.memory._snapshot()`, pickled as `_dump_snapshot` does; pytorch.org/memory_viz opens it)
beside the record before the rank's error, and that error names the largest live allocations by
category (fsdp_core/allocations.py). While the history records, each phase of a step is a range
(`phase`) the snapshot keeps as an annotation. torch documents these calls in "Understanding CUDA
Memory Usage"; they carry an underscore, so they are looked up tolerantly: a torch without them
leaves a note, never a failed import.
"""

from __future__ import annotations

import contextlib
import pickle
from pathlib import Path

import torch
from torch.autograd.profiler import record_function

from bench.schema.protocol import memory_snapshot_file
from bench.schema.spec import ProfileSpec
from fsdp_core.allocations import live_by_category
from fsdp_core.lifeline import still_owned

PHASE_PREFIX = "fsdp_bench::"  # the loop's phases as the snapshot's annotations name them

_state = {"recording": False, "recorded": False}  # this process: one point at a time


def start(profile: ProfileSpec, device: torch.device) -> str | None:
    """Start recording (profile.memory_history on a CUDA device); a note when it cannot."""
    if not profile.memory_history or device.type != "cuda":
        return None
    try:
        record = torch.cuda.memory._record_memory_history
    except AttributeError:
        return "this torch has no torch.cuda.memory._record_memory_history"
    record(max_entries=profile.memory_history_entries, stacks="python", global_record_annotations=True, device=device)
    _state.update(recording=True, recorded=True)
    return None


def stop() -> None:
    """Stop recording (before the timed window); the allocator keeps its segments for a later snapshot."""
    if _state["recording"]:
        _state["recording"] = False
        torch.cuda.memory._record_memory_history(enabled=None)


def phase(name: str):
    """A range around one phase of a step (forward, backward, optimizer step, checkpoint save) while the
    history records: with `global_record_annotations` the snapshot keeps it, so the viewer shows which
    phase each allocation came from. Nothing at all when the history is off (the timed steps)."""
    return record_function(PHASE_PREFIX + name) if _state["recording"] else contextlib.nullcontext()


def dump_on_failure(point_dir: Path, rank: int) -> list[dict]:
    """Write this rank's snapshot beside the record when the history was on (an out-of-memory), and
    return its largest live allocations by category (fsdp_core/allocations.py); [] without a snapshot."""
    if not _state["recorded"] or not still_owned():
        return []
    with contextlib.suppress(Exception):  # the reason must still be written when the snapshot cannot be
        # What `_dump_snapshot` writes (a pickle of `_snapshot()`), taken once for the file and the summary.
        snapshot = torch.cuda.memory._snapshot()
        with open(memory_snapshot_file(point_dir, rank), "wb") as handle:
            pickle.dump(snapshot, handle)
        return live_by_category(snapshot, device=torch.cuda.current_device())
    return []


def reset() -> None:
    """The point ended: the next one records its own."""
    stop()
    _state["recorded"] = False
