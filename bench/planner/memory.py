"""Per-device memory of one training configuration, broken down, and the largest micro-batch that fits.

Components (bytes per device):
- `params`, `grads`, `optimizer`: the sharded fp32 master parameters, their fp32 gradients and
  AdamW's two fp32 moments, each 1/shard_degree of the (padded) model. In every precision recipe
  of fsdp_core/precision.py the master copy and optimizer state stay fp32. With CPU offload they
  live in host memory (reported as `host_offloaded`, not in `total`).
- `unsharded_params`: the all-gathered parameters in param dtype (fp8 linears: 1 byte). The root
  (embeddings, final norm, output) never reshards, so it is always whole; blocks under
  full_shard/hybrid_shard keep about two whole blocks alive (the one computing and the one
  prefetched); shard_grad_op, hybrid_shard_zero2 and no_shard keep every block whole from
  forward until its backward, and the peak sits at the start of backward.
- `unsharded_grads`: whole gradients before reduce-scatter: the root's (computed first in
  backward, reduced last) and about two blocks in flight, in param dtype plus the reduce-dtype
  copy where the two differ.
- `activations`: saved tensors of the blocks for one micro-batch (`activation_bytes_per_token`),
  and `logits`: the output layer's logits, the fp32 log-softmax cross-entropy saves and the two
  fp32 gradients alive at the start of backward.
- `headroom`: allocator fragmentation (a fraction of the dynamic part) plus the runtime's own
  footprint (CUDA context, NCCL and cuBLAS workspaces; on CPU the Python and torch runtime).
"""

from __future__ import annotations

from functools import lru_cache

from bench.planner.shapes import padded_numel
from bench.planner.workload import Workload
from fsdp_core.flops import checkpointed_blocks
from fsdp_core.recipes import FP8_LINEAR_BYTES

GIB = 2**30
# Blocks whose whole parameters (and gradients) are alive at once under reshard_after_forward=True:
# the one computing and the one FSDP2 prefetches.
BLOCKS_IN_FLIGHT = 2
# The caching allocator's fragmentation, as a fraction of the memory that comes and goes each step
# (activations, unsharded buffers). Bounded by data: llm-foundry trained mpt-7b at micro-batch 6
# without checkpointing on 80 GB H100s (published_calibration.csv), which this memory model puts at
# 73.5 GiB before headroom: with the 1 GiB runtime, fragmentation was at most 9% of the dynamic
# part (61 GiB); 5% sits inside that bound.
FRAGMENTATION = 0.05
# What the runtime holds before the model allocates anything. CUDA: context (~0.5 GiB on Hopper),
# NCCL channel buffers and cuBLAS workspaces. CPU: the resident Python interpreter with torch loaded.
RUNTIME_BYTES = {"cuda": int(1.0 * GIB), "cpu": int(0.35 * GIB)}
# AdamW keeps two moments (exp_avg, exp_avg_sq) per parameter.
ADAM_STATES = 2
FP32 = 4


def state_bytes(w: Workload) -> dict[str, int]:
    """Sharded master parameters, gradients and optimizer state per device (padded like FSDP2)."""
    shards = w.shard_degree
    padded = w.shape.n_layers * padded_numel(w.shape.block_shapes, shards) + padded_numel(w.shape.root_shapes, shards)
    local = padded // shards
    return {"params": local * FP32, "grads": local * FP32, "optimizer": local * FP32 * ADAM_STATES}


def gather_bytes(shapes: tuple[tuple[int, int], ...], w: Workload, fp8_linears: bool) -> int:
    """Bytes of one module's all-gathered (unsharded, padded) parameters in param dtype."""
    return _gather_bytes(shapes, w.shard_degree, w.param_bytes, fp8_linears)


@lru_cache(maxsize=4096)
def _gather_bytes(shapes: tuple[tuple[int, int], ...], shards: int, param_bytes: int, fp8_linears: bool) -> int:
    total = 0
    for dim0, numel in shapes:
        size = padded_numel(((dim0, numel),), shards)
        is_matrix = numel != dim0
        total += size * (FP8_LINEAR_BYTES if fp8_linears and is_matrix else param_bytes)
    return total


def unsharded_bytes(w: Workload) -> dict[str, int]:
    """Whole parameters and gradients alive at the start of backward (the peak)."""
    fp8 = w.precision_recipe.fp8_linears
    block = gather_bytes(w.shape.block_shapes, w, fp8)
    root = gather_bytes(w.shape.root_shapes, w, False)
    blocks_alive = BLOCKS_IN_FLIGHT if w.reshard_blocks else w.shape.n_layers
    blocks_alive = min(blocks_alive, w.shape.n_layers)
    grad_elem = w.param_bytes + (w.reduce_bytes if w.reduce_bytes != w.param_bytes else 0)
    block_numel = padded_numel(w.shape.block_shapes, w.shard_degree)
    root_numel = padded_numel(w.shape.root_shapes, w.shard_degree)
    grads = (root_numel + min(BLOCKS_IN_FLIGHT, w.shape.n_layers) * block_numel) * grad_elem
    return {"unsharded_params": root + blocks_alive * block, "unsharded_grads": grads}


