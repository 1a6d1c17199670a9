"""Per-device memory of one training configuration, broken down, and the largest micro-batch that fits.

Components (bytes per device):
- `params`, `grads`, `optimizer`: the sharded fp32 master parameters, their fp32 gradients and
  AdamW's two fp32 moments, each 1/shard_degree of the (padded) model. In every precision recipe
  of fsdp_core/precision.py the master copy and optimizer state stay fp32. With CPU offload they
  live in host memory (reported as `host_offloaded`, not in `total`).
- `unsharded_params`: the all-gathered parameters in param dtype (fp8 linears: 1 byte). The root
  (embeddings, final norm, output) never reshards, so it is always whole; blocks under
  full_shard/hybrid_shard keep about two whole blocks alive in backward (the one computing and
  the one prefetched) and none after the forward; shard_grad_op, hybrid_shard_zero2 and no_shard
  keep every block whole from forward until its backward.
- `unsharded_grads`: whole gradients before reduce-scatter during the blocks' backward: the output
  projection's (the root is reduced last) and about two blocks in flight, in param dtype plus the
  reduce-dtype copy where the two differ.
- `activations` and `logits`: what one micro-batch keeps for backward under the checkpointing
  mode, plus backward's transients (bench/analysis/planner/activations.py, counted exactly on CPU).

The peak sits at one of three moments (`moments`): cross-entropy's backward right after the forward
(every activation, the vocabulary-sized loss tensors), the blocks' backward (activations, the
recomputed block, whole parameters and gradients in flight) or the root's reduce-scatter after the
blocks' backward (the root's whole gradient in the collective's buffers); the breakdown is the
largest one's.
- `headroom`: allocator fragmentation (a fraction of the dynamic part) plus the runtime's own
  footprint (CUDA context, NCCL and cuBLAS workspaces; on CPU the Python and torch runtime).
"""

from __future__ import annotations

from functools import lru_cache

from bench.analysis.planner.activations import embedding_ids_bytes, loss_gradient_bytes, recompute_bytes, saved_bytes
from bench.analysis.planner.shapes import padded_numel
from bench.analysis.planner.workload import Workload
from bench.schema.recipes import FP8_LINEAR_BYTES, fp8_converts
from bench.schema.units import GIB

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
    return padded_gather_bytes(shapes, w.shard_degree, w.param_bytes, fp8_linears)


