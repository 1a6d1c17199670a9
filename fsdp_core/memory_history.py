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

from bench.schema.files import atomic_path
from bench.schema.protocol import memory_snapshot_file
from bench.schema.spec import ProfileSpec
from fsdp_core.allocations import live_by_category
from fsdp_core.lifeline import still_owned
from fsdp_core.step_split import RANGE_PREFIX

_state: dict = {"recording": False, "recorded": False, "summary": None}  # this process: one point at a time


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
    return record_function(RANGE_PREFIX + name) if _state["recording"] else contextlib.nullcontext()


def dump_on_failure(point_dir: Path, rank: int) -> list[dict]:
    """Write this rank's snapshot beside the record when the history was on (an out-of-memory), and
    return its largest live allocations by category (fsdp_core/allocations.py); [] without a snapshot.
    Taken once per failure, where it happened (before the point's cleanup frees the allocator's cache):
    a later call returns the same summary."""
    if _state["summary"] is not None:
        return _state["summary"]
    if not _state["recorded"] or not still_owned():
        return []
    with contextlib.suppress(Exception):  # the reason must still be written when the snapshot cannot be
        # What `_dump_snapshot` writes (a pickle of `_snapshot()`), taken once for the file and the summary.
        snapshot = torch.cuda.memory._snapshot()
        _state["summary"] = live_by_category(snapshot, device=torch.cuda.current_device())
        with atomic_path(memory_snapshot_file(point_dir, rank)) as partial, open(partial, "wb") as handle:
            pickle.dump(snapshot, handle)
    return _state["summary"] or []


def reset() -> None:
    """The point ended: the next one records its own."""
    stop()
    _state.update(recorded=False, summary=None)
