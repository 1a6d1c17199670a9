"""Timers, step-time statistics, peak memory and environment capture, inside each rank.

What goes into the record comes out typed (bench.schema.record's StepTimeStats and PeakMemory,
bench.schema.env's EnvInfo and HostLoad); this rank's raw views (its memory snapshot) stay plain.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

from bench.schema.env import EnvInfo, HostLoad
from bench.schema.protocol import NODE_NAME_ENV, Conditions, GitInfo
from bench.schema.record import PeakMemory, StepTimeStats

# Variables that change collective or kernel behaviour: recorded so two results can be told apart.
ENV_PREFIXES = ("NCCL_", "FI_", "TORCH_", "CUDA_", "OMP_", "KMP_", "GOMP_", "MKL_", "FSDP_BENCH_")
# The NVIDIA kernel driver states its version here (containers see the host's file).
NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"


class StepTimer:
    """Times steps bounded by device synchronisation: CUDA events on GPU, a barrier on CPU.

    On GPU no host sync happens per step (events are read after the loop); on CPU each step
    ends with a barrier, so its time already includes waiting for the slowest rank. `busy_s`
    keeps this rank's own part (on CPU, up to the closing barrier), where a straggler shows.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pending: list[tuple[object, object]] = []
        self._host_times: list[float] = []
        self._busy: list[float] = []
        self._start: object = None
        self.host_start = 0.0

    def start(self) -> None:
        if self.device.type == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            dist.barrier()
            self._start = time.perf_counter()
        self.host_start = time.perf_counter()

    def stop(self) -> None:
        if self.device.type == "cuda":
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._pending.append((self._start, end))
        else:
            self._busy.append(time.perf_counter() - self._start)
            dist.barrier()
            self._host_times.append(time.perf_counter() - self._start)

    def elapsed_host_s(self) -> float:
        """Host time since start(); on GPU, synchronise first so it covers the queued work."""
        synchronize(self.device)
        return time.perf_counter() - self.host_start

    def times_s(self) -> list[float]:
        if self.device.type == "cuda":
            synchronize(self.device)
            return [start.elapsed_time(end) / 1000.0 for start, end in self._pending]
        return list(self._host_times)

    def busy_s(self) -> list[float]:
        """This rank's own time per step: up to the closing barrier on CPU; the event time on GPU
        (which includes waits inside collectives: there a straggler shows in preflight matmuls)."""
        return self.times_s() if self.device.type == "cuda" else list(self._busy)


def max_over_ranks(values: list[float], device: torch.device) -> list[float]:
    """Element-wise maximum over ranks: a step is as slow as its slowest rank."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


def step_time_stats(times: list[float]) -> StepTimeStats:
    """median, mean, p10, p90 and coefficient of variation of step times."""
    ordered = sorted(times)
    mean = statistics.fmean(ordered)
    quantiles = statistics.quantiles(ordered, n=10, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 9
    return StepTimeStats(
        median=statistics.median(ordered),
        mean=mean,
        p10=quantiles[0],
        p90=quantiles[-1],
        cv=statistics.pstdev(ordered) / mean if mean > 0 else 0.0,
    )


def synchronize(device: torch.device) -> None:
    """Wait until the device has run everything queued on it (GPU); on CPU nothing is queued. Host
    clocks that must not include earlier queued work (the timed window, a checkpoint's save and
    load) start and stop after it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> dict[str, int]:
    """Start a fresh peak: called when the timed window opens (after a device synchronisation), so
    model initialisation, the warm-up steps and the eager communication-counting step (which under
    compile is not the step that is timed) never set the peak of the steps that are measured.

    On GPU the allocator's cache is released first (`torch.cuda.empty_cache`): resetting moves each
    peak to its current value, and the reserved memory would otherwise still hold the segments cached
    by initialisation, the warm-up and (compile) the eager counting step, whose activations are
    larger than a compiled step's; `reserved` then says what the timed steps themselves hold, as the
    planner's reserved memory does (the caller has synchronised the device: no queued warm-up kernel
    still uses a cached block). The first timed step then allocates its segments again, inside its own
    time: the median is robust to it; the mean and p90 of a few steps may not be. Returns the
    allocator's counters at the reset (`allocator_counts`), from which `memory_snapshot` counts the
    window's own.
    """
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    elif os.path.exists("/proc/self/clear_refs"):
        # Writing 5 resets the kernel's peak-RSS counter (VmHWM) of this process (proc(5)).
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")
        except OSError:
            pass
    return allocator_counts(device)


def allocator_counts(device: torch.device) -> dict[str, int]:
    """The caching allocator's accumulated counters now (GPU; none on CPU). They count from the start
    of the process (init, warm-up and, in a grouped launch, the earlier points): a peak reset leaves
    them, and resetting them (`reset_accumulated_memory_stats`) would also zero the allocated/freed
    totals torch's own out-of-memory message reads. A window's count is its end's less its start's."""
    if device.type != "cuda":
        return {}
    return {"alloc_retries": int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))}


def window_count(end: int | None, start: int | None) -> int | None:
    """A counter's increase over a window from its readings at the end and the start (None: not
    counted; no reading at the start: counted from zero)."""
    if end is None:
        return None
    return end - (start or 0)


