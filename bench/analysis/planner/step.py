"""Step time: compute and communication overlapped block by block, plus the optimizer.

One micro-step is a sequence of stages, each a stretch of compute with communication
running beside it on FSDP2's communication stream:
- start: the root's and the first block's all-gathers, with nothing to hide behind (exposed);
- forward: while block i computes, block i+1 is gathered;
- backward: while the output layer's backward runs, the last block is re-gathered (full_shard,
  hybrid_shard); while block i's backward runs, block i-1 is re-gathered and block i+1's
  gradient is reduced (reduce-scatter, then the hybrid/no_shard all-reduce);
- end: the first block's and the root's reductions, with nothing left to hide behind (exposed).
In each stage only what exceeds the stage's compute is exposed. The overlapped part is not
free on a GPU either: `overlap_interference` seconds of compute are lost per overlapped second
(counted under `other`, as `comm_interference`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from bench.analysis.planner.calibration import (
    DEFAULT_HBM_GBPS,
    DEFAULT_HOST_LINK_GBPS,
    OFFLOAD_HOST_GBPS,
    load_cpu_calibration,
    overlap_interference,
)
from bench.analysis.planner.comm import ModuleTimes, collective_times
from bench.analysis.planner.compute import ComputeTimes, compute_times
from bench.analysis.planner.memory import state_bytes
from bench.analysis.planner.workload import Workload
from bench.schema.ac_modes import checkpointed_indices

# AdamW touches 28 bytes per parameter shard: reads parameter, gradient and two moments (4 x 4),
# writes parameter and two moments (3 x 4).
ADAMW_BYTES_PER_PARAM = 28


@dataclass(frozen=True)
class MicroStep:
    compute: float
    exposed: float  # communication not hidden behind compute
    overlapped: float  # communication hidden behind compute


def stages(w: Workload) -> tuple[float, list[tuple[float, float]], float]:
    """(exposed head, [(compute, communication) per stage], exposed tail) of one micro-step."""
    ct = compute_times(w)
    block, root = collective_times(w)
    return _stages(ct, block, root, w.reshard_blocks, w.activation_checkpointing, w.ac_every)


def _stages(
    ct: ComputeTimes, block: ModuleTimes, root: ModuleTimes, reshard: bool, checkpointing: str, every: int
) -> tuple[float, list[tuple[float, float]], float]:
    layers = ct.n_layers
    regather = block.gather if reshard else 0.0
    checkpointed = set(checkpointed_indices(layers, checkpointing, every))
    middle = [(ct.block_forward, block.gather if i < layers - 1 else 0.0) for i in range(layers)]
    middle.append((ct.root_forward, 0.0))
    middle.append((ct.root_backward, regather))
    for i in reversed(range(layers)):
        backward = ct.block_backward + (ct.block_recompute if i in checkpointed else 0.0)
        comm = (regather if i > 0 else 0.0) + (block.reduce if i < layers - 1 else 0.0)
        middle.append((backward, comm))
    return root.gather + block.gather, middle, block.reduce + root.reduce


def micro_step(w: Workload) -> MicroStep:
    """Compute, exposed and overlapped communication seconds of one micro-step."""
    block, root = collective_times(w)
    return _micro_step(compute_times(w), block, root, w.reshard_blocks, w.activation_checkpointing, w.ac_every)


@lru_cache(maxsize=4096)
def _micro_step(
    ct: ComputeTimes, block: ModuleTimes, root: ModuleTimes, reshard: bool, checkpointing: str, every: int
) -> MicroStep:
    """The stage-by-stage sums, cached on exactly what they read: a grid's points that differ only in
    grad_accum (or in nothing the times see) share one micro-step.

    The sums of `stages`, added in its order, with each distinct stage's exposed and overlapped parts
    taken once: a micro-step has only a few distinct stages (a grid misses this cache for each of
    its setups: thousands of times, 2 x layers + 2 stages each), and the same floats added in the same
    order are the same bits (tests/unit/test_planner_closed_forms.py compares with `stages`)."""
    head, runs, tail = _stage_runs(ct, block, root, reshard, checkpointing, every)
    computes: list[float] = []
    exposed: list[float] = []
    overlapped: list[float] = []
    for (c, m), count in runs:
        computes += [c] * count
        exposed += [max(0.0, m - c)] * count
        overlapped += [min(m, c)] * count
    return MicroStep(sum(computes), head + tail + sum(exposed), sum(overlapped))


def _stage_runs(
    ct: ComputeTimes, block: ModuleTimes, root: ModuleTimes, reshard: bool, checkpointing: str, every: int
) -> tuple[float, list[tuple[tuple[float, float], int]], float]:
    """`_stages` with its middle as runs of equal stages: [((compute, communication), count)], in order."""
    layers = ct.n_layers
    regather = block.gather if reshard else 0.0
    checkpointed = checkpointed_indices(layers, checkpointing, every)
    runs = [((ct.block_forward, block.gather), layers - 1), ((ct.block_forward, 0.0), 1 if layers else 0)]
    runs += [((ct.root_forward, 0.0), 1), ((ct.root_backward, regather), 1)]
    for i in reversed(range(layers)):
        backward = ct.block_backward + (ct.block_recompute if i in checkpointed else 0.0)
        stage = (backward, (regather if i > 0 else 0.0) + (block.reduce if i < layers - 1 else 0.0))
        if runs[-1][0] == stage:
            runs[-1] = (stage, runs[-1][1] + 1)
        else:
            runs.append((stage, 1))
    return root.gather + block.gather, runs, block.reduce + root.reduce


def optimizer_seconds(w: Workload) -> float:
    """AdamW over this rank's parameter shard: memory-bound streaming."""
    numel = state_bytes(w)["params"] / 4
    if w.cluster.device_type == "cpu":
        return numel * ADAMW_BYTES_PER_PARAM / (load_cpu_calibration().optimizer_gbps * 1e9)
    if w.cpu_offload:
        return numel * ADAMW_BYTES_PER_PARAM / (OFFLOAD_HOST_GBPS * 1e9)
    return numel * ADAMW_BYTES_PER_PARAM / ((w.cluster.device.memory_gbps or DEFAULT_HBM_GBPS) * 1e9)


