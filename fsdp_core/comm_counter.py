"""Count the bytes every collective actually moves, by intercepting collective ops at dispatch.

FSDP2 issues its all-gathers and reduce-scatters through `torch.ops.c10d.*`; DTensor (its
redistributions, the fp16 scaler's found-inf check on sharded gradients) and torchao's fp8
amax reductions use the functional collectives `torch.ops._c10d_functional.*`. A
TorchDispatchMode sees each one with its real tensors, so the count reflects what ran
(dtype, padding, hybrid meshes), not an estimate. The mode is inherited by autograd's
backward threads, so backward collectives are counted too.

Convention, per rank: an all-gather counts its output (the unsharded bytes), a
reduce-scatter its input (the unsharded gradient bytes), an all-reduce its tensor.
Collectives on a group of one rank move nothing and are not counted. Broadcasts,
all-to-alls and point-to-point ops are not counted.

Group sizes: a c10d op carries its process group, a functional all-gather or reduce-scatter its
group's size. A functional all-reduce names its group only, and torch has no public lookup from a
name to a group: the counter knows the default group's and those of every DeviceMesh it has seen
(the model's parameters given to it, and the meshes of the DTensors whose ops it lets desugar; DTensor
names its collectives' groups by their mesh). An all-reduce on a group it was never shown is taken
for a group of one rank and not counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from torch.fx.operator_schemas import get_signature_for_torch_op
from torch.utils._python_dispatch import TorchDispatchMode  # on the allow-list: no public alias

from fsdp_core.ops import op_table

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


# op -> (kind, index of the argument whose bytes count). Looked up tolerantly (fsdp_core/ops.py): an
# op this torch lacks is left out of the count (MISSING_OPS names it) instead of failing the import.
COUNTED_OPS, _MISSING_C10D = op_table(
    {
        ("c10d", "_allgather_base_", "default"): ("all_gather", 0),
        ("c10d", "allgather_", "default"): ("all_gather", 0),
        ("c10d", "allgather_into_tensor_coalesced_", "default"): ("all_gather", 0),
        ("c10d", "_reduce_scatter_base_", "default"): ("reduce_scatter", 1),
        ("c10d", "reduce_scatter_", "default"): ("reduce_scatter", 1),
        ("c10d", "reduce_scatter_tensor_coalesced_", "default"): ("reduce_scatter", 1),
        ("c10d", "allreduce_", "default"): ("all_reduce", 0),
        ("c10d", "allreduce_coalesced_", "default"): ("all_reduce", 0),
    }
)


# Functional collectives: op -> (kind, name of the tensor (list) argument, whether the bytes moved
# are that argument's bytes times the group size). All-gathers take their input (the output is
# returned, or is the out= buffer), so their output bytes are input x group_size. All of these
# exist in torch 2.11 and 2.13 (DTensor and torchao call the functional ones; the group argument
# is a str in 2.11 and Any in 2.13: CommCounter.group_size takes both). wait_tensor moves nothing:
# not counted.
FUNCTIONAL_OPS, _MISSING_FUNCTIONAL = op_table(
    {
        ("_c10d_functional", "all_gather_into_tensor", "default"): ("all_gather", "input", True),
        ("_c10d_functional", "all_gather_into_tensor_out", "default"): ("all_gather", "input", True),
        ("_c10d_functional", "all_gather_into_tensor_coalesced", "default"): ("all_gather", "inputs", True),
        ("_c10d_functional", "reduce_scatter_tensor", "default"): ("reduce_scatter", "input", False),
        ("_c10d_functional", "reduce_scatter_tensor_out", "default"): ("reduce_scatter", "input", False),
        ("_c10d_functional", "reduce_scatter_tensor_coalesced", "default"): ("reduce_scatter", "inputs", False),
        ("_c10d_functional", "all_reduce", "default"): ("all_reduce", "input", False),
        ("_c10d_functional", "all_reduce_", "default"): ("all_reduce", "input", False),
        ("_c10d_functional", "all_reduce_coalesced", "default"): ("all_reduce", "inputs", False),
        ("_c10d_functional", "all_reduce_coalesced_", "default"): ("all_reduce", "inputs", False),
    }
)
# `ns.op.overload` of every counted op this torch build lacks (its collectives would go uncounted).
MISSING_OPS = (*_MISSING_C10D, *_MISSING_FUNCTIONAL)


# Functional op -> its arguments' positions by name (keyword-only ones after the positional ones),
# from the op's own signature.
_POSITIONS = {op: {name: i for i, name in enumerate(get_signature_for_torch_op(op)[0].parameters)}
              for op in FUNCTIONAL_OPS}  # fmt: skip


def _argument(func, args: tuple, kwargs: dict, name: str) -> object:
    """A functional op's argument by its schema name, passed positionally or by keyword."""
    index = _POSITIONS[func][name]
    return args[index] if index < len(args) else kwargs.get(name)


