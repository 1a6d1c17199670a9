"""What `fsdp-bench calibrate` measures on this machine (imports torch; only the command uses it).

- matmul FLOP/s per dtype (fp32, bf16) and thread count: square 1024 x 1024 matmuls, the
  median of repeated timings;
- what the engine's own training step achieves: the `tiny` flavor built, FSDP2-wrapped and
  materialised by fsdp_core.worker.build_training on a one-rank gloo group (sequence 256,
  micro-batch 1, fp32), its forward+backward hardware FLOPs (bench/schema/flops.py) per second,
  in each (processes, threads) pattern the local launcher produces (1 rank with every core, one
  thread per rank up to twice the cores), the processes running at the same time: FSDP's
  per-step work and vCPUs that share cores, caches or memory bandwidth show up here;
- AdamW's streaming rate: the same runs' optimizer steps, as bytes per second at the 28 bytes
  per parameter the planner charges;
- gloo all-gather, reduce-scatter and all-reduce times by message size (4 KiB to 16 MiB)
  between 2 real local ranks (torch.multiprocessing, one thread each), fitted to the ring model
  t = passes x (latency + bytes / 2 / bandwidth) the planner uses; measured on idle cores (what
  the planner uses: a rank blocked on a collective leaves its core to gloo, and the planner
  counts CPU communication as not overlapped) and, for information, with each rank's core kept
  busy by a compute thread (several times slower);
- the host's total memory, which all local ranks share.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.analysis.planner.calibration import CALIBRATION
from bench.analysis.planner.comm import RING_PASSES
from bench.run.launch.ports import free_port

MATMUL_N = 1024
MESSAGE_SIZES = [2**k for k in range(12, 25, 2)]  # 4 KiB .. 16 MiB
CALIBRATION_MODEL = "tiny"
# (micro-batch, sequence) of the calibration step: the flavor's default sequence, one row.
CALIBRATION_BATCH = (1, 256)
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


def _wait_for_peers(out_dir: str, index: int, processes: int) -> None:
    """A file barrier: every process has built its model before any starts timing."""
    Path(out_dir, f"ready{index}").touch()
    while len(list(Path(out_dir).glob("ready*"))) < processes:
        time.sleep(0.01)


def _engine_model(threads: int, port: int):
    """The engine's FSDP2-wrapped model and AdamW (fsdp_core.worker.build_training) on a one-rank group."""
    import torch
    import torch.distributed as dist

    from bench.config.compose import spec_from_fields
    from fsdp_core.worker import build_training

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    spec = spec_from_fields(model=CALIBRATION_MODEL)
    model, optimizer, _ = build_training(spec, torch.device("cpu"))
    return spec.model, model, optimizer


def _time_engine_step(model, optimizer, args, duration: float) -> dict[str, float]:
    """Median seconds of forward+backward and of the optimizer step, as fsdp_core.train runs them."""
    import torch
    import torch.nn.functional as F

    micro_batch, seq = CALIBRATION_BATCH
    tokens = torch.randint(0, args.vocab_size, (micro_batch, seq + 1))
    forward_times, optimizer_times = [], []
    start = time.perf_counter()
    while len(forward_times) < 4 or time.perf_counter() - start < duration:
        t0 = time.perf_counter()
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten()).backward()
        t1 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        forward_times.append(t1 - t0)
        optimizer_times.append(time.perf_counter() - t1)
    # The first step allocates optimizer state and warms the allocator: leave it out.
    return {"seconds": statistics.median(forward_times[1:]), "optimizer_s": statistics.median(optimizer_times[1:])}


def _model_step_worker(
    index: int, processes: int, threads: int, ports: list[int], duration: float, out_dir: str
) -> None:
    """One of `processes` concurrent processes timing the engine's training step."""
    import json

    import torch.distributed as dist

    from bench.schema.flops import hardware_flops_per_token

    args, model, optimizer = _engine_model(threads, ports[index])
    _wait_for_peers(out_dir, index, processes)
    timed = _time_engine_step(model, optimizer, args, duration)
    micro_batch, seq = CALIBRATION_BATCH
    timed["gflops"] = micro_batch * seq * hardware_flops_per_token(args, seq, "none") / timed["seconds"] / 1e9
    timed["optimizer_gbps"] = 28 * args.params / timed["optimizer_s"] / 1e9
    Path(out_dir, f"step{index}.json").write_text(json.dumps(timed))
    dist.destroy_process_group()


