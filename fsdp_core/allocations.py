"""What filled a device's memory at an out-of-memory: the live allocations of the CUDA allocator's
snapshot, summed by category (torch-free, so it is tested on snapshots written by hand).

A snapshot (`torch.cuda.memory._snapshot()`, the dict `_dump_snapshot` pickles) lists the allocator's
segments, each with its blocks; a block in state `active_allocated` is live, and with the history on
(profile.memory_history, `stacks="python"`) it carries the Python frames that allocated it. The
category is read from those frames, the first rule that matches winning: the optimizer's state, FSDP's
all-gather (unsharded parameters) and reduce-scatter (gradients) buffers, parameter and buffer set-up,
autograd's backward (gradients and backward temporaries), the model's forward (activations). A block
with no frames says so: allocated while the history was off (the timed window), or from a thread
with no Python stack.
"""

from __future__ import annotations

from collections.abc import Iterable

LIVE = "active_allocated"
# A block without Python frames: allocated while the history was off (the timed window), or from a
# thread with no Python stack (autograd's device threads run backward's kernels' allocations on CUDA).
NOT_RECORDED = "no Python frames (allocated while the history was off, or by autograd's backward thread)"
OTHER = "other"

# (category, substrings of a frame's "filename:name" any of which places the block there), in order.
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("optimizer state", ("torch/optim/",)),
    ("unsharded parameters (FSDP all-gather)", ("all_gather", "_fsdp_param.py:alloc_all_gather_outputs")),
    ("gradients (FSDP reduce-scatter)", ("reduce_scatter", "foreach_reduce")),
    # Before forward's rule: the model's own file also builds its parameters and RoPE tables.
    (
        "parameters and buffers (set-up)",
        (
            ":fully_shard",
            "parallelize.py:materialize",
            "parallelize.py:parallelize_llama",
            ":init_",
            ":rope_tables",
            ":to_empty",
            ":reset_parameters",
        ),
    ),
    ("gradients and backward temporaries", ("torch/autograd/", ":backward", "_backward")),
    ("activations (forward)", (":forward", "torch/nn/functional.py")),
)


def category_of(frames: Iterable[dict]) -> str:
    """The category of a block allocated from these frames (innermost first, as the snapshot lists them)."""
    keys = [f"{frame.get('filename', '')}:{frame.get('name', '')}" for frame in frames]
    if not keys:
        return NOT_RECORDED
    for category, needles in RULES:
        if any(needle in key for key in keys for needle in needles):
            return category
    return OTHER


def live_by_category(snapshot: dict, device: int | None = None, top: int = 4) -> list[dict]:
    """The `top` categories by live bytes, largest first: {"category", "bytes", "blocks", "largest"
    (the largest block's bytes), "where" (its innermost frame, "file:line name", or "")}."""
    totals: dict[str, dict] = {}
    for segment in snapshot.get("segments", []):
        if device is not None and segment.get("device") != device:
            continue
        for block in segment.get("blocks", []):
            if block.get("state") != LIVE:
                continue
            frames = block.get("frames") or []
            size = int(block.get("size", 0))
            entry = totals.setdefault(category_of(frames), {"bytes": 0, "blocks": 0, "largest": 0, "where": ""})
            entry["bytes"] += size
            entry["blocks"] += 1
            if size > entry["largest"]:
                entry["largest"] = size
                entry["where"] = _where(frames)
    ranked = sorted(totals.items(), key=lambda item: -item[1]["bytes"])[:top]
    return [{"category": category, **entry} for category, entry in ranked]


def _where(frames: list[dict]) -> str:
    """The innermost frame outside torch's own files (the caller a person recognises), else the innermost."""
    if not frames:
        return ""
    ours = next((f for f in frames if "/torch/" not in f.get("filename", "")), frames[0])
    return f"{ours.get('filename', '?')}:{ours.get('line', '?')} {ours.get('name', '?')}"
