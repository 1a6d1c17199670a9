"""Compute time of one micro-step, block by block, from the engine's one FLOPs formula.

The FLOPs come from fsdp_core/flops.py only. To split them between the transformer blocks
(which overlap with communication block by block) and the root (embedding lookup, final norm,
output projection), the formula is evaluated once on the model and once on the same model
with no blocks: the difference divided by n_layers is one block's share. Forward is one third
of a block's model FLOPs, backward two thirds; a checkpointed block adds one more forward.

The achieved rate is the device's peak for the compute dtype times an achievable fraction
(bench/planner/calibration.py: fitted to published figures for GPUs, measured by
`fsdp-bench calibrate` on CPU hosts).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bench.hardware import PRECISION_PEAK_DTYPE
from bench.planner.calibration import (
    CpuCalibration,
    compile_speedup,
    device_efficiency,
    load_cpu_calibration,
)
from bench.planner.workload import Workload
from fsdp_core.flops import checkpointed_blocks, flops_per_token, hardware_flops_per_token


@dataclass(frozen=True)
class ComputeTimes:
    """Seconds per micro-step on one device."""

    n_layers: int
    checkpointed: int  # how many blocks recompute their forward in backward
    block_forward: float
    block_backward: float  # without recomputation
    block_recompute: float  # one more forward, for a checkpointed block
    root_forward: float
    root_backward: float

    @property
    def total(self) -> float:
        blocks = self.n_layers * (self.block_forward + self.block_backward) + self.checkpointed * self.block_recompute
        return blocks + self.root_forward + self.root_backward


def flops_split(w: Workload) -> dict[str, float]:
    """Model FLOPs per token of one block and of the root, and the hardware FLOPs of the model."""
    s = w.shape
    total = flops_per_token(s, w.seq_len)
    root = flops_per_token(replace(s, n_layers=0), w.seq_len)
    return {
        "block": (total - root) / s.n_layers,
        "root": root,
        "model": total,
        "hardware": hardware_flops_per_token(s, w.seq_len, w.activation_checkpointing),
    }


def peak_dtype(w: Workload) -> str:
    return PRECISION_PEAK_DTYPE[w.precision]


def compute_times(w: Workload) -> ComputeTimes:
    """Forward, backward and recompute seconds of one block and of the root, per micro-step."""
    split = flops_split(w)
    rate = compute_rate(w)
    tokens = w.tokens_per_micro_step
    block_fwd = tokens * split["block"] / 3 / rate
    root_fwd = tokens * split["root"] / 3 / rate
    return ComputeTimes(
        n_layers=w.shape.n_layers,
        checkpointed=checkpointed_blocks(w.shape, w.activation_checkpointing),
        block_forward=block_fwd,
        block_backward=2 * block_fwd,
        block_recompute=block_fwd,
        root_forward=root_fwd,
        root_backward=2 * root_fwd,
    )


def compute_rate(w: Workload, cpu: CpuCalibration | None = None) -> float:
    """Achieved hardware FLOP/s of one device for this workload."""
    if w.cluster.device_type == "cpu":
        return cpu_rate(w, cpu or load_cpu_calibration())
    dtype = peak_dtype(w)
    peak = w.cluster.peak_tflops.get(dtype)
    if not peak:
        known = ", ".join(sorted(w.cluster.peak_tflops))
        raise ValueError(f"cluster.peak_tflops.{dtype}: {w.cluster.name} has no {dtype} peak; it has: {known}")
    speedup = compile_speedup() if w.compile else 1.0
    return peak * 1e12 * device_efficiency(w.cluster.device) * speedup


def cpu_rate(w: Workload, cal: CpuCalibration) -> float:
    """One rank's FLOP/s on a CPU host shared by all ranks (the local launcher runs every node here).

    Each rank runs `threads` threads (the worker's rule: cores // ranks, at least one); when
    ranks x threads exceed the cores, ranks time-share them.
    """
    ranks = w.world_size
    threads = w.threads_per_rank or max(1, cal.cores // ranks)
    effective = threads * min(1.0, cal.cores / (ranks * threads))
    # fp16 matmuls on CPU run through the same reduced-precision path as bf16.
    table = cal.gflops["bf16" if w.precision in ("bf16", "bf16_pure", "fp16") else "fp32"]
    efficiency = cal.efficiency[min(cal.efficiency, key=lambda t: abs(t - threads))]
    return interpolate(table, effective) * 1e9 * efficiency


def interpolate(table: dict[int, float], threads: float) -> float:
    """Matmul GFLOP/s at a (possibly fractional) thread count, linear between measured counts."""
    points = sorted(table.items())
    if threads <= points[0][0]:
        return points[0][1] * threads / points[0][0]
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if threads <= t1:
            return v0 + (v1 - v0) * (threads - t0) / (t1 - t0)
    return points[-1][1]
