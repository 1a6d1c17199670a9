"""The planner's own per-device numbers, and this machine's measured `local-cpu` calibration.

bench/hardware.py holds datasheet facts shared with MFU (peaks, memory, links). What the
planner adds is how much of them training achieves, keyed by the same device names:

- `h100_efficiency` (and `RELATIVE_EFFICIENCY` for other GPUs): achieved hardware FLOP/s over
  the datasheet peak of the compute dtype (an HFU) for FSDP transformer training.
- `cuda_interference`: seconds of compute lost per second of communication that runs
  overlapped with it (NCCL kernels occupy SMs and HBM bandwidth while they run).
- `network_half_nodes`: fabric congestion. A ring spanning n nodes achieves
  line rate / (1 + (n - 1) / network_half_nodes) on the network: ECMP collisions and spine
  hops grow with the number of switches a job spans (published large-scale runs lose throughput
  in proportion to their communicated bytes as they grow, which line-rate rings cannot explain).
- `compile_speedup`: throughput gained by `train.compile=true`.

The GPU values are fitted once to ../shared/reference/published_calibration.csv by
`python -m bench.planner.fit` (procedure in its docstring and in docs/sections/planner.md);
tests/unit/test_planner_published.py refits and fails if these constants drift from the fit.

For `cluster=local-cpu`, `fsdp-bench calibrate` measures this machine and writes a JSON file
(`calibration_path()`: $FSDP_BENCH_CALIBRATION, else $XDG_CACHE_HOME/fsdp-bench/local-cpu.json,
else ~/.cache/fsdp-bench/local-cpu.json): a property of the host, not a result, so it lives
outside the repository and outside results/.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from bench.hardware import ClusterFacts

# --- fitted by `python -m bench.planner.fit --write` (see there); do not edit by hand ---------------
GPU_FIT = {"h100_efficiency": 0.5606, "cuda_interference": 0.15, "network_half_nodes": 22.6, "compile_speedup": 1.1596}
# -------------------------------------------------------------------------------------------------

# Achievable fraction of each GPU relative to H100 SXM's fitted one.
# - H200: the same Hopper compute as H100 SXM (more and faster HBM); no published rows here.
# - A100: no row in the CSV. llm-foundry's benchmark README (the CSV's source) measured the same
#   configuration on both chips: mpt-7b, seq 2048, micro-batch 6, 8 GPUs, no checkpointing, HFU
#   0.6423 on A100-80GB vs 0.4644 on H100-80GB; A100 scales the H100 value by that ratio.
RELATIVE_EFFICIENCY = {"h100-sxm": 1.0, "h200": 1.0, "a100-80gb": 0.6423 / 0.4644, "a100-40gb": 0.6423 / 0.4644}
# CPU: gloo's communication thread competes for the cores the matmuls use: an overlapped second
# of communication costs a full second of compute.
CPU_INTERFERENCE = 1.0

# Datasheet memory bandwidth (GB/s) for the optimizer step, and the host link (GB/s, PCIe x16
# per direction: Gen4 for A100, Gen5 for H100/H200) for CPU offload.
HBM_GBPS = {"a100-40gb": 1555, "a100-80gb": 2039, "h100-sxm": 3350, "h200": 4800}
HOST_LINK_GBPS = {"a100-40gb": 32, "a100-80gb": 32, "h100-sxm": 64, "h200": 64}
# Host memory bandwidth (GB/s) a GPU server's optimizer step gets under CPU offload: a two-socket
# DDR4/DDR5 server streams a few hundred GB/s; 100 GB/s is what one process's AdamW gets.
OFFLOAD_HOST_GBPS = 100.0

# Uncalibrated CPU host (no `fsdp-bench calibrate` yet): a modest AVX2 core.
CPU_DEFAULTS = {  # efficiency: a training step's share of the matmul rate
    "fp32_gflops_per_thread": 50.0,
    "bf16_gflops_per_thread": 10.0,
    "efficiency": 0.3,
    "optimizer_gbps": 5.0,
}
KNOWN_DEVICES = (*RELATIVE_EFFICIENCY, "cpu")


def calibration_path() -> Path:
    """Where `fsdp-bench calibrate` writes and the planner reads the local-cpu calibration."""
    if os.environ.get("FSDP_BENCH_CALIBRATION"):
        return Path(os.environ["FSDP_BENCH_CALIBRATION"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "fsdp-bench" / "local-cpu.json"


@dataclass(frozen=True)
class CpuCalibration:
    """What `calibrate` measured, in the form the planner uses."""

    path: str | None
    cores: int
    matmul_gflops: dict[str, dict[int, float]]  # dtype -> threads -> GFLOP/s of one process
    step_gflops: dict[tuple[int, int], float]  # (processes, threads) -> training-step GFLOP/s per process, fp32
    optimizer_gbps: float  # AdamW's effective streaming rate (28 bytes per parameter)


def default_cpu_calibration() -> CpuCalibration:
    """Documented defaults for a host that has not run `fsdp-bench calibrate`: cores scale linearly."""
    cores = os.cpu_count() or 1
    per_thread = CPU_DEFAULTS["fp32_gflops_per_thread"]
    matmul = {
        dtype: {t: CPU_DEFAULTS[f"{dtype}_gflops_per_thread"] * t for t in (1, cores)} for dtype in ("fp32", "bf16")
    }
    steps = {
        (1, cores): per_thread * cores * CPU_DEFAULTS["efficiency"],
        (cores, 1): per_thread * CPU_DEFAULTS["efficiency"],
    }
    return CpuCalibration(None, cores, matmul, steps, CPU_DEFAULTS["optimizer_gbps"])


def load_cpu_calibration(path: Path | None = None) -> CpuCalibration:
    """The measured calibration, or documented defaults (path None) when there is none."""
    path = path or calibration_path()
    if not path.exists():
        return default_cpu_calibration()
    data = json.loads(path.read_text())
    matmul = {
        dtype: {int(t): float(v) for t, v in by_threads.items()} for dtype, by_threads in data["matmul_gflops"].items()
    }
    steps = {
        (int(p["processes"]), int(p["threads"])): float(p["gflops_per_process"]) for p in data["model_step"]["patterns"]
    }
    return CpuCalibration(str(path), int(data["cores"]), matmul, steps, float(data["optimizer_gbps"]))


def calibrated_cluster(base: ClusterFacts, path: Path | None = None) -> ClusterFacts:
    """local-cpu with the measured links (one per collective kind) and host memory, if calibrated.

    Explicit command-line overrides were already applied to `base` and win: only fields still
    at the preset's value are replaced.
    """
    path = path or calibration_path()
    if base.device_type != "cpu" or not path.exists():
        return base
    data = json.loads(path.read_text())
    extra = dict(base.extra)
    for kind, fit in data["collectives"].items():
        extra.setdefault(f"{kind}_gbps", float(fit["gbps"]))
        extra.setdefault(f"{kind}_latency_s", float(fit["latency_s"]))
    from bench.hardware import CLUSTERS

    preset = CLUSTERS.get(base.name)
    memory = base.device_memory_gib
    if preset is not None and memory == preset.device_memory_gib:
        memory = float(data["memory_gib"])
    return base.with_overrides(extra=extra, device_memory_gib=memory)


def device_efficiency(device: str) -> float:
    """The achievable fraction of peak for a GPU, with an error listing the known devices."""
    if device not in RELATIVE_EFFICIENCY:
        raise ValueError(f"cluster.device: unknown device '{device}'; allowed: {', '.join(KNOWN_DEVICES)}")
    return GPU_FIT["h100_efficiency"] * RELATIVE_EFFICIENCY[device]


def overlap_interference(device_type: str) -> float:
    """Compute seconds lost per second of communication overlapped with it."""
    return CPU_INTERFERENCE if device_type == "cpu" else GPU_FIT["cuda_interference"]


def network_efficiency(nodes: int) -> float:
    """Fraction of the network line rate a ring spanning `nodes` nodes achieves (GPU clusters)."""
    half = GPU_FIT["network_half_nodes"]
    return 1.0 / (1.0 + (nodes - 1) / half) if half else 1.0


def compile_speedup() -> float:
    return GPU_FIT["compile_speedup"]