def concurrent_model_steps(processes: int, threads: int, duration: float = 2.0) -> dict[str, float]:
    """Per-process hardware GFLOP/s of the engine's forward+backward (and AdamW's streaming rate)
    when `processes` processes of `threads` threads each run at once, as the local launcher's ranks do."""
    import json

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as out_dir:
        ports = [free_port() for _ in range(processes)]
        mp.start_processes(
            _model_step_worker,
            args=(processes, threads, ports, duration, out_dir),
            nprocs=processes,
            start_method="spawn",
        )
        results = [json.loads(Path(out_dir, f"step{i}.json").read_text()) for i in range(processes)]
    return {
        "processes": processes,
        "threads": threads,
        "gflops_per_process": statistics.median(r["gflops"] for r in results),
        "optimizer_gbps": statistics.median(r["optimizer_gbps"] for r in results),
    }


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


def _busy_core(stop) -> None:
    """Keep this rank's core busy with small matmuls, as its compute thread is during training."""
    import torch

    a, b = torch.randn(256, 256), torch.randn(256, 256)
    while not stop.is_set():
        torch.mm(a, b)


def _collective_worker(rank: int, world: int, port: int, out_dir: str, loaded: bool) -> None:
    import json
    import warnings

    import torch
    import torch.distributed as dist

    # torch 2.13 renames the tensor collectives; the old names are what FSDP2's gloo path runs.
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    stop = threading.Event()
    if loaded:
        threading.Thread(target=_busy_core, args=(stop,), daemon=True).start()
    results: dict[str, list[float]] = {kind: [] for kind in RING_PASSES}
    for size in MESSAGE_SIZES:
        for kind, op in _collective_ops(size, world).items():
            dist.barrier()
            results[kind].append(_median_time_fixed(op, COLLECTIVE_REPS))
    stop.set()
    if rank == 0:
        Path(out_dir, "collectives.json").write_text(json.dumps(results))
    dist.destroy_process_group()


def collective_times(loaded: bool, world: int = 2) -> dict[str, list[float]]:
    """Median seconds per message size and collective kind on `world` local gloo ranks; `loaded`:
    with each rank's core kept busy by a compute thread, as during training."""
    import json

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(
            _collective_worker, args=(world, free_port(), out_dir, loaded), nprocs=world, start_method="spawn"
        )
        return json.loads(Path(out_dir, "collectives.json").read_text())


def fit_collectives(times: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    return {
        kind: {
            **fit_link(MESSAGE_SIZES, times[kind], RING_PASSES[kind]),
            "sizes": MESSAGE_SIZES,
            "seconds": times[kind],
        }
        for kind in RING_PASSES
    }


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
    progress(f"engine step of {CALIBRATION_MODEL} on one rank, concurrent (processes, threads) {patterns} ...")
    steps = [concurrent_model_steps(processes, threads) for processes, threads in patterns]
    optimizer_gbps = next(s["optimizer_gbps"] for s in steps if s["processes"] == 1 and s["threads"] == cores)
    progress("gloo collectives, 2 ranks, 4 KiB .. 16 MiB, cores busy and idle ...")
    collectives = fit_collectives(collective_times(loaded=False))
    busy = fit_collectives(collective_times(loaded=True))
    return {
        "schema_version": CALIBRATION.current,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "torch": torch.__version__,
        "cores": cores,
        "memory_gib": host_memory_gib(),
        "matmul_gflops": gflops,
        "model_step": {
            "model": CALIBRATION_MODEL,
            "micro_batch": CALIBRATION_BATCH[0],
            "seq_len": CALIBRATION_BATCH[1],
            "dtype": "fp32",
            "patterns": steps,
        },
        "optimizer_gbps": optimizer_gbps,
        "collectives": collectives,
        "collectives_busy": busy,
    }
