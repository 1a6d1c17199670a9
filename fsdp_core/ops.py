"""Operator lookup that tolerates a torch build without some op.

The engine names ops by (namespace, op, overload), e.g. ("_c10d_functional",
"reduce_scatter_tensor_out", "default"). `torch.ops.<ns>.<op>` raises AttributeError for an op
the build does not register, and the op tables are built when their module is imported: one op
missing from the GPU image's torch would make the worker fail to import, and every point fail.
So each lookup here returns None for a missing op, and the callers keep what exists (and can say
what does not: the GPU check prints it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

OpName = tuple[str, str, str]  # (namespace, op, overload)


def present_op(namespace: str, op: str, overload: str = "default") -> Callable | None:
    """The op's overload in this torch build, or None where the namespace, op or overload is absent."""
    packet = getattr(getattr(torch.ops, namespace, None), op, None)
    return getattr(packet, overload, None) if packet is not None else None


def present_ops(names: Iterable[OpName]) -> set:
    """The ops among `names` that this torch build has (kernels differ by version and build)."""
    return {found for name in names if (found := present_op(*name)) is not None}


def op_table(table: dict[OpName, object]) -> tuple[dict, list[str]]:
    """(op overload -> value for every op of `table` this build has, `ns.op.overload` of the missing ones)."""
    found, missing = {}, []
    for name, value in table.items():
        op = present_op(*name)
        if op is None:
            missing.append(".".join(name))
        else:
            found[op] = value
    return found, missing
