"""One process on GPU 0 for tests/gpu/test_gpu_memory_checkpoint.py: `python gpu_memory_checkpoint_job.py OUT_DIR`.

A world of one rank (NCCL for the device, gloo for DCP's group), the engine's own functions on a
plain module (a checkpoint's timing does not depend on FSDP): the timed window opened after the
allocator cached 4 GiB, and sync and async saves and a load each right after ~1 s of queued kernels
(`torch.cuda._sleep`). Writes OUT_DIR/report.json; asserts nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from bench.schema.spec import TrainSpec
from fsdp_core.checkpoint import Checkpointer
from fsdp_core.checkpoint_staging import reusable
from fsdp_core.metrics import memory_snapshot, synchronize
from fsdp_core.train import start_timed_window

GIB = 2**30
QUEUED_S = 1.0  # the kernels queued before each save and load


def cycles_per_s(device: torch.device) -> float:
    """The GPU clock as torch.cuda._sleep sees it (it spins a number of cycles)."""
    torch.cuda._sleep(1000)
    synchronize(device)
    started = time.perf_counter()
    torch.cuda._sleep(200_000_000)
    synchronize(device)
    return 200_000_000 / (time.perf_counter() - started)


def memory_report(device: torch.device) -> dict:
    """4 GiB allocated and freed before the window (the allocator keeps it cached), then a small step."""
    cached = torch.empty(4 * GIB, dtype=torch.uint8, device=device)
    del cached
    reserved_before = torch.cuda.memory_reserved(device)
    _, counts = start_timed_window(device)
    x = torch.randn(1024, 1024, device=device)
    (x @ x).sum().item()
    return {"reserved_before_window": int(reserved_before), "at_start": counts, **memory_snapshot(device, counts)}


def checkpoint_report(mode: str, directory: Path, device: torch.device, rate: float) -> dict:
    """Two saves and a load of a 4096 x 4096 linear layer with fused AdamW (~200 MB of state), each
    after QUEUED_S of queued kernels; the host time each call took beside what it recorded."""
    model = torch.nn.Linear(4096, 4096, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    model(torch.randn(8, 4096, device=device)).sum().backward()
    optimizer.step()
    train = TrainSpec(steps=2, warmup_steps=0, checkpoint=mode, checkpoint_every=1)
    ckpt = Checkpointer(train, str(directory), "gpu", model, optimizer, None, dt.timedelta(seconds=120), device)
    ckpt.start()
    calls = []
    for step in range(2):
        torch.cuda._sleep(int(QUEUED_S * rate))
        started = time.perf_counter()
        ckpt.after_step(step)
        calls.append(time.perf_counter() - started)
    ckpt.close()
    torch.cuda._sleep(int(QUEUED_S * rate))
    started = time.perf_counter()
    ckpt.measure_load()
    calls.append(time.perf_counter() - started)
    return {"section": ckpt.summary(device).model_dump(mode="json"), "calls_s": calls}


def main(out_dir: Path) -> None:
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    store = dist.HashStore()
    dist.init_process_group("cpu:gloo,cuda:nccl", store=store, rank=0, world_size=1, device_id=device)
    try:
        report = {"memory": memory_report(device), "reusable": reusable()}
        rate = cycles_per_s(device)
        report["cycles_per_s"] = rate
        for mode in ("sync", "async"):
            report[mode] = checkpoint_report(mode, out_dir / f"ckpt_{mode}", device, rate)
    finally:
        dist.destroy_process_group()
    (out_dir / "report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
