"""Compute time of one micro-step, block by block, from the engine's one FLOPs formula.

The FLOPs come from bench/schema/flops.py only. To split them between the transformer blocks
(which overlap with communication block by block) and the root (embedding lookup, final norm,
output projection), the formula is evaluated once on the model and once on the same model
with no blocks: the difference divided by n_layers is one block's share. Forward is one third
of a block's model FLOPs, backward two thirds; a checkpointed block adds what its mode recomputes
(bench/schema/flops.py: a forward less the down projection, or selective_op's recomputed matmuls).

The achieved rate is the device's peak for the compute dtype times an achievable fraction
(bench/analysis/planner/calibration.py: fitted to published figures for GPUs, measured by
`fsdp-bench calibrate` on CPU hosts). Under fp8 only the converted Linears' matmuls run faster,
with their casts added (bench/analysis/planner/fp8.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from bench.analysis.planner import fp8
from bench.analysis.planner.calibration import CpuCalibration, compile_speedup, device_efficiency, load_cpu_calibration
from bench.analysis.planner.shapes import ModelShape
from bench.analysis.planner.workload import Workload
from bench.schema.flops import checkpointed_blocks, flops_per_token, hardware_flops_per_token, recompute_flops_per_token


@dataclass(frozen=True)
class ComputeTimes:
    """Seconds per micro-step on one device."""

    n_layers: int
    checkpointed: int  # how many blocks recompute their forward in backward
    block_forward: float
    block_backward: float  # without recomputation
    block_recompute: float  # what a checkpointed block recomputes in backward
    root_forward: float
    root_backward: float

    @property
    def total(self) -> float:
        blocks = self.n_layers * (self.block_forward + self.block_backward) + self.checkpointed * self.block_recompute
        return blocks + self.root_forward + self.root_backward


def flops_split(w: Workload) -> dict[str, float]:
    """Model FLOPs per token of one block and of the root, and the hardware FLOPs of the model."""
    return dict(_flops_split(w.shape, w.seq_len, w.activation_checkpointing, w.ac_every, w.ac_save_ops))


@lru_cache(maxsize=4096)
def _flops_split(
    s: ModelShape, seq_len: int, checkpointing: str, every: int, save_ops: tuple[str, ...] | None
) -> dict[str, float]:
    # Cached on what the formula reads: a grid's points share a few shapes, sequences and modes.
    total = flops_per_token(s, seq_len)
    # The root's share: the same shape with no blocks (model_copy: 0 layers is no valid model, only a formula input).
    root = flops_per_token(replace(s, dims=s.dims.model_copy(update={"n_layers": 0})), seq_len)
    return {
        "block": (total - root) / s.n_layers,
        "root": root,
        "model": total,
        "hardware": hardware_flops_per_token(s, seq_len, checkpointing, every, save_ops),
        "recompute": recompute_flops_per_token(s, seq_len, checkpointing, save_ops),
    }


def peak_dtype(w: Workload) -> str:
    """The dtype whose peak the precision's ordinary (not fp8-converted) matmuls run at."""
    recipe = w.precision_recipe
    return "bf16" if recipe.fp8_linears else recipe.peak_dtype


def compute_times(w: Workload) -> ComputeTimes:
    """Forward, backward and recompute seconds of one block and of the root, per micro-step."""
    split = flops_split(w)
    rate = compute_rate(w)
    tokens = w.tokens_per_micro_step
    root_fwd = tokens * split["root"] / 3 / rate
    if w.precision_recipe.fp8_linears and w.cluster.device_type == "cuda":
        block = fp8.block_seconds(w, split["block"], split["recompute"], rate)
    else:
        forward = tokens * split["block"] / 3 / rate
        block = {"forward": forward, "backward": 2 * forward, "recompute": tokens * split["recompute"] / rate}
    return ComputeTimes(
        n_layers=w.shape.n_layers,
        checkpointed=checkpointed_blocks(w.shape, w.activation_checkpointing, w.ac_every),
        block_forward=block["forward"],
        block_backward=block["backward"],
        block_recompute=block["recompute"],
        root_forward=root_fwd,
        root_backward=2 * root_fwd,
    )


def compute_rate(w: Workload, cpu: CpuCalibration | None = None) -> float:
    """Achieved hardware FLOP/s of one device for this workload."""
    if w.cluster.device_type == "cpu":
        return cpu_rate(w, cpu or w.cpu or load_cpu_calibration())
    dtype = peak_dtype(w)
    peak = w.cluster.peak_tflops.get(dtype)
    if not peak:
        known = ", ".join(sorted(w.cluster.peak_tflops))
        raise ValueError(f"cluster.peak_tflops.{dtype}: {w.cluster.name} has no {dtype} peak; it has: {known}")
    speedup = compile_speedup() if w.compile else 1.0
    return peak * 1e12 * device_efficiency(w.cluster.device.relative_efficiency) * speedup


def cpu_rate(w: Workload, cal: CpuCalibration) -> float:
    """One rank's FLOP/s on a CPU host shared by all ranks (the local launcher runs every node here).

    Each rank runs `threads` threads (the worker's rule: cores // ranks, at least one). The rate
    is the measured training-step rate of that (processes, threads) pattern, all processes
    running at once; for a pattern not measured, the one with the nearest total thread count,
    scaled by the busy cores and shared among the ranks.
    """
    ranks = w.world_size
    threads = w.threads_per_rank or max(1, cal.cores // ranks)
    per_process = cal.step_gflops.get((ranks, threads))
    if per_process is None:
        (r, t), rate = min(
            cal.step_gflops.items(),
            key=lambda item: (abs(item[0][0] * item[0][1] - ranks * threads), abs(item[0][0] - ranks)),
        )
        busy = min(ranks * threads, cal.cores) / min(r * t, cal.cores)
        per_process = rate * r * busy / ranks
    return per_process * 1e9 * dtype_speedup(w, cal, threads)


def dtype_speedup(w: Workload, cal: CpuCalibration, threads: int) -> float:
    """bf16/fp16 compute relative to fp32: the matmul ratio measured at this thread count."""
    if w.precision_recipe.param_dtype not in ("bfloat16", "float16"):
        return 1.0
    fp32, bf16 = cal.matmul_gflops["fp32"], cal.matmul_gflops["bf16"]
    t = min(fp32, key=lambda measured: abs(measured - threads))
    return bf16[t] / fp32[t]
