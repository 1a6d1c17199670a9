"""In-rank checks of the engine's process-level behaviour (meshes, the memory window, the counted bytes).

Run through rank_entry.py like rank_checks.py: each returns JSON-able observations, the tests
in this folder assert on them.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import torch
import torch.distributed as dist
from rank_checks import ARGS, CPU, SEQ_LEN, build, point

from bench.schema.spec import RunSpec, TelemetrySpec
from fsdp_core.data import SyntheticTokens, build_source
from fsdp_core.parallelize import build_mesh
from fsdp_core.step_split import rank_medians
from fsdp_core.train import run_loop
from fsdp_core.worker import build_training

TIMEOUT = dt.timedelta(seconds=123)


def _group_timeout_s(group) -> float:
    return group._get_backend(CPU).options._timeout.total_seconds()


def mesh_report(nodes: int) -> dict:
    """Meshes of every strategy at this world shape, built twice (as two points of one launch do)."""
    world = dist.get_world_size()
    strategies = ("full_shard", "hybrid_shard", "no_shard", "hybrid_shard_zero2", "shard_grad_op")
    first = {s: build_mesh(s, nodes, world // nodes, "cpu", TIMEOUT) for s in strategies}
    groups_after_first = len(dist.distributed_c10d._world.pg_map)
    second = {s: build_mesh(s, nodes, world // nodes, "cpu", TIMEOUT) for s in strategies}
    meshes = {
        s: {
            "reused": first[s] is second[s],
            "shape": list(first[s].shape),
            "timeouts_s": {name: _group_timeout_s(first[s].get_group(name)) for name in first[s].mesh_dim_names},
        }
        for s in strategies
    }
    return {
        "meshes": meshes,
        "new_groups_second_time": len(dist.distributed_c10d._world.pg_map) - groups_after_first,
        "default_timeout_s": _group_timeout_s(dist.group.WORLD),
    }


def peak_window_report(spike_mib: int = 512) -> dict:
    """run_loop's peak memory with a large allocation during the warm-up step only.

    The spike is freed before the timed steps start, so a peak taken over the timed window must
    not contain it (the allocation is a fresh mmap'd block: freeing it returns it to the kernel).
    """
    model = build("full_shard")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    calls = {"n": 0, "rss_before_spike": 0}

    def spike(module, args):
        if calls["n"] == 0:
            calls["rss_before_spike"] = _rss_bytes()
            block = torch.ones(spike_mib * 2**20 // 4)  # touched: resident, not just reserved
            del block
        calls["n"] += 1

    model.register_forward_pre_hook(spike)
    spec = point(steps=3, warmup_steps=1)
    loop = run_loop(model, optimizer, None, SyntheticTokens(ARGS.vocab_size, seed=0), spec, CPU)
    return {"peak": loop.memory["allocated"], "rss_before_spike": calls["rss_before_spike"], "spike": spike_mib * 2**20}


def telemetry_report(point_dir: str) -> dict:
    """run_loop with telemetry at 10 ms and off, then the gather over the real group (rank 0 writes
    the sidecar into point_dir and summarises)."""
    import threading

    from fsdp_core.telemetry import gather_telemetry

    model = build("full_shard")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    loops = {}
    for interval in (10, None):
        spec = point(steps=4, warmup_steps=1, telemetry=TelemetrySpec(enabled=interval is not None,
                                                                      interval_ms=interval or 100))  # fmt: skip
        loops[interval] = run_loop(model, optimizer, None, SyntheticTokens(ARGS.vocab_size, seed=0), spec, CPU)
    on, off = loops[10], loops[None]
    summary = gather_telemetry(on.telemetry, point_dir, tokens=3 * SEQ_LEN * 2, window_s=on.timed_window_s,
                               device_type="cpu")  # fmt: skip
    times = on.telemetry["columns"]["t_s"]
    return {
        "rank": dist.get_rank(),
        "window_s": on.timed_window_s,
        "first_t_s": times[0],
        "last_t_s": times[-1],
        "samples": len(times),
        "sampler_threads_alive": sum(t.name == "fsdp-bench-telemetry" for t in threading.enumerate()),
        "off": off.telemetry,
        "summary": summary.model_dump(mode="json") if summary is not None else None,
    }


def loop_comm_bytes_report(specs: dict[str, str]) -> dict[str, dict[str, int]]:
    """The communication bytes per step the engine counts for each point (label -> RunSpec JSON):
    its model, optimizer and scaler as the worker builds them (fsdp_core.worker.build_training), its
    data source, and the worker's loop (fsdp_core.train.run_loop counts the last warm-up step). The
    record's `comm_bytes_per_step` is this count; here one launch of ranks serves several points."""
    return {label: loop.comm_bytes.model_dump() for label, loop in trained_points(specs)}


def trained_points(specs: dict[str, str]):
    """(label, the worker's loop result) for each point (label -> RunSpec JSON), trained in turn in this
    launch: its model, optimizer and scaler as the worker builds them, its data source, the worker's loop."""
    for label, text in specs.items():
        spec = RunSpec.model_validate_json(text)
        model, optimizer, scaler = build_training(spec, CPU, TIMEOUT)
        source = build_source(spec.train.data, spec.model.vocab_size, spec.train.seed)
        yield label, run_loop(model, optimizer, scaler, source, spec, CPU)
        del model, optimizer, scaler


def _rss_bytes() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def profile_report(spec: str, trace_dir: str) -> dict:
    """A point's profiled steps as the worker's loop runs them (profile.enabled in `spec`, a RunSpec
    as JSON): this rank's split (the median over its profiled steps), the step timer's times of the
    same steps, the collectives CommCounter saw on the counted step and the trace file it left."""
    spec = RunSpec.model_validate_json(spec)
    model, optimizer, scaler = build_training(spec, CPU, TIMEOUT)
    source = build_source(spec.train.data, spec.model.vocab_size, spec.train.seed)
    loop = run_loop(model, optimizer, scaler, source, spec, CPU, trace_dir=Path(trace_dir))
    profile = loop.profile
    return {
        "split": rank_medians(profile.split),
        "steps": len(profile.split["steps"]),
        "timer_steps_s": profile.timer_steps_s,
        "counted_calls": loop.comm_calls,
        "losses": len(loop.losses),
        "trace": profile.trace,
        "gzip_bytes": profile.gzip_bytes,
    }
