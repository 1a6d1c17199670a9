"""FLOPs per token (the one formula MFU, HFU and the planner share). Torch-free.

Model FLOPs per token = 6·N + 12·L·d·s (torchtitan's and llm-foundry's convention):
- 6·N: every parameter does one multiply-add (2 FLOPs) per token forward and two in
  backward (input and weight gradients). N excludes the input embedding, a lookup with no
  matmul; it includes the output projection, which is a matmul on every token.
- 12·L·d·s: attention scores and the weighted sum of values, 2·2·s·d per token and layer
  forward (counted over the full s×s matrix, causal mask or not), tripled for backward.
Norms, rotary embeddings, activations and softmax are left out (a few percent at most).

HFU adds what activation checkpointing recomputes: one more forward of each checkpointed
block, less its last matmul: 2·(N_block - d·ffn_dim) + 4·d·s per token and block. torch's
non-reentrant checkpoint (the engine's checkpoint_wrapper) stops recomputing as soon as the
last tensor saved for backward is rebuilt ("early stop", on by default), so the MLP's down
projection (d x ffn_dim), whose output nothing saves, is never recomputed. FlopCounterMode
on a checkpointed `debug` model confirms it (tests/unit/test_flops.py).
"""

from __future__ import annotations

from fsdp_core.model_args import ModelArgs

# Blocks checkpointed under each activation-checkpointing mode: "selective" checkpoints every
# second block (torchtitan's layer-wise selective AC with frequency 2).
SELECTIVE_AC_EVERY = 2


def flops_per_token(args: ModelArgs, seq_len: int) -> float:
    """Model FLOPs per trained token, forward plus backward, on the full (unsharded) model."""
    return 6.0 * args.non_embedding_params + 12.0 * args.n_layers * args.dim * seq_len


def checkpointed_blocks(args: ModelArgs, mode: str) -> int:
    """How many transformer blocks recompute their forward in backward."""
    if mode == "full":
        return args.n_layers
    if mode == "selective":
        return len(range(0, args.n_layers, SELECTIVE_AC_EVERY))
    return 0


def recompute_flops_per_token(args: ModelArgs, seq_len: int) -> float:
    """FLOPs one checkpointed block recomputes per token: its forward without the final down projection."""
    return 2.0 * (args.block_params - args.dim * args.ffn_dim) + 4.0 * args.dim * seq_len


def hardware_flops_per_token(args: ModelArgs, seq_len: int, activation_checkpointing: str) -> float:
    """FLOPs the hardware executes per token, recomputation included (the HFU numerator)."""
    recompute = checkpointed_blocks(args, activation_checkpointing) * recompute_flops_per_token(args, seq_len)
    return flops_per_token(args, seq_len) + recompute