def activation_bytes_per_token(w: Workload) -> dict[str, float]:
    """Saved bytes per token: one block without checkpointing, one checkpointed block, the logits.

    Korthikanti et al. 2022 (arXiv:2205.05198) style count of the tensors autograd keeps, for
    SDPA/flash attention (no seq x seq matrix is stored) and no dropout: per block the two norm
    inputs, the attention's norm output, q, k, v, the attention output (the engine's model saves a
    second, contiguous copy as the out-projection input), and the MLP's input plus its ffn-wide
    intermediates (SwiGLU: w1 and w3 outputs, the SiLU output and the product; GELU: the
    up-projection and GELU outputs).
    """
    s, b = w.shape, w.activation_bytes
    h, kv, f = s.dim, s.kv_dim, s.ffn_dim
    mlp = h + (4 * f if s.gated_mlp else 2 * f)
    attention = 3 * h + 2 * kv + (h if s.engine_layout else 0)
    block = b * (2 * h + attention + mlp)
    if s.engine_layout and b < FP32:
        # The engine's RMSNorm and RoPE compute in fp32 and autograd keeps those copies.
        block += FP32 * (2 * h + h + kv)
    # At the start of backward: the logits (held by the training loop), the fp32 log-softmax that
    # cross-entropy saves, the loss gradient and the log-softmax input gradient (both fp32, dense).
    logits = s.vocab_size * (b + 3 * FP32) + h * (2 * b + (FP32 if b < FP32 else 0))
    return {"block": float(block), "checkpointed_block": float(b * h), "logits": float(logits)}


def activation_bytes(w: Workload) -> dict[str, int]:
    """Activations of one micro-batch per device, under the workload's checkpointing mode."""
    per_token = activation_bytes_per_token(w)
    tokens = w.tokens_per_micro_step
    ckpt = checkpointed_blocks(w.shape, w.activation_checkpointing)
    full = w.shape.n_layers - ckpt
    blocks = full * per_token["block"] + ckpt * per_token["checkpointed_block"]
    if ckpt:
        blocks += per_token["block"]  # the block being recomputed in backward holds its full set
    return {"activations": int(tokens * blocks), "logits": int(tokens * per_token["logits"])}


def memory_breakdown(w: Workload) -> dict[str, int]:
    """Every component in bytes per device, `total` included (see the module docstring)."""
    states = state_bytes(w)
    out: dict[str, int] = {}
    if w.cpu_offload:
        out.update(dict.fromkeys(states, 0))
    else:
        out.update(states)
    out.update(unsharded_bytes(w))
    out.update(activation_bytes(w))
    dynamic = out["unsharded_params"] + out["unsharded_grads"] + out["activations"] + out["logits"]
    out["headroom"] = int(FRAGMENTATION * dynamic) + RUNTIME_BYTES.get(w.cluster.device_type, RUNTIME_BYTES["cuda"])
    out["total"] = sum(out.values())
    out["host_offloaded"] = sum(states.values()) if w.cpu_offload else 0
    return out


def device_memory_bytes(w: Workload) -> int:
    return int(w.cluster.device_memory_gib * GIB)


def ranks_sharing_memory(w: Workload) -> int:
    """A GPU's memory is its own; a CPU host's RAM is shared by every local rank (all of them)."""
    return w.world_size if w.cluster.device_type == "cpu" else 1


def fits(w: Workload) -> bool:
    return _needed_bytes(w) <= device_memory_bytes(w)


def max_micro_batch(w: Workload, limit: int = 1 << 16) -> int:
    """The largest micro-batch that fits (memory grows with it), 0 when even one sequence does not.

    Memory is affine in the micro-batch (activations and logits grow with it, their headroom
    share too) up to integer rounding, so the line through micro-batches 1 and 2 lands within a
    step or two of the answer, and `fits` (monotone in the micro-batch) settles it exactly.
    """
    if not fits(w.with_micro_batch(1)):
        return 0
    need_1, need_2 = (_needed_bytes(w.with_micro_batch(m)) for m in (1, 2))
    slope = need_2 - need_1
    guess = limit if slope <= 0 else 1 + (device_memory_bytes(w) - need_1) // slope
    guess = max(1, min(limit, guess))
    while guess < limit and fits(w.with_micro_batch(guess + 1)):
        guess += 1
    while guess > 1 and not fits(w.with_micro_batch(guess)):
        guess -= 1
    return guess


def _needed_bytes(w: Workload) -> int:
    """What `fits` compares with the device's memory."""
    return memory_breakdown(w)["total"] * ranks_sharing_memory(w)
