"""What `precision=fp8` speeds up, and what it costs, in the planner's compute time.

torchao's Float8Linear (tensorwise scaling, fp8 all-gather; fsdp_core/precision.py) runs the three
matmuls of each converted Linear (forward, input gradient, weight gradient) on the fp8 tensor
cores. Converted are the blocks' Linears whose dimensions are multiples of 16
(bench/schema/recipes.py `fp8_converts`); everything else stays at the bf16 rate: attention (SDPA),
norms, the output projection (never converted) and the loss. Around each converted matmul come
memory-bound casts, timed at the device's datasheet HBM bandwidth, per token:
- forward: the input's amax (read, 2 bytes) and its cast to fp8 (read 2, write 1): 5 bytes per input
  element; the weight arrives in fp8 (all-gathered in fp8, its scale computed once per step);
- backward: the output gradient's amax and cast (5 bytes per output element) and the transposed
  fp8 copies the weight-gradient matmul reads (input and output gradient: 2 bytes per element
  each), plus one transposed fp8 copy of each weight per micro-step;
- a recomputed converted matmul (activation checkpointing) casts its input again.
The fp8 matmuls run at the device's fp8 peak times the bf16 efficiency times
`fp8_matmul_efficiency`, the achieved fp8 rate relative to the bf16 one, fitted to torchtitan's
compile + float8 rows (bench/analysis/planner/fit.py).
"""

from __future__ import annotations

from bench.analysis.planner.calibration import DEFAULT_HBM_GBPS, GPU_FIT
from bench.analysis.planner.shapes import ModelShape
from bench.analysis.planner.workload import Workload
from bench.schema.ac_modes import recomputed_matmuls, whole_block_recompute
from bench.schema.recipes import fp8_converts

FORWARD_CAST_BYTES = 5  # per input element: amax read (2) + cast read (2) + fp8 write (1)
BACKWARD_CAST_BYTES = 5  # per output-gradient element, likewise
TRANSPOSE_BYTES = 2  # per element of a transposed fp8 copy: read 1, write 1


def converted(shape: ModelShape) -> list[int]:
    """Indices of the block's matmuls that run in fp8."""
    return [i for i, (out, inp) in enumerate(shape.block_matmuls) if fp8_converts(out, inp)]


def recomputed_converted(w: Workload) -> list[int]:
    """Indices of converted matmuls a checkpointed block recomputes under the workload's mode."""
    matmuls = w.shape.block_matmuls
    if whole_block_recompute(w.activation_checkpointing):
        again = range(len(matmuls) - 1)  # the down projection is never recomputed (early stop)
    else:
        again = recomputed_matmuls(matmuls, w.ac_save_ops)
    return [i for i in again if i in converted(w.shape)]


def matmul_flops(shape: ModelShape, indices: list[int]) -> float:
    """Forward FLOPs per token of the block's matmuls at `indices`."""
    return sum(2.0 * shape.block_matmuls[i][0] * shape.block_matmuls[i][1] for i in indices)


def cast_bytes(w: Workload) -> dict[str, float]:
    """Bytes the casts move per token of one block: forward, backward, recompute."""
    m, conv = w.shape.block_matmuls, converted(w.shape)
    inputs = sum(m[i][1] for i in conv)
    outputs = sum(m[i][0] for i in conv)
    weights = sum(m[i][0] * m[i][1] for i in conv) / w.tokens_per_micro_step
    return {
        "forward": FORWARD_CAST_BYTES * inputs,
        "backward": BACKWARD_CAST_BYTES * outputs + TRANSPOSE_BYTES * (inputs + outputs + weights),
        "recompute": FORWARD_CAST_BYTES * sum(m[i][1] for i in recomputed_converted(w)),
    }


def fp8_rate(w: Workload, bf16_rate: float) -> float:
    """Achieved FLOP/s of the converted matmuls: the fp8 peak at the bf16 efficiency, times the fitted ratio."""
    peaks = w.cluster.peak_tflops
    return bf16_rate * peaks["fp8"] / peaks["bf16"] * GPU_FIT["fp8_matmul_efficiency"]


def block_seconds(w: Workload, block_flops: float, recompute_flops: float, bf16_rate: float) -> dict[str, float]:
    """Forward, backward and recompute seconds of one block per micro-step under fp8.

    `block_flops` are the block's model FLOPs per token (forward + backward), `recompute_flops`
    what a checkpointed block recomputes per token (bench/schema/flops.py)."""
    tokens = w.tokens_per_micro_step
    fast = fp8_rate(w, bf16_rate)
    hbm = (w.cluster.device.memory_gbps or DEFAULT_HBM_GBPS) * 1e9
    linear = matmul_flops(w.shape, converted(w.shape))  # forward; backward twice that
    again = matmul_flops(w.shape, recomputed_converted(w))
    casts = cast_bytes(w)
    forward = (block_flops / 3 - linear) / bf16_rate + linear / fast
    return {
        "forward": tokens * (forward + casts["forward"] / hbm),
        "backward": tokens * (2 * forward + casts["backward"] / hbm),
        "recompute": tokens * ((recompute_flops - again) / bf16_rate + again / fast + casts["recompute"] / hbm),
    }