def offload_seconds(w: Workload) -> float:
    """CPU offload: fp32 shards copied to the device before each gather, gradients copied back."""
    if not w.cpu_offload or w.cluster.device_type == "cpu":
        return 0.0
    shard = state_bytes(w)["params"]
    copies_in = 2 if w.reshard_blocks else 1
    return w.grad_accum * (copies_in + 1) * shard / ((w.cluster.device.host_link_gbps or DEFAULT_HOST_LINK_GBPS) * 1e9)


def step_time(w: Workload, micro: MicroStep | None = None, optimizer: float | None = None) -> dict[str, float]:
    """Seconds of one optimizer step: total, its split, and the parts of `other`. `micro` and
    `optimizer`: the workload's `micro_step` and `optimizer_seconds`, where the caller has them."""
    micro = micro_step(w) if micro is None else micro
    kappa = overlap_interference(w.cluster.device_type)
    detail = {
        "optimizer": optimizer_seconds(w) if optimizer is None else optimizer,
        "comm_interference": w.grad_accum * kappa * micro.overlapped,
        "offload": offload_seconds(w),
    }
    split = {
        "compute": w.grad_accum * micro.compute,
        "exposed_comm": w.grad_accum * micro.exposed,
        "other": sum(detail.values()),
    }
    return {
        "total": sum(split.values()),
        **split,
        "overlapped_comm": w.grad_accum * micro.overlapped,
        "other_detail": detail,
    }


def tokens_per_s_per_device(w: Workload) -> float:
    """Predicted throughput of one device (the step-time part of the prediction only)."""
    return w.micro_batch * w.grad_accum * w.seq_len / step_time(w)["total"]