@lru_cache(maxsize=4096)
def padded_gather_bytes(shapes: tuple[tuple[int, int], ...], shards: int, param_bytes: int, fp8_linears: bool) -> int:
    """`gather_bytes` from its inputs (cached: a grid asks the same shapes and shard counts throughout)."""
    total = 0
    for dim0, numel in shapes:
        size = padded_numel(((dim0, numel),), shards)
        converted = fp8_linears and numel != dim0 and fp8_converts(dim0, numel // dim0)
        total += size * (FP8_LINEAR_BYTES if converted else param_bytes)
    return total


def gathered(w: Workload) -> tuple[int, int]:
    """Bytes of one block's and of the root's all-gathered parameters."""
    fp8 = w.precision_recipe.fp8_linears
    return gather_bytes(w.shape.block_shapes, w, fp8), gather_bytes(w.shape.root_shapes, w, False)


def unsharded_bytes(w: Workload) -> dict[str, int]:
    """Whole parameters and gradients alive during the blocks' backward (the `backward` moment)."""
    block, root = gathered(w)
    blocks_alive = min(BLOCKS_IN_FLIGHT if w.reshard_blocks else w.shape.n_layers, w.shape.n_layers)
    grad_elem = w.param_bytes + (w.reduce_bytes if w.reduce_bytes != w.param_bytes else 0)
    block_numel = padded_numel(w.shape.block_shapes, w.shard_degree)
    # The root's gradients are reduced last: the output projection's (computed first) is alive in
    # the compute dtype through the blocks' backward; the embedding's comes only at the very end.
    output_numel = padded_numel(w.shape.root_shapes[-1:], w.shard_degree)
    grads = output_numel * w.param_bytes + min(BLOCKS_IN_FLIGHT, w.shape.n_layers) * block_numel * grad_elem
    return {"unsharded_params": root + blocks_alive * block, "unsharded_grads": grads}


def root_reduce_bytes(w: Workload) -> int:
    """The root's gradients on their way through FSDP2's reduce-scatter (the `root_reduce` moment).

    foreach_reduce copies the root's whole gradients (compute dtype, unpadded) into one padded
    reduce-dtype input buffer, frees them, then allocates the sharded output: the larger of the
    copy-in (gradients + input) and the collective (input + output) is what the moment holds. On CPU,
    gloo's reduce-scatter works on a full-size copy of its input besides (it reduces the copy, then
    takes its own chunk), wherever a reduce-scatter runs at all (more than one shard).
    """
    shards = w.shard_degree
    padded = padded_numel(w.shape.root_shapes, shards)
    copy_in = w.shape.root_params * w.param_bytes + padded * w.reduce_bytes
    collective = padded * w.reduce_bytes + padded // shards * w.reduce_bytes
    if w.cluster.device_type == "cpu" and shards > 1:
        collective += padded * w.reduce_bytes
    return max(copy_in, collective)


def moments(w: Workload) -> dict[str, dict[str, int]]:
    """The allocator-visible bytes at the three moments the peak can sit at, component by component.

    - `loss`: cross-entropy's backward, right after the forward: every block's saved tensors,
      the fp32 log-softmax and its two fp32 gradients; the root whole, blocks whole only where
      the strategy never reshards them; no unsharded gradients yet.
    - `backward`: the blocks' backward: saved tensors, the block being recomputed, the root and
      two blocks whole (all of them without resharding), gradients in flight.
    - `root_reduce`: the root's reduce-scatter once backward is over: no activations are left and
      no parameter is whole (the root reshards after backward before it reduces, and every block
      has); the only unsharded bytes are the root's gradient in the collective's buffers
      (`root_reduce_bytes`). It holds the most where the root outweighs a few blocks (a small
      model with a large vocabulary).
    The sharded fp32 gradients are counted at all three (they exist from the first micro-step's
    reduce-scatter on under gradient accumulation, and through the optimizer step).
    """
    states = dict.fromkeys(state_bytes(w), 0) if w.cpu_offload else state_bytes(w)
    saved = saved_bytes(w)
    during_backward = unsharded_bytes(w)
    block, root = gathered(w)
    whole_after_forward = 0 if w.reshard_blocks else w.shape.n_layers * block
    return {
        "loss": {
            **states,
            "unsharded_params": root + whole_after_forward,
            "unsharded_grads": 0,
            "activations": saved["activations"],
            "logits": saved["logits"] + loss_gradient_bytes(w),
        },
        "backward": {
            **states,
            **during_backward,
            "activations": saved["activations"] + recompute_bytes(w),
            "logits": embedding_ids_bytes(w),
        },
        "root_reduce": {
            **states,
            "unsharded_params": 0,
            "unsharded_grads": root_reduce_bytes(w),
            "activations": 0,
            "logits": 0,
        },
    }


# Predictions of a grid share most of their memory: a grid's points differ in what memory never reads
# (grad_accum, compile, the cluster's rates), and every point of a setup asks for the same largest
# micro-batch. Both caches are keyed by `memory_key`; they hold plain results, cleared when full.
CACHE_SIZE = 65536
_PEAKS: dict[tuple, tuple[str, dict[str, int]]] = {}
_LARGEST: dict[tuple, int] = {}


def memory_key(w: Workload, micro_batch: bool = True) -> tuple:
    """Every field of a workload the memory model reads (the caches' key); without the micro-batch
    when `micro_batch` is False. Memory never reads grad_accum (gradients accumulate into the sharded
    fp32 buffer counted anyway), compile, threads, links or the cluster's rates: tests/unit/
    test_planner_predict.py changes each of those and requires the same breakdown."""
    key = (w.shape, w.nodes, w.gpus_per_node, w.strategy, w.precision, w.seq_len, w.activation_checkpointing,
           w.ac_every, w.ac_save_ops, w.cpu_offload, w.cluster.device_type, w.cluster.device_memory_gib)  # fmt: skip
    return (*key, w.micro_batch) if micro_batch else key


def clear_caches() -> None:
    """Forget every cached breakdown and largest micro-batch (the next call computes afresh)."""
    _PEAKS.clear()
    _LARGEST.clear()


def _cached(cache: dict, key: tuple, compute):
    value = cache.get(key)
    if value is None:
        if len(cache) >= CACHE_SIZE:
            cache.clear()
        value = cache[key] = compute()
    return value


def at_peak(w: Workload) -> tuple[str, dict[str, int]]:
    """(the peak moment, the breakdown there), shared by every workload of the same `memory_key`;
    callers copy the dict before changing it."""
    return _cached(_PEAKS, memory_key(w), lambda: _at_peak(w))


def _at_peak(w: Workload) -> tuple[str, dict[str, int]]:
    parts = moments(w)
    moment = max(parts, key=lambda name: sum(parts[name].values()))  # the first on a tie
    out = dict(parts[moment])
    dynamic = out["unsharded_params"] + out["unsharded_grads"] + out["activations"] + out["logits"]
    out["headroom"] = int(FRAGMENTATION * dynamic) + runtime_bytes(w)
    out["total"] = sum(out.values())
    out["host_offloaded"] = sum(state_bytes(w).values()) if w.cpu_offload else 0
    return moment, out


def peak_moment(w: Workload) -> str:
    """Which moment of `moments` holds the most."""
    return at_peak(w)[0]


def memory_breakdown(w: Workload) -> dict[str, int]:
    """Every component in bytes per device at the peak moment, `total` included (see the module docstring)."""
    return dict(at_peak(w)[1])


def runtime_bytes(w: Workload) -> int:
    return RUNTIME_BYTES.get(w.cluster.device_type, RUNTIME_BYTES["cuda"])


def peak_memory(w: Workload) -> dict[str, object]:
    """The peak as the allocator and the device report it: what the record's `peak_mem_bytes`
    compares with (`allocated`: max, `reserved`: reserved_max, `device`: device_used_max on GPUs)."""
    moment, breakdown = at_peak(w)
    allocated = sum(v for k, v in breakdown.items() if k not in ("headroom", "total", "host_offloaded"))
    runtime = runtime_bytes(w)
    return {
        "moment": moment,
        "allocated": allocated,
        "reserved": allocated + breakdown["headroom"] - runtime,
        "device": breakdown["total"],
    }


def device_memory_bytes(w: Workload) -> int:
    return int(w.cluster.device_memory_gib * GIB)


def ranks_sharing_memory(w: Workload) -> int:
    """A GPU's memory is its own; a CPU host's RAM is shared by every local rank (all of them)."""
    return w.world_size if w.cluster.device_type == "cpu" else 1


def fits(w: Workload) -> bool:
    return _needed_bytes(w) <= device_memory_bytes(w)


def max_micro_batch(w: Workload, limit: int = 1 << 16) -> int:
    """The largest micro-batch that fits (memory grows with it), 0 when even one sequence does not;
    computed once per `memory_key` without the micro-batch."""
    return _cached(_LARGEST, (*memory_key(w, micro_batch=False), limit), lambda: _max_micro_batch(w, limit))


def _max_micro_batch(w: Workload, limit: int) -> int:
    """The search behind `max_micro_batch`.

    Memory is the larger of a few moments' needs, each affine in the micro-batch, so it grows
    monotonically but not along one line (the peak can move from the blocks' backward to the loss
    as the logits grow). The line through micro-batches 1 and 2 usually lands on the edge (two more
    evaluations confirm it); where it does not, a bisection on its side of the edge settles it.
    """
    if not fits(w.with_micro_batch(1)):
        return 0
    need_1, need_2 = (_needed_bytes(w.with_micro_batch(m)) for m in (1, 2))
    slope = need_2 - need_1
    guess = limit if slope <= 0 else 1 + (device_memory_bytes(w) - need_1) // slope
    guess = max(1, min(limit, guess))
    if fits(w.with_micro_batch(guess)):
        if guess == limit or not fits(w.with_micro_batch(guess + 1)):
            return guess
        fitting, too_big = guess + 1, limit + 1
    else:
        fitting, too_big = 1, guess
    while too_big - fitting > 1:  # fits(fitting); too_big is past the edge (or the limit)
        middle = (fitting + too_big) // 2
        if fits(w.with_micro_batch(middle)):
            fitting = middle
        else:
            too_big = middle
    return fitting


def _needed_bytes(w: Workload) -> int:
    """What `fits` compares with the device's memory."""
    return at_peak(w)[1]["total"] * ranks_sharing_memory(w)
