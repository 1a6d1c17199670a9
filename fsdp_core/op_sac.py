"""selective_op made real: torchtitan's per-op selective activation checkpointing policy.

Each block runs under `torch.utils.checkpoint.create_selective_checkpoint_contexts` with a policy
that, in the block's forward, marks the outputs of the saved op groups (bench/schema/ac_modes.py:
every second matmul starting with the first, attention, functional collectives, max) MUST_SAVE and
everything else PREFER_RECOMPUTE. The matmul count restarts with every block's forward: the
context function runs once per checkpointed call. In torch >= 2.5 the policy is consulted in the
forward only (backward replays the cache by position), so the count needs no recompute branch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from bench.schema.ac_modes import save_ops, saved_matmul
from fsdp_core.ops import present_ops

_MM = torch.ops.aten.mm.default


# Op groups other than `mm` (counted separately): the ops whose outputs are saved, those this torch
# build has (attention kernels differ by version and device; fsdp_core/ops.py).
GROUP_OPS: dict[str, set] = {
    "sdpa": present_ops(
        [
            ("aten", "_scaled_dot_product_flash_attention", "default"),
            ("aten", "_scaled_dot_product_efficient_attention", "default"),
            ("aten", "_scaled_dot_product_cudnn_attention", "default"),
            ("aten", "_scaled_dot_product_flash_attention_for_cpu", "default"),
            ("aten", "_scaled_dot_product_fused_attention_overrideable", "default"),
        ]
    ),
    "collectives": present_ops(
        [
            ("_c10d_functional", "reduce_scatter_tensor", "default"),
            ("_c10d_functional", "all_to_all_single", "default"),
        ]
    ),
    "max": present_ops([("aten", "max", "default")]),
}


def op_sac_policy(groups: Sequence[str] | None = None) -> Callable[[], Callable]:
    """A factory of fresh policies (one per checkpointed forward: the matmul count starts at zero)."""
    chosen = save_ops(groups)
    saved = set().union(*(GROUP_OPS[g] for g in chosen if g != "mm"))

    def fresh_policy() -> Callable:
        matmuls = 0

        def policy(ctx, func, *args, **kwargs) -> CheckpointPolicy:
            nonlocal matmuls
            if func == _MM:
                matmuls += 1
                keep = saved_matmul(matmuls - 1, chosen)
                return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
            return CheckpointPolicy.MUST_SAVE if func in saved else CheckpointPolicy.PREFER_RECOMPUTE

        return policy

    return fresh_policy


def op_sac_context_fn(groups: Sequence[str] | None = None) -> Callable:
    """checkpoint_wrapper's `context_fn` for selective_op."""
    fresh_policy = op_sac_policy(groups)

    def context_fn():
        return create_selective_checkpoint_contexts(fresh_policy())

    return context_fn