def _meshes(values: Iterable) -> Iterable:
    """The DeviceMesh of every DTensor among `values` (nested in lists, tuples and dicts too)."""
    for value in values:
        if isinstance(value, DTensor):
            yield value.device_mesh
        elif isinstance(value, (list, tuple)):
            yield from _meshes(value)
        elif isinstance(value, dict):
            yield from _meshes(value.values())


class CommCounter(TorchDispatchMode):
    """Context manager accumulating bytes and call counts per collective kind; `known`: tensors whose
    DTensor meshes name the groups the functional all-reduces will use (the model's parameters)."""

    def __init__(self, known: Iterable = ()) -> None:
        super().__init__()
        self.bytes: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self._group_sizes: dict[str, int] = {}  # group name -> ranks, for the groups named by a str
        self._meshes: set = set()
        self.learn_groups(known)

    def learn_groups(self, values: Iterable) -> None:
        """Remember the name and size of every group of the DTensors' meshes among `values`."""
        for mesh in _meshes(values):
            if mesh not in self._meshes:
                self._meshes.add(mesh)
                self._group_sizes.update({group.group_name: group.size() for group in mesh.get_all_groups()})

    def group_size(self, func, args: tuple, kwargs: dict) -> int:
        """Ranks in a functional collective's group: its group_size argument where it has one, else
        its group, given by name (a group the counter knows; 0 for one it was never shown) or itself."""
        if "group_size" in _POSITIONS[func]:
            return int(_argument(func, args, kwargs, "group_size"))
        group = _argument(func, args, kwargs, "group_name")
        if isinstance(group, str):
            world = dist.group.WORLD
            if world is not None and group == world.group_name:
                return int(world.size())
            return self._group_sizes.get(group, 0)
        if isinstance(group, torch.ScriptObject):
            return int(dist.ProcessGroup.unbox(group).size())
        if isinstance(group, dist.ProcessGroup):
            return int(group.size())
        return 0

    def functional_bytes(self, func, args: tuple, kwargs: dict) -> tuple[str, int] | None:
        """(kind, bytes) of a functional collective on more than one rank; None otherwise."""
        counted = FUNCTIONAL_OPS.get(func)
        if counted is None:
            return None
        kind, tensors, times_group = counted
        size = self.group_size(func, args, kwargs)
        if size <= 1:
            return None
        nbytes = _nbytes(_argument(func, args, kwargs, tensors))
        return kind, nbytes * size if times_group else nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(issubclass(t, DTensor) for t in types):
            # Modes run before tensor subclasses, and while this method runs the mode is off the
            # stack: the collectives a DTensor op issues inside its own dispatch (a Partial ->
            # Replicate all-reduce, the fp16 scaler's found-inf reduction) would never reach it.
            # NotImplemented lets DTensor desugar first, with this mode active, so its collectives
            # come back here on plain local tensors (CommDebugMode does the same), naming the groups
            # of the mesh learnt here. Only DTensor: other subclasses may not handle an op without
            # their own mode (the FakeTensors of DTensor's sharding propagation return NotImplemented
            # too, and the op would fail). Collectives are never counted at the DTensor level, so
            # nothing counts twice.
            self.learn_groups((args, kwargs))
            return NotImplemented
        counted = COUNTED_OPS.get(func)
        if counted is not None:
            if _group_size(args) > 1:
                kind, index = counted
                self.bytes[kind] += _nbytes(args[index])
                self.calls[kind] += 1
        else:
            functional = self.functional_bytes(func, args, kwargs)
            if functional is not None:
                # Counted, not double-counted: a functional op reaches the process group
                # through c10d ops, but those run inside func(), where this mode is off the
                # stack, so they never come back here.
                kind, nbytes = functional
                self.bytes[kind] += nbytes
                self.calls[kind] += 1
        return func(*args, **kwargs)

    def reset(self) -> None:
        self.bytes.clear()
        self.calls.clear()

    def snapshot(self) -> dict[str, int]:
        return {kind: int(self.bytes.get(kind, 0)) for kind in KINDS}
