"""Checkpoint checks that run inside every rank (via rank_entry.py) and return JSON-able observations.

They drive fsdp_core.checkpoint's Checkpointer on the engine's own models (fsdp_core.parallelize), with
the engine's optimizer settings and data, writing real DCP files into a shared folder;
tests/distributed/test_checkpoint.py asserts on the reports.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from rank_checks import CPU, build_point, local, point
from torch.distributed.tensor import DTensor

from bench.config.compose import flavors
from bench.schema.record import Metrics
from bench.schema.spec import TelemetrySpec
from fsdp_core import checkpoint
from fsdp_core.checkpoint import Checkpointer
from fsdp_core.data import SyntheticTokens
from fsdp_core.metrics import max_over_ranks
from fsdp_core.train import run_loop, train_step

TIMEOUT = dt.timedelta(seconds=120)


def checkpointed(strategy="full_shard", nodes=1, mode="sync", model_name="debug", steps=8, **fields):
    """The point: `steps` steps (no warm-up unless `fields` say so), a `mode` save after every timed one."""
    every = {"checkpoint_every": 1} if mode != "none" else {}
    fields = {"warmup_steps": 0, **every, **fields}
    return point(strategy, nodes=nodes, model=flavors()[model_name], steps=steps, checkpoint=mode, **fields)


def trainer(strategy="full_shard", nodes=1, mode="sync", directory="", model_name="debug", steps=8):
    """A fresh engine model, AdamW as the engine builds it on CPU (train.lr's default) and a
    Checkpointer saving after every step into `directory`."""
    spec = checkpointed(strategy, nodes, mode, model_name, steps)
    model = build_point(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, weight_decay=0.1, foreach=True)
    return model, optimizer, Checkpointer(spec.train, directory, "", model, optimizer, None, TIMEOUT, CPU)


def run_steps(model, optimizer, steps: range) -> list[float]:
    """The engine's training steps on its synthetic data (train.data=synthetic, train.seed=0)."""
    source = SyntheticTokens(model.args.vocab_size, seed=0)
    spec = checkpointed()
    return [float(train_step(model, optimizer, None, source, spec, step, CPU)) for step in steps]


def full_state(model, optimizer) -> dict[str, torch.Tensor]:
    """Every parameter and AdamW moment, whole (gathered from the shards), by name."""
    state = {f"param:{n}": p.full_tensor() for n, p in model.named_parameters()}
    names = {id(p): n for n, p in model.named_parameters()}
    for param, values in optimizer.state.items():
        for key, value in values.items():
            state[f"{key}:{names[id(param)]}"] = value.full_tensor() if isinstance(value, DTensor) else value.clone()
    return state


def continuity_report(mode: str, directory: str) -> dict:
    """Train 2 steps with a save after each, train 2 more (the uninterrupted run); a fresh model
    loaded from the second save trains the same 2 steps. Async: training goes on while the save is
    written, so the checkpoint must hold the state staged at save time, not what the later steps made
    of it; and the second save staged into the buffers the first one used (one stager per
    checkpointer, fsdp_core/checkpoint_staging.py), which must hold the second state. The losses are
    this rank's (its rows of the global batch); the engine records their mean over ranks."""
    model, optimizer, ckpt = trainer(mode=mode, directory=directory)
    ckpt.start()
    run_steps(model, optimizer, range(0, 1))
    ckpt.after_step(0)
    run_steps(model, optimizer, range(1, 2))
    ckpt.after_step(1)
    uninterrupted = run_steps(model, optimizer, range(2, 4))
    ckpt.close()
    fresh, fresh_optimizer, loader = trainer(mode="none", directory=directory)
    marker = loader.agreed_marker()  # rank 0 writes the marker: every rank must read rank 0's view
    loader.load_from(checkpoint.join(directory, marker.folder))
    continued = run_steps(fresh, fresh_optimizer, range(2, 4))
    ckpt.finish()  # the worker's end of a point: every rank loads the step rank 0 marked, then rank 0 prunes
    summary = ckpt.summary(CPU)
    return {"uninterrupted": uninterrupted, "continued": continued, "marker_step": marker.step,
            "save": summary.saves[-1].model_dump(mode="json"), "saves": len(summary.saves),
            "staging": summary.staging, "end_load_step": ckpt.load.step}  # fmt: skip


def bytes_report(mode: str, directory: str, model_name: str = "tiny") -> dict:
    """One save after a step: the tensor bytes DCP's metadata says each rank wrote, beside this rank's
    local shard sizes (parameters, and AdamW's two moments of the same shape) and the files on disk."""
    model, optimizer, ckpt = trainer(mode=mode, directory=directory, model_name=model_name)
    ckpt.start()
    run_steps(model, optimizer, range(0, 1))
    ckpt.after_step(0)
    ckpt.close()
    save = ckpt.summary(CPU).saves[0].model_dump(mode="json")
    folder = Path(directory) / ckpt.agreed_marker().folder
    return {
        "local_param_numel": sum(local(p).numel() for p in model.parameters()),
        "param_tensors": len(list(model.parameters())),
        "params": sum(p.numel() for p in model.parameters()),
        "save": save,
        "files_on_disk": sum(f.stat().st_size for f in folder.iterdir()),
    }


def reshard_report(directory: str) -> dict:
    """Save under hybrid_shard (2 "nodes" x 1 rank: replicated), load into full_shard (sharded 2 ways):
    the whole parameters and AdamW moments must come back bit-identical."""
    model, optimizer, ckpt = trainer("hybrid_shard", dist.get_world_size(), directory=directory)
    ckpt.start()
    run_steps(model, optimizer, range(0, 1))
    ckpt.after_step(0)
    saved = full_state(model, optimizer)
    fresh, fresh_optimizer, loader = trainer("full_shard", directory=directory)
    loader.load_from(checkpoint.join(directory, loader.agreed_marker().folder))
    loaded = full_state(fresh, fresh_optimizer)
    placements = {str(p.placements) for p in fresh.parameters()}
    return {
        "names": len(saved),
        "equal": sorted(k for k in saved if k in loaded and torch.equal(saved[k], loaded[k])),
        "loaded_placements": sorted(placements),
    }


class FailingWriter(dcp.FileSystemWriter):
    """A file system writer whose rank 1 fails while writing its data (a full disk, a lost mount)."""

    def write_data(self, plan, planner):
        if dist.get_rank() == 1:
            raise OSError("injected: no space left on device")
        return super().write_data(plan, planner)


def failed_save_report(directory: str) -> dict:
    """A save at step 0, then a save at step 1 that fails on rank 1: the marker must still name step 0,
    and step 0 must load back to the state it held."""
    model, optimizer, ckpt = trainer(directory=directory)
    ckpt.start()
    run_steps(model, optimizer, range(0, 1))
    ckpt.after_step(0)
    saved = full_state(model, optimizer)
    run_steps(model, optimizer, range(1, 2))
    real_writer = checkpoint.writer
    checkpoint.writer = FailingWriter
    try:
        ckpt.after_step(1)
        error = None
    except RuntimeError as exc:
        error = str(exc)
    finally:
        checkpoint.writer = real_writer
    dist.barrier()
    fresh, fresh_optimizer, loader = trainer(mode="none", directory=directory)
    marker = loader.agreed_marker()
    loader.load_from(checkpoint.join(directory, marker.folder))
    loaded = full_state(fresh, fresh_optimizer)
    return {
        "error": error,
        "directory": directory,
        "marker_step": marker.step,
        "restored": all(torch.equal(saved[k], loaded[k]) for k in saved),
        "step1_metadata": (Path(directory) / "step-00000001" / ".metadata").exists(),
    }


class SlowListener:
    """A checkpoint listener that takes `seconds` for every durable save, as Ray's report may."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_durable(self, step: int, location: str, point_id: str) -> None:
        time.sleep(self.seconds)

    def restore_location(self, point_id: str) -> str | None:
        return None


def bookkeeping_report(mode: str, directory: str, seconds: float) -> dict:
    """The engine's timed loop with a save after each of 2 timed steps, told to a listener that takes
    `seconds` per save: the record's checkpoint section, the step times and the window, as the
    worker reduces them (the slowest rank's)."""
    spec = checkpointed(mode=mode, steps=4, warmup_steps=2, telemetry=TelemetrySpec(enabled=False))
    model = build_point(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, weight_decay=0.1, foreach=True)
    ckpt = Checkpointer(spec.train, directory, "p", model, optimizer, None, TIMEOUT, CPU)
    checkpoint.set_listener(SlowListener(seconds))
    try:
        ckpt.start()
        loop = run_loop(model, optimizer, None, SyntheticTokens(spec.model.vocab_size, seed=0), spec, CPU, hook=ckpt)
    finally:
        checkpoint.set_listener(None)
    step_times = max_over_ranks(loop.step_times_s, CPU)
    (window,) = max_over_ranks([loop.timed_window_s], CPU)
    metrics = Metrics(tokens_per_s=spec.tokens_per_step / statistics.median(step_times), step_times_s=step_times,
                      tokens_per_step=spec.tokens_per_step, timed_window_s=window)  # fmt: skip
    section = ckpt.record_section(CPU, metrics)
    return {"section": section.model_dump(mode="json"), "step_times_s": step_times, "window_s": window}
