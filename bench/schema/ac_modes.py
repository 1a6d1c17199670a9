"""Activation-checkpointing modes: the one home of their names and of what each one recomputes.

Torch-free, so every layer reads the same facts: the config schema (the allowed names, the
`train.ac_every` and `train.ac_save_ops` rules), the engine (fsdp_core/parallelize.py wraps the
blocks, fsdp_core/op_sac.py turns the op groups into torch ops), FLOPs and HFU (bench/schema/flops.py),
the planner's memory and step model, and the planner's search, which enumerates `AC_MODES`.

| mode            | blocks wrapped                 | what a wrapped block keeps for backward               | recomputed in backward |
|-----------------|--------------------------------|-------------------------------------------------------|------------------------|
| none            | none                           | everything autograd saves                             | nothing |
| full            | every block                    | its input                                             | its forward, less the last matmul (early stop) |
| selective_op    | every block (torchtitan's "selective op") | its input and the outputs of the saved op groups | the other ops |
| selective_layer | every `ac_every`-th block (0, N, 2N, ...) | as `full`, for those blocks                | as `full`, for those blocks |

`selective_op` is torchtitan's per-op selective activation checkpointing
(`torch.utils.checkpoint.create_selective_checkpoint_contexts`): inside every block the outputs of
every second matmul (the first, third, ...), of scaled-dot-product attention, of the functional
collectives and of `max` (fp8 scaling) are saved; everything else is recomputed. Plain `selective`,
as users write it, means this (torchtitan's meaning); records written before the split used
`selective` for every second block, and read back as `selective_layer` with `ac_every` 2
(bench/schema/migrations/ac_split.py).
"""

from __future__ import annotations

from collections.abc import Sequence

NONE, FULL, SELECTIVE_OP, SELECTIVE_LAYER = "none", "full", "selective_op", "selective_layer"
AC_MODES: tuple[str, ...] = (NONE, FULL, SELECTIVE_OP, SELECTIVE_LAYER)
SUMMARIES = {
    NONE: "no activation checkpointing",
    FULL: "every block recomputed in backward",
    SELECTIVE_OP: "per op in every block (torchtitan's selective op): matmuls (every second), attention saved",
    SELECTIVE_LAYER: "every ac_every-th block recomputed in backward",
}

# What a user's plain `selective` means: torchtitan's per-op policy (what users compare with).
USER_ALIASES = {"selective": SELECTIVE_OP}
ALIAS_NOTE = (
    "note: train.activation_checkpointing=selective means selective_op (torchtitan's per-op policy); "
    "every second block is selective_layer (train.ac_every=2)"
)
# What `selective` meant in records written before the split: every second block.
LEGACY_SELECTIVE = "selective"
DEFAULT_AC_EVERY = 2

# selective_op's policy, by op group (fsdp_core/op_sac.py maps each group to torch ops). `mm`
# saves every MM_SAVE_EVERY-th matmul output of a block's forward, starting with the first, and
# recomputes the others (torchtitan: "saves output of all compute ops, except every second mm").
SAVE_OP_GROUPS = {
    "mm": "every second matmul output (aten.mm), the first one saved",
    "sdpa": "scaled-dot-product attention outputs (flash, efficient, cuDNN, CPU flash kernels)",
    "collectives": "functional collectives' outputs (reduce-scatter, all-to-all: tensor parallelism)",
    "max": "max reductions (the amax of fp8 scaling)",
}
DEFAULT_SAVE_OPS: tuple[str, ...] = tuple(SAVE_OP_GROUPS)
MM_SAVE_EVERY = 2


def resolve_user_mode(mode: str) -> str:
    """A mode as a user wrote it (aliases resolved); unknown names pass through for the schema to refuse."""
    return USER_ALIASES.get(mode, mode)


def unknown_save_ops(groups: Sequence[str]) -> list[str]:
    return [g for g in groups if g not in SAVE_OP_GROUPS]


def save_ops(groups: Sequence[str] | None) -> tuple[str, ...]:
    """The op groups selective_op saves (None: torchtitan's, all of them)."""
    return DEFAULT_SAVE_OPS if groups is None else tuple(groups)


def checkpointed_indices(n_layers: int, mode: str, every: int = DEFAULT_AC_EVERY) -> range:
    """Indices of the blocks the engine wraps in checkpoint_wrapper under `mode`."""
    if mode in (FULL, SELECTIVE_OP):
        return range(n_layers)
    if mode == SELECTIVE_LAYER:
        return range(0, n_layers, every)
    return range(0)


def whole_block_recompute(mode: str) -> bool:
    """Whether a wrapped block recomputes its whole forward (full, selective_layer) or per op."""
    return mode in (FULL, SELECTIVE_LAYER)


def saved_matmul(index: int, groups: Sequence[str] | None = None) -> bool:
    """Whether selective_op saves the output of a block's `index`-th matmul (0-based, forward order)."""
    return "mm" in save_ops(groups) and index % MM_SAVE_EVERY == 0


def recomputed_matmuls(matmuls: Sequence[tuple[int, int]], groups: Sequence[str] | None = None) -> list[int]:
    """Indices of the block's matmuls (out, in) selective_op recomputes in backward.

    The last matmul of a block (the MLP's down projection) is never recomputed, whatever the
    policy: nothing saved for backward depends on its output, and non-reentrant checkpoint
    stops recomputing once the last saved tensor is rebuilt (early stop).
    """
    last = len(matmuls) - 1
    return [i for i in range(len(matmuls)) if i != last and not saved_matmul(i, groups)]
