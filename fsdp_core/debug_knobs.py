"""The slow-down knobs that act inside a step (debug.comm_delay_ms, debug.extra_matmuls), set on the
parallelised model: each moves one part of the profiled split (fsdp_core/step_split.py) on purpose.

- `comm_delay_ms`: the last rank enters each FSDP all-gather and reduce-scatter that late. A late
  *peer* is what shows as communication: the other ranks wait inside the collective, while the late
  rank's own delay is idle time in FSDP's ranges (had every rank slept, no rank would wait inside a
  collective). Through FSDP2's custom-collective hooks (`FSDPModule.set_custom_all_gather` /
  `set_custom_reduce_scatter`), subclassing its default collectives, which live in a private module
  (on tests/unit/test_private_access.py's allow-list with the reason): looked up tolerantly, so a torch
  without them refuses the knob in one line instead of failing the import.
- `extra_matmuls`: N matmuls of the block's shape (tokens x dim by dim x dim) in each block's forward,
  from a forward pre-hook that runs after FSDP's own (outside its ranges): more compute, no more
  communication.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

from bench.schema.spec import DebugKnobs

try:  # private by its path (see the module docstring); absent from some torch builds
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter
except ImportError:
    DefaultAllGather = DefaultReduceScatter = None


def comm_delay_available() -> bool:
    return DefaultAllGather is not None and DefaultReduceScatter is not None


def _late(base: type, seconds: float):
    """An instance of FSDP's default collective `base` that sleeps `seconds` before each call."""

    class Late(base):
        def __call__(self, *args, **kwargs):
            time.sleep(seconds)
            return super().__call__(*args, **kwargs)

    return Late()


def apply_comm_delay(model: torch.nn.Module, delay_ms: float) -> None:
    """Make the last rank enter every FSDP all-gather and reduce-scatter `delay_ms` late."""
    if delay_ms <= 0 or dist.get_rank() != dist.get_world_size() - 1:
        return
    if not comm_delay_available():
        raise RuntimeError(
            "debug.comm_delay_ms: this torch has no FSDP2 default collectives to delay "
            "(torch.distributed.fsdp._fully_shard._fsdp_collectives); allowed: 0"
        )
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_custom_all_gather(_late(DefaultAllGather, delay_ms / 1000.0))
            module.set_custom_reduce_scatter(_late(DefaultReduceScatter, delay_ms / 1000.0))


def apply_extra_matmuls(blocks: list[torch.nn.Module], count: int, dim: int) -> None:
    """`count` extra matmuls of the block's shape in each block's forward (after FSDP's pre-forward)."""
    if count <= 0:
        return
    weights: dict[tuple, torch.Tensor] = {}

    def extra(module, args) -> None:
        hidden = args[0].detach()
        key = (hidden.device, hidden.dtype)
        if key not in weights:
            weights[key] = torch.full((dim, dim), 1.0 / dim, device=hidden.device, dtype=hidden.dtype)
        with torch.no_grad():
            for _ in range(count):
                torch.matmul(hidden, weights[key])

    for block in blocks:
        block.register_forward_pre_hook(extra)


def apply_debug_knobs(model, debug: DebugKnobs) -> None:
    """The in-step slow-down knobs on a parallelised Transformer."""
    apply_comm_delay(model, debug.comm_delay_ms)
    apply_extra_matmuls(list(model.layers.values()), debug.extra_matmuls, model.args.dim)
