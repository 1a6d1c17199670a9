"""Activation and logits memory of one micro-batch, under each activation-checkpointing mode.

Two quantities, both in bytes per device:
- **saved** (`saved_bytes`): what is held for backward when the forward ends: the tensors autograd
  saves, the inputs checkpoint keeps for each wrapped block, the outputs selective_op's policy
  caches, and the logits the training loop holds. tests/unit/test_activation_memory.py counts
  these on CPU (saved_tensors_hooks, deduplicated by storage, plus the selective-op caches) for
  every flavor, mode, precision and a grid of shapes, and requires agreement within 5% (it is
  exact for the engine's model).
- **transients** that live only during backward: the two fp32 gradients of cross-entropy
  (`loss_gradient_bytes`, at the loss's backward) and the saved set of the one block being
  recomputed (`recompute_bytes`, checkpointed modes, at the blocks' backward). bench/analysis/planner/memory.py
  combines them into the moments the peak can sit at.

Per token, with b the compute dtype's bytes, F = 4 (fp32), h the model width, q = n_heads x
head_dim, kv the key/value width, f the MLP width and H the number of heads, one block of the
engine's model (fsdp_core/model.py) saves, without checkpointing:
- each of its two RMSNorms: the fp32 input (F·h: a copy under bf16/fp16, the input itself under
  fp32), the fp32 reciprocal root mean square (F), the normalised tensor in the compute dtype
  (b·h) and the weighted output, the next matmul's input (b·h);
- attention: q and k after RoPE, v (b·(q + 2·kv)), SDPA's output (b·q; the out-projection reads
  it through a view) and its fp32 log-sum-exp (F·H). RoPE's fp32 work keeps nothing: its
  multiplications save only the rotary table, a buffer;
- the SwiGLU MLP: w1's output, SiLU's output, w3's output and their product (4·b·f).
A checkpointed block keeps its input (b·h); under selective_op also the outputs its policy saves
(bench/schema/ac_modes.py: matmuls in positions 1, 3, 5, 7 of wq, wk, wv, wo, w1, w3, w2, and
attention's output and log-sum-exp). The root keeps the token ids and targets (int64), the final
norm as above and cross-entropy's fp32 log-softmax (F·vocab); the logits themselves are not kept
(the training loop does not hold them through backward, as torchtitan's does not).

MPT shapes (the calibration-only llm-foundry models, `engine_layout=False`) keep Korthikanti et
al.'s count (arXiv:2205.05198) for SDPA/flash attention and no dropout.
"""

from __future__ import annotations

from bench.analysis.planner.shapes import ModelShape
from bench.analysis.planner.workload import Workload
from bench.schema.ac_modes import SELECTIVE_OP, checkpointed_indices, save_ops, saved_matmul, whole_block_recompute

FP32 = 4
INT64 = 8


def norm_bytes(h: int, b: int) -> int:
    """One RMSNorm of the engine's model: fp32 input, fp32 rsqrt, normalised and weighted outputs."""
    return FP32 * h + FP32 + 2 * b * h


def block_bytes(s: ModelShape, b: int) -> int:
    """Bytes per token one block saves without checkpointing."""
    q, kv, f = s.n_heads * (s.dim // s.n_heads), s.kv_dim, s.ffn_dim
    if not s.engine_layout:
        mlp = s.dim + (4 * f if s.gated_mlp else 2 * f)
        return b * (2 * s.dim + 3 * s.dim + 2 * kv + mlp)
    attention = b * (2 * q + 2 * kv) + FP32 * s.n_heads
    return 2 * norm_bytes(s.dim, b) + attention + 4 * b * f


def held_bytes(w: Workload) -> int:
    """Bytes per token a checkpointed block keeps under the workload's mode."""
    s, b = w.shape, w.activation_bytes
    held = b * s.dim  # the block's input, kept by checkpoint
    if w.activation_checkpointing == SELECTIVE_OP:
        groups = save_ops(w.ac_save_ops)
        held += sum(b * out for i, (out, _) in enumerate(s.block_matmuls) if saved_matmul(i, groups))
        if "sdpa" in groups:
            held += b * s.n_heads * (s.dim // s.n_heads) + FP32 * s.n_heads
    return held


def root_bytes(s: ModelShape, b: int) -> int:
    """Bytes per token the root and the loss keep: ids and targets, final norm, fp32 log-softmax."""
    norm = norm_bytes(s.dim, b) if s.engine_layout else b * s.dim
    return 2 * INT64 + norm + FP32 * s.vocab_size


def saved_bytes(w: Workload) -> dict[str, int]:
    """Held for backward when the forward ends (see the module docstring): blocks and root."""
    tokens, b = w.tokens_per_micro_step, w.activation_bytes
    wrapped = len(checkpointed_indices(w.shape.n_layers, w.activation_checkpointing, w.ac_every))
    per_token = (w.shape.n_layers - wrapped) * block_bytes(w.shape, b) + wrapped * held_bytes(w)
    return {"activations": tokens * per_token, "logits": tokens * root_bytes(w.shape, b)}


def recompute_bytes(w: Workload) -> int:
    """Bytes the block in backward adds while it rebuilds its saved set (0 without checkpointing)."""
    if not checkpointed_indices(w.shape.n_layers, w.activation_checkpointing, w.ac_every):
        return 0
    b = w.activation_bytes
    # selective_op's cached outputs are reused in the rebuilt set, not allocated again.
    cached = 0 if whole_block_recompute(w.activation_checkpointing) else held_bytes(w) - b * w.shape.dim
    return w.tokens_per_micro_step * (block_bytes(w.shape, b) - cached)


def loss_gradient_bytes(w: Workload) -> int:
    """The two fp32 gradients alive in cross-entropy's backward: of the log-softmax output and input."""
    return w.tokens_per_micro_step * 2 * FP32 * w.shape.vocab_size


def embedding_ids_bytes(w: Workload) -> int:
    """What the root still keeps once the loss and the output layer are through backward: the ids."""
    return w.tokens_per_micro_step * INT64
