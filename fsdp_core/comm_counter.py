"""Count the bytes every collective actually moves, by intercepting c10d ops at dispatch.

FSDP2 issues its all-gathers and reduce-scatters through `torch.ops.c10d.*`; a
TorchDispatchMode sees each one with its real tensors, so the count reflects what ran
(dtype, padding, hybrid meshes), not an estimate. The mode is inherited by autograd's
backward threads, so backward collectives are counted too.

Convention, per rank: an all-gather counts its output (the unsharded bytes), a
reduce-scatter its input (the unsharded gradient bytes), an all-reduce its tensor.
Collectives on a group of one rank move nothing and are not counted.
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

c10d = torch.ops.c10d
KINDS = ("all_gather", "reduce_scatter", "all_reduce")


def _nbytes(tensors: object) -> int:
    if isinstance(tensors, torch.Tensor):
        return tensors.numel() * tensors.element_size()
    if isinstance(tensors, (list, tuple)):
        return sum(_nbytes(t) for t in tensors)
    return 0


def _group_size(args: tuple) -> int:
    """Size of the process group among the op's arguments (it arrives boxed as a ScriptObject)."""
    for arg in args:
        if isinstance(arg, torch.ScriptObject):
            try:
                return int(dist.ProcessGroup.unbox(arg).size())
            except (RuntimeError, TypeError):  # a ReduceOp or another boxed object, not a group
                continue
    return 0


# op -> (kind, index of the argument whose bytes count)
_COUNTED_OPS = {
    c10d._allgather_base_.default: ("all_gather", 0),
    c10d.allgather_.default: ("all_gather", 0),
    c10d.allgather_into_tensor_coalesced_.default: ("all_gather", 0),
    c10d._reduce_scatter_base_.default: ("reduce_scatter", 1),
    c10d.reduce_scatter_.default: ("reduce_scatter", 1),
    c10d.reduce_scatter_tensor_coalesced_.default: ("reduce_scatter", 1),
    c10d.allreduce_.default: ("all_reduce", 0),
    c10d.allreduce_coalesced_.default: ("all_reduce", 0),
}


class CommCounter(TorchDispatchMode):
    """Context manager accumulating bytes and call counts per collective kind."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        counted = _COUNTED_OPS.get(func)
        if counted is not None and _group_size(args) > 1:
            kind, index = counted
            self.bytes[kind] += _nbytes(args[index])
            self.calls[kind] += 1
        return func(*args, **kwargs)

    def reset(self) -> None:
        self.bytes.clear()
        self.calls.clear()

    def snapshot(self) -> dict[str, int]:
        return {kind: int(self.bytes.get(kind, 0)) for kind in KINDS}
