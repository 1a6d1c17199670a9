"""The planner's own per-device numbers, and this machine's measured `local-cpu` calibration.

The device and cluster files (sweeps/device, sweeps/cluster) hold datasheet facts shared with
MFU (peaks, memory, bandwidths) and each device's `relative_efficiency`. What the planner adds is
how much of them training achieves:

- `h100_efficiency` (times a device's `relative_efficiency`): achieved hardware FLOP/s over the
  datasheet peak of the compute dtype (an HFU) for FSDP transformer training.
- `cuda_interference`: seconds of compute lost per second of communication that runs
  overlapped with it (NCCL kernels occupy SMs and HBM bandwidth while they run).
- `network_half_nodes`: fabric congestion. A ring spanning n nodes achieves
  line rate / (1 + (n - 1) / network_half_nodes) on the network: ECMP collisions and spine
  hops grow with the number of switches a job spans (published large-scale runs lose throughput
  in proportion to their communicated bytes as they grow, which line-rate rings cannot explain).
- `compile_speedup`: throughput gained by `train.compile=true`.
- `fp8_matmul_efficiency`: the achieved rate of fp8 matmuls relative to the bf16 ones, as a
  fraction of the peaks' ratio (bench/analysis/planner/fp8.py).

The GPU values are fitted once to bench/analysis/planner/data/published_calibration.csv by
`python -m bench.analysis.planner.fit` (procedure in its docstring and in docs/planner.md);
tests/unit/test_planner_published.py refits and fails if these constants drift from the fit.

For `cluster=local-cpu`, `fsdp-bench calibrate` measures this machine and writes a JSON file
(`calibration_path()`: $FSDP_BENCH_CALIBRATION, else local-cpu.json in the user's cache folder,
bench/config/paths.py `cache_dir`: $FSDP_BENCH_CACHE_DIR, else $XDG_CACHE_HOME/fsdp-bench, else
~/.cache/fsdp-bench): a property of the host, not a result, so it lives
outside the repository and outside results/.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.config.paths import cache_dir
from bench.schema.files import Versioned
from bench.schema.spec import ClusterSpec

# --- fitted by `python -m bench.analysis.planner.fit --write` (see there); do not edit by hand ---------------
GPU_FIT = {
    "h100_efficiency": 0.5174,
    "cuda_interference": 0.15,
    "network_half_nodes": 22.6,
    "compile_speedup": 1.1596,
    "fp8_matmul_efficiency": 0.8068,
}
# -------------------------------------------------------------------------------------------------

# CPU: gloo's communication thread competes for the cores the matmuls use: an overlapped second
# of communication costs a full second of compute.
CPU_INTERFERENCE = 1.0

# A device file without `memory_gbps` / `host_link_gbps`: an A100-class HBM and a PCIe Gen4 x16 link.
DEFAULT_HBM_GBPS = 2000.0
DEFAULT_HOST_LINK_GBPS = 32.0
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


# The calibration file's versions (`fsdp-bench calibrate` writes the current one; read with
# migration like every versioned file, bench/schema/files.py).
CALIBRATION = Versioned("calibration", current=1)


def read_calibration(path: Path) -> dict[str, Any]:
    """A calibration file's data as the current version (ValueError in one line naming the file)."""
    try:
        return CALIBRATION.read(path)
    except ValueError as exc:
        raise ValueError(f"calibration {path}: {exc}") from None


def calibration_path() -> Path:
    """Where `fsdp-bench calibrate` writes and the planner reads the local-cpu calibration."""
    if os.environ.get("FSDP_BENCH_CALIBRATION"):
        return Path(os.environ["FSDP_BENCH_CALIBRATION"])
    return cache_dir() / "local-cpu.json"


def save_calibration(data: dict, path: Path) -> None:
    """Write what `calibrate` measured where the planner reads it (atomically: a planner reading at
    the same time sees the old file or the new one)."""
    from bench.schema.files import write_json_atomic

    write_json_atomic(path, data)


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
    data = read_calibration(path)
    matmul = {
        dtype: {int(t): float(v) for t, v in by_threads.items()} for dtype, by_threads in data["matmul_gflops"].items()
    }
    steps = {
        (int(p["processes"]), int(p["threads"])): float(p["gflops_per_process"]) for p in data["model_step"]["patterns"]
    }
    return CpuCalibration(str(path), int(data["cores"]), matmul, steps, float(data["optimizer_gbps"]))


def calibrated_cluster(base: ClusterSpec, path: Path | None = None) -> tuple[ClusterSpec, dict[str, float]]:
    """(cluster, measured links): a CPU host's cluster with its measured memory and collective links
    (one per collective kind), if `fsdp-bench calibrate` ran; the cluster as it is otherwise.

    An explicit `cluster.device_memory_gib` override wins over the measured memory.
    """
    if base.device_type != "cpu":
        return base, {}
    path = path or calibration_path()
    if not path.exists():
        return base, {}
    data = read_calibration(path)
    links = {}
    for kind, fit in data["collectives"].items():
        links[f"{kind}_gbps"] = float(fit["gbps"])
        links[f"{kind}_latency_s"] = float(fit["latency_s"])
    if "device_memory_gib" not in base.overrides:
        base = base.model_copy(update={"device_memory_gib": float(data["memory_gib"])})
    return base, links


def device_efficiency(relative_efficiency: float) -> float:
    """The achievable fraction of peak for a GPU: the fitted H100 value times its device's ratio."""
    return GPU_FIT["h100_efficiency"] * relative_efficiency


def overlap_interference(device_type: str) -> float:
    """Compute seconds lost per second of communication overlapped with it."""
    return CPU_INTERFERENCE if device_type == "cpu" else GPU_FIT["cuda_interference"]


def network_efficiency(nodes: int) -> float:
    """Fraction of the network line rate a ring spanning `nodes` nodes achieves (GPU clusters)."""
    half = GPU_FIT["network_half_nodes"]
    return 1.0 / (1.0 + (nodes - 1) / half) if half else 1.0


def compile_speedup() -> float:
    return GPU_FIT["compile_speedup"]
