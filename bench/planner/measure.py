"""What `fsdp-bench calibrate` measures on this machine (imports torch; only the command uses it).

- matmul FLOP/s per dtype (fp32, bf16) and thread count: square 1024 x 1024 matmuls, the
  median of repeated timings;
- the achievable fraction of that on a real training step: forward and backward of the `tiny`
  flavor (its default sequence 256, micro-batch 1, fp32) per thread count, its hardware FLOPs
  (fsdp_core/flops.py) over the time, divided by the fp32 matmul rate at that thread count;
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


def model_step(threads: int, min_time: float = 1.5) -> dict[str, float]:
    """Seconds of forward+backward and of one AdamW step for the calibration model."""
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

    seconds = _median_time(forward_backward, min_time)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, foreach=True)
    opt_seconds = _median_time(optimizer.step, min_time / 3)
    params = sum(p.numel() for p in model.parameters())
    return {
        "seconds": seconds,
        "tflops": seq * hardware_flops_per_token(args, seq, "none") / seconds / 1e12,
        "optimizer_s": opt_seconds,
        "params": params,
    }


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
    progress(f"{CALIBRATION_MODEL} forward+backward and AdamW, threads {threads} ...")
    steps = {str(t): model_step(t) for t in threads}
    efficiency = {t: s["tflops"] * 1e3 / gflops["fp32"][t] for t, s in steps.items()}
    optimizer = steps[str(cores)]
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
            "seq_len": _tiny_model()[0].default_seq_len,
            "micro_batch": 1,
            "seconds": {t: s["seconds"] for t, s in steps.items()},
            "efficiency": efficiency,
        },
        "optimizer_gbps": 28 * optimizer["params"] / optimizer["optimizer_s"] / 1e9,
        "collectives": collectives,
    }