def memory_snapshot(device: torch.device, at_start: dict[str, int] | None = None) -> dict[str, int | None]:
    """This rank's memory over the timed window, three views (torchtitan records the same ones) and
    the allocator's retries:

    - `allocated`: the caching allocator's peak of live tensors (GPU) or the process's peak
      resident set size, VmHWM (CPU: includes the Python runtime);
    - `reserved`: the allocator's peak of memory held from the driver, live or cached: what
      decides an out-of-memory error and what torchtitan's tables report (GPU only);
    - `device_used`: the driver's view of the whole device at the end of the window
      (`torch.cuda.mem_get_info`: total - free), which adds the CUDA context, NCCL and cuBLAS
      buffers and any other process on the device (GPU only);
    - `alloc_retries`: times the allocator freed its cache and retried a failed cudaMalloc inside
      the window (the counter's increase since `at_start`, reset_peak_memory's reading), the sign
      of fragmentation close to the limit (GPU only).
    """
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        retries = allocator_counts(device)["alloc_retries"]
        return {
            "allocated": int(torch.cuda.max_memory_allocated(device)),
            "reserved": int(torch.cuda.max_memory_reserved(device)),
            "device_used": int(total - free),
            "alloc_retries": window_count(retries, (at_start or {}).get("alloc_retries")),
        }
    return {"allocated": _peak_rss_bytes(), "reserved": None, "device_used": None, "alloc_retries": None}


def _peak_rss_bytes() -> int:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def peak_memory_record(snapshot: dict[str, int | None], device: torch.device) -> PeakMemory:
    """The record's `peak_mem_bytes`: every rank's snapshot gathered; max and per rank of each view
    (on CPU only the resident set size: the GPU views are left unset, so the record has no such keys)."""
    names = ("allocated", "reserved", "device_used", "alloc_retries")
    values = gather_ints([-1 if snapshot[n] is None else snapshot[n] for n in names], device)
    per_rank = {n: [rank[i] for rank in values] for i, n in enumerate(names)}
    if device.type != "cuda":
        return PeakMemory(max=max(per_rank["allocated"]), per_rank=per_rank["allocated"])
    return PeakMemory(
        max=max(per_rank["allocated"]),
        per_rank=per_rank["allocated"],
        reserved_max=max(per_rank["reserved"]),
        reserved_per_rank=per_rank["reserved"],
        device_used_max=max(per_rank["device_used"]),
        alloc_retries=sum(per_rank["alloc_retries"]),
    )


def gather_floats(value: float, device: torch.device) -> list[float]:
    """One float from every rank, in rank order."""
    local = torch.tensor([value], dtype=torch.float64, device=device)
    tensors = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(tensors, local)
    return [float(t.item()) for t in tensors]


def gather_ints(values: list[int], device: torch.device) -> list[list[int]]:
    """A list of integers from every rank (the same length on each), in rank order."""
    local = torch.tensor(values, dtype=torch.int64, device=device)
    tensors = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(tensors, local)
    return [[int(v) for v in t.tolist()] for t in tensors]


def node_name() -> str:
    """This rank's node: Slurm's node name when under Slurm (several slurmd may share a host), else the host."""
    return os.environ.get("SLURMD_NODENAME") or os.environ.get(NODE_NAME_ENV) or socket.gethostname()


def nvidia_driver_version(path: str = NVIDIA_DRIVER_FILE) -> str | None:
    """The NVIDIA kernel driver's version (`550.54.15`), from its /proc file; None where unreadable.

    torch reports the CUDA runtime, not the driver, and NVML would be one more dependency. The
    file's first line reads `NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  <date>` (the
    open modules: `... Open Kernel Module for x86_64  550.54.15  Release Build ...`).
    """
    try:
        with open(path) as handle:
            line = handle.readline()
    except OSError:
        return None
    match = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)\s", line)
    return match[1] if match else None


def capture_env(
    device: torch.device, git: GitInfo | None = None, harness: str | None = None, conditions: Conditions | None = None
) -> EnvInfo:
    """Versions (the harness's from the launching parent), devices, hosts, communication-relevant
    variables; `conditions` (the launch file's): whether the parent held the host lock."""
    hostnames: list[str] = [""] * dist.get_world_size()
    dist.all_gather_object(hostnames, node_name())
    cuda = device.type == "cuda"
    nccl = None
    if cuda and hasattr(torch.cuda, "nccl"):
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    env = EnvInfo(
        torch=torch.__version__,
        cuda=torch.version.cuda if cuda else None,
        nccl=nccl,
        driver=nvidia_driver_version() if cuda else None,
        device_name=torch.cuda.get_device_name(device)
        if cuda
        else f"cpu ({platform.processor() or platform.machine()})",
        device_count=torch.cuda.device_count() if cuda else os.cpu_count(),
        hostnames=sorted(set(hostnames)),
        rank_hosts=hostnames,
        python=sys.version.split()[0],
        platform=platform.platform(),
        git_sha=git.sha if git else None,
        git_dirty=git.dirty if git else None,
        harness=harness,
        env_vars={k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
    )
    if conditions is not None:
        env.exclusive_host = conditions.exclusive_host
    return env


def host_loads(load: tuple[float, float], device_type: str) -> list[HostLoad]:
    """Each host's 1-minute load average before and after a measurement (`load`, this rank's view)
    and the cores the ranks on it use: CPU threads on a CPU cluster, one per rank on GPUs."""
    threads = torch.get_num_threads() if device_type == "cpu" else 1
    mine = {"host": node_name(), "cores": os.cpu_count() or 1, "threads": threads, "load": list(load)}
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    hosts: dict[str, dict] = {}
    for entry in everyone:
        host = hosts.setdefault(entry["host"], {"host": entry["host"], "cores": entry["cores"], "ranks_cores": 0,
                                                "before": entry["load"][0], "after": entry["load"][1]})  # fmt: skip
        host["ranks_cores"] += entry["threads"]
    return [HostLoad(**hosts[name]) for name in sorted(hosts)]
