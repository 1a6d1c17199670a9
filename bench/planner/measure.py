"""What `fsdp-bench calibrate` measures on this machine (imports torch; only the command uses it).

- matmul FLOP/s per dtype (fp32, bf16) and thread count: square 1024 x 1024 matmuls, the
  median of repeated timings;
- what a real training step achieves: forward and backward of the `tiny` flavor (its default
  sequence 256, micro-batch 1, fp32), its hardware FLOPs (fsdp_core/flops.py) per second, in
  each (processes, threads) pattern the local launcher produces (1 rank with every core, one
  thread per rank up to twice the cores), with the processes running at the same time: hosts
  whose vCPUs share physical cores, caches or memory bandwidth show it here;
- AdamW's streaming rate: one `foreach` step over the same model, as bytes per second at the
  28 bytes per parameter the planner charges;
- gloo all-gather, reduce-scatter and all-reduce times by message size (4 KiB to 16 MiB)
  between 2 real local ranks (torch.multiprocessing, one thread each), fitted to the ring model
  t = passes x (latency + bytes / 2 / bandwidth) the planner uses;
- the host's total memory, which all local ranks share.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

MATMUL_N = 1024
MESSAGE_SIZES = [2**k for k in range(12, 25, 2)]  # 4 KiB .. 16 MiB
PASSES = {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 2}
CALIBRATION_MODEL = "tiny"
COLLECTIVE_REPS = 9


def _median_time(fn, min_time: float, min_reps: int = 3) -> float:
    """Median seconds of fn() after one warm-up call, repeated for at least min_time seconds."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _median_time_fixed(fn, reps: int) -> float:
    """Median seconds of fn() over a fixed count: collectives need every rank to call alike."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def matmul_gflops(dtype_name: str, threads: int, min_time: float = 0.5) -> float:
    import torch

    torch.set_num_threads(threads)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    a = torch.randn(MATMUL_N, MATMUL_N, dtype=dtype)
    b = torch.randn(MATMUL_N, MATMUL_N, dtype=dtype)
    seconds = _median_time(lambda: torch.mm(a, b), min_time)
    return 2 * MATMUL_N**3 / seconds / 1e9


def _tiny_model():
    import torch

    from fsdp_core.flavors import get_flavor
    from fsdp_core.model import build_model

    args = get_flavor(CALIBRATION_MODEL)
    model = build_model(args, "cpu")
    model.init_buffers(torch.device("cpu"))
    return args, model


def _wait_for_peers(out_dir: str, index: int, processes: int) -> None:
    """A file barrier: every process has built its model before any starts timing."""
    Path(out_dir, f"ready{index}").touch()
    while len(list(Path(out_dir).glob("ready*"))) < processes:
        time.sleep(0.01)


def _model_step_worker(index: int, processes: int, threads: int, duration: float, out_dir: str) -> None:
    """One of `processes` concurrent processes timing forward+backward of the calibration model."""
    import json

    import torch
    import torch.nn.functional as F

    from fsdp_core.flops import hardware_flops_per_token

    torch.set_num_threads(threads)
    args, model = _tiny_model()
    seq = args.default_seq_len
    tokens = torch.randint(0, args.vocab_size, (1, seq + 1))

    def forward_backward() -> None:
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten()).backward()

    _wait_for_peers(out_dir, index, processes)
    seconds = _median_time(forward_backward, duration)
    result = {"seconds": seconds, "gflops": seq * hardware_flops_per_token(args, seq, "none") / seconds / 1e9}
    if processes == 1:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, foreach=True)
        params = sum(p.numel() for p in model.parameters())
        result["optimizer_gbps"] = 28 * params / _median_time(optimizer.step, duration / 3) / 1e9
    Path(out_dir, f"step{index}.json").write_text(json.dumps(result))


def concurrent_model_steps(processes: int, threads: int, duration: float = 2.0) -> dict[str, float]:
    """Per-process hardware GFLOP/s of the calibration model's training step when `processes`
    processes of `threads` threads each run at once (as the local launcher's ranks do)."""
    import json

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(
            _model_step_worker, args=(processes, threads, duration, out_dir), nprocs=processes, start_method="spawn"
        )
        results = [json.loads(Path(out_dir, f"step{i}.json").read_text()) for i in range(processes)]
    out = {
        "processes": processes,
        "threads": threads,
        "gflops_per_process": statistics.median(r["gflops"] for r in results),
    }
    if processes == 1:
        out["optimizer_gbps"] = results[0]["optimizer_gbps"]
    return out


def step_patterns(cores: int) -> list[tuple[int, int]]:
    """(processes, threads) patterns the worker's thread rule produces for 1 .. 2 x cores ranks."""
    patterns = {(ranks, max(1, cores // ranks)) for ranks in (1, 2, 4, 8, 16, 32) if ranks <= 2 * cores}
    return sorted(patterns | {(1, 1)})


def _collective_ops(size: int, world: int) -> dict:
    """Each collective on a `size`-byte whole buffer (fp32), as zero-argument callables."""
    from functools import partial

    import torch
    import torch.distributed as dist

    whole = torch.zeros(size // 4, dtype=torch.float32)
    shard = torch.zeros(size // 4 // world, dtype=torch.float32)
    return {
        "all_gather": partial(dist.all_gather_into_tensor, whole, shard),
        "reduce_scatter": partial(dist.reduce_scatter_tensor, shard, whole),
        "all_reduce": partial(dist.all_reduce, whole),
    }


def _collective_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import json
    import warnings

    import torch
    import torch.distributed as dist

    # torch 2.13 renames the tensor collectives; the old names are what FSDP2's gloo path runs.
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results: dict[str, list[float]] = {kind: [] for kind in PASSES}
    for size in MESSAGE_SIZES:
        for kind, op in _collective_ops(size, world).items():
            dist.barrier()
            results[kind].append(_median_time_fixed(op, COLLECTIVE_REPS))
    if rank == 0:
        Path(out_dir, "collectives.json").write_text(json.dumps(results))
    dist.destroy_process_group()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def collective_times(world: int = 2) -> dict[str, list[float]]:
    """Median seconds per message size and collective kind, measured on `world` local gloo ranks."""
    import json

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(_collective_worker, args=(world, _free_port(), out_dir), nprocs=world, start_method="spawn")
        return json.loads(Path(out_dir, "collectives.json").read_text())


def fit_link(sizes: list[int], seconds: list[float], passes: int, ranks: int = 2) -> dict[str, float]:
    """Least-squares t = a + s * bytes, read as the planner's ring: a = passes x latency,
    s = passes x (ranks-1)/ranks / bandwidth."""
    mean_x, mean_y = statistics.fmean(sizes), statistics.fmean(seconds)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, seconds)) / sum((x - mean_x) ** 2 for x in sizes)
    intercept = max(mean_y - slope * mean_x, 0.0)
    bytes_per_s = passes * (ranks - 1) / ranks / slope
    return {"gbps": bytes_per_s * 8 / 1e9, "latency_s": intercept / passes}


def host_memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def run_calibration(progress=print) -> dict[str, Any]:
    """Every measurement of the module docstring, as the JSON the planner reads."""
    import platform

    import torch

    cores = os.cpu_count() or 1
    threads = sorted({1, cores})
    progress(f"matmul {MATMUL_N}x{MATMUL_N}, threads {threads} ...")
    gflops = {dtype: {str(t): matmul_gflops(dtype, t) for t in threads} for dtype in ("fp32", "bf16")}
    patterns = step_patterns(cores)
    progress(f"{CALIBRATION_MODEL} forward+backward, concurrent (processes, threads) {patterns} ...")
    steps = [concurrent_model_steps(processes, threads) for processes, threads in patterns]
    optimizer_gbps = next(s["optimizer_gbps"] for s in steps if s["processes"] == 1 and s["threads"] == cores)
    progress("gloo collectives, 2 ranks, 4 KiB .. 16 MiB ...")
    times = collective_times()
    collectives = {
        kind: {**fit_link(MESSAGE_SIZES, times[kind], PASSES[kind]), "sizes": MESSAGE_SIZES, "seconds": times[kind]}
        for kind in PASSES
    }
    return {
        "schema_version": 1,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "torch": torch.__version__,
        "cores": cores,
        "memory_gib": host_memory_gib(),
        "matmul_gflops": gflops,
        "model_step": {
            "model": CALIBRATION_MODEL,
            "seq_len": 256,
            "micro_batch": 1,
            "dtype": "fp32",
            "patterns": steps,
        },
        "optimizer_gbps": optimizer_gbps,
        "collectives": collectives,
    }
