"""Checkpoint bytes and time of one workload: what a DCP save of the sharded state writes, and how long.

Bytes are exact (tests/distributed checks them against DCP's own metadata): the fp32 master
parameters and AdamW's two fp32 moments, each parameter once however many replicas hold it (DCP
writes a replicated shard once), plus AdamW's fp32 `step` scalar per parameter tensor. Only the
tensor payload is counted: torch.save's framing of each item and DCP's `.metadata` add a few hundred
bytes per tensor on top.

Time: the cluster's `storage_gbps` (Gbit/s, the aggregate bandwidth of the checkpoint storage the
nodes share) for writing and reading the payload. A sync save blocks training for the whole write;
an async save blocks while the state is staged into host memory (per rank: its share over the
device's host link, `host_link_gbps` in GB/s; unknown on CPU) and while the previous save, if still
writing after `checkpoint_every` steps, finishes.
"""

from __future__ import annotations

from typing import Any

from bench.analysis.planner.memory import ADAM_STATES, FP32
from bench.analysis.planner.workload import Workload

# AdamW's per-parameter step count: a 0-dim fp32 tensor (torch.optim.AdamW, not capturable).
STEP_SCALAR_BYTES = 4


def parameter_tensors(w: Workload) -> int:
    return w.shape.n_layers * len(w.shape.block_shapes) + len(w.shape.root_shapes)


def checkpoint_state_bytes(w: Workload) -> int:
    """Tensor bytes of one save of model + AdamW state, all ranks together (exact)."""
    return (1 + ADAM_STATES) * FP32 * w.shape.params + STEP_SCALAR_BYTES * parameter_tensors(w)


def storage_bytes_per_s(w: Workload) -> float:
    return w.cluster.storage_gbps * 1e9 / 8


def predict_checkpoint(w: Workload, step_time_s: float, mode: str = "none", every: int | None = None) -> dict[str, Any]:
    """Bytes, write and read time of a save, and (with a mode and interval) blocked time and goodput."""
    state = checkpoint_state_bytes(w)
    write_s = state / storage_bytes_per_s(w)
    out: dict[str, Any] = {
        "state_bytes": state,
        "state_bytes_per_rank": state / w.world_size,
        "write_s": write_s,
        "read_s": write_s,
        "storage_gbps": w.cluster.storage_gbps,
        "blocked_s": None,
        "goodput": None,
    }
    if mode == "none" or not every:
        return out
    between = every * step_time_s  # training time between two saves
    if mode == "sync":
        blocked = write_s
    else:
        host_link = w.cluster.device.host_link_gbps if w.cluster.device_type == "cuda" else None
        if host_link is None:
            return out
        blocked = state / w.world_size / (host_link * 1e9) + max(0.0, write_s - between)
    out["blocked_s"] = blocked
    out["goodput"] = between / (between + blocked)
    return out
