"""FLOPs per token (the one formula MFU, HFU and the planner share). Torch-free.

Model FLOPs per token = 6·N + 12·L·d·s (torchtitan's and llm-foundry's convention):
- 6·N: every parameter does one multiply-add (2 FLOPs) per token forward and two in
  backward (input and weight gradients). N excludes the input embedding, a lookup with no
  matmul; it includes the output projection, which is a matmul on every token.
- 12·L·d·s: attention scores and the weighted sum of values, 2·2·s·d per token and layer
  forward (counted over the full s×s matrix, causal mask or not), tripled for backward.
Norms, rotary embeddings, activations and softmax are left out (a few percent at most).

HFU adds what activation checkpointing recomputes (the modes: bench/schema/ac_modes.py):
- `full` and `selective_layer`: one more forward of each checkpointed block, less its last
  matmul: 2·(N_block - d·ffn_dim) + 4·d·s per token and block. torch's non-reentrant checkpoint
  (the engine's checkpoint_wrapper) stops recomputing as soon as the last tensor saved for
  backward is rebuilt ("early stop", on by default), so the MLP's down projection (d x ffn_dim),
  whose output nothing saves, is never recomputed.
- `selective_op`: in every block, only the matmuls the policy does not save (with torchtitan's
  policy wk, wo and w3: 2·(d·kv_dim + d·d + d·ffn_dim) per token and block), plus attention's
  4·d·s when its outputs are not saved.
FlopCounterMode on a checkpointed `debug` model confirms each (tests/unit/test_flops.py).

The functions read a model's dimensions and parameter counts: a ModelSpec, or the planner's
ModelShape (bench/analysis/planner/shapes.py), which has the same attributes for shapes the engine
cannot train.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.schema.ac_modes import (
    DEFAULT_AC_EVERY,
    FULL,
    checkpointed_indices,
    recomputed_matmuls,
    save_ops,
    whole_block_recompute,
)
from bench.schema.model import ModelSpec


def flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Model FLOPs per trained token, forward plus backward, on the full (unsharded) model."""
    return 6.0 * model.non_embedding_params + 12.0 * model.n_layers * model.dim * seq_len


def checkpointed_blocks(model: ModelSpec, mode: str, every: int = DEFAULT_AC_EVERY) -> int:
    """How many transformer blocks recompute (part of) their forward in backward."""
    return len(checkpointed_indices(model.n_layers, mode, every))


def recompute_flops_per_token(
    model: ModelSpec, seq_len: int, mode: str = FULL, ac_save_ops: Sequence[str] | None = None
) -> float:
    """FLOPs one checkpointed block recomputes per token under `mode`."""
    attention = 4.0 * model.dim * seq_len
    if whole_block_recompute(mode):
        return 2.0 * (model.block_params - model.dim * model.ffn_dim) + attention
    matmuls = model.block_matmuls
    recomputed = sum(2.0 * matmuls[i][0] * matmuls[i][1] for i in recomputed_matmuls(matmuls, ac_save_ops))
    return recomputed + (0.0 if "sdpa" in save_ops(ac_save_ops) else attention)


def hardware_flops_per_token(
    model: ModelSpec,
    seq_len: int,
    activation_checkpointing: str,
    ac_every: int = DEFAULT_AC_EVERY,
    ac_save_ops: Sequence[str] | None = None,
) -> float:
    """FLOPs the hardware executes per token, recomputation included (the HFU numerator)."""
    blocks = checkpointed_blocks(model, activation_checkpointing, ac_every)
    if not blocks:
        return flops_per_token(model, seq_len)
    per_block = recompute_flops_per_token(model, seq_len, activation_checkpointing, ac_save_ops)
    return flops_per_token(model, seq_len) + blocks * per_block
