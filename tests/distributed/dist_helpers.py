"""Real gloo ranks for the distributed tests: a runner for in-rank checks and engine launches.

`run_ranks(world_size, jobs, work_dir)` starts world_size Python processes (one per rank,
env:// rendezvous on 127.0.0.1), runs rank_checks functions in each, and returns every rank's
results. `run_engine(specs, results_dir)` runs points through the real launcher (torchrun
agents, the worker, result records), exactly as `fsdp-bench run` does. `once_per_session`
(tests/shared_launch.py, which the e2e tests use too; named here for the distributed ones) makes a
session fixture's launch happen once per test session, also when pytest-xdist spreads the files
that use it over several workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shared_launch import once_per_session  # noqa: F401 (the distributed tests import it from here)

from bench.config.compose import spec_from_fields
from bench.run.execute import run_group
from bench.run.launch.base import kill_process_group
from bench.run.launch.local import LocalLauncher
from bench.run.launch.ports import free_port
from bench.schema.record import RunResult
from bench.schema.spec import RunSpec

HERE = Path(__file__).resolve().parent
RANK_TIMEOUT_S = 180  # generous: two cores are shared with the rest of the suite


def _rank_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
    )
    return env


def run_ranks(world_size: int, jobs: dict[str, tuple[str, dict]], work_dir: Path) -> list[dict]:
    """Run `jobs` ({name: ("rank_checks:function", kwargs)}) on world_size ranks; results in rank order."""
    work_dir.mkdir(parents=True, exist_ok=True)
    port, procs = free_port(), []
    command = [sys.executable, str(HERE / "rank_entry.py"), json.dumps(jobs), str(work_dir)]
    for rank in range(world_size):
        with open(work_dir / f"rank{rank}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    command,
                    env=_rank_env(rank, world_size, port),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    deadline = time.monotonic() + RANK_TIMEOUT_S
    try:
        codes = [proc.wait(timeout=max(0.0, deadline - time.monotonic())) for proc in procs]
    except subprocess.TimeoutExpired:
        codes = [None] * world_size
    finally:
        for proc in procs:
            kill_process_group(proc, grace_s=1.0)
    if codes != [0] * world_size:
        logs = "\n".join(
            f"--- rank {r} ---\n{(work_dir / f'rank{r}.log').read_text()[-3000:]}" for r in range(world_size)
        )
        pytest.fail(f"ranks exited with {codes}:\n{logs}")
    return [json.loads((work_dir / f"rank{r}.json").read_text()) for r in range(world_size)]


def run_engine(specs: list[RunSpec], results_dir: Path) -> dict[str, RunResult]:
    """Run points through the local launcher (grouped into one launch per world shape); records by point id."""
    shapes: dict[tuple[int, int], list[RunSpec]] = {}
    for spec in specs:
        shapes.setdefault((spec.nodes, spec.gpus_per_node), []).append(spec)
    records = {}
    for group in shapes.values():
        for record in run_group(group, LocalLauncher(), results_dir):
            records[record.point_id] = record
    return records


def debug_spec(**fields) -> RunSpec:
    """A short `debug` point: 3 steps (1 warm-up), sequence 32, one thread per rank (fields as
    bench.config.compose.spec_from_fields takes them)."""
    base = {"model": "debug", "seq_len": 32, "steps": 3, "warmup_steps": 1, "threads_per_rank": 1, "sweep.name": "dist"}
    return spec_from_fields(**{**base, **fields})


STRATEGIES = ("full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard")
# label -> spec fields. World size 1 with micro_batch 2 and world size 2 with micro_batch 1 train on the
# same global batch (data rows are seeded per global row). Hybrid strategies at world size 2 run as
# 2 "nodes" x 1 rank; the others as 1 node x 2 ranks. The extra full_shard points serve the comm tests.
ENGINE_POINTS = {
    **{f"{s}/ws1": {"strategy": s, "micro_batch": 2} for s in STRATEGIES},
    **{f"{s}/ws2": {"strategy": s, "nodes": 2} for s in STRATEGIES if s.startswith("hybrid")},
    **{f"{s}/ws2": {"strategy": s, "gpus_per_node": 2} for s in STRATEGIES if not s.startswith("hybrid")},
    "full_shard/ws2/ga2": {"strategy": "full_shard", "gpus_per_node": 2, "grad_accum": 2},
    "full_shard/ws2/bf16": {"strategy": "full_shard", "gpus_per_node": 2, "precision": "bf16"},
    "full_shard/ws2/bf16_pure": {"strategy": "full_shard", "gpus_per_node": 2, "precision": "bf16_pure"},
}

# Points whose counted bytes come from in-rank launches (engine_checks.loop_comm_bytes_report) rather
# than engine launches of their own: hybrid_shard on a 2 x 2 mesh (shard within the "node", all-reduce
# across) runs with ws4_reports' ranks.
LOOP_POINTS_2X2 = {
    "hybrid_shard/2x2": {"strategy": "hybrid_shard", "nodes": 2, "gpus_per_node": 2},
    "hybrid_shard/2x2/bf16": {"strategy": "hybrid_shard", "nodes": 2, "gpus_per_node": 2, "precision": "bf16"},
}


def spec_jobs(points: dict[str, dict]) -> dict[str, str]:
    """label -> the debug_spec of the point's fields as JSON (an in-rank job's argument)."""
    return {label: debug_spec(**fields).model_dump_json() for label, fields in points.items()}


# The checkpoint checks (checkpoint_checks.py, asserted in test_checkpoint.py), one folder each.
CHECKPOINT_DIRS = ("sync", "async", "tiny_sync", "tiny_async", "hybrid", "failed", "slow_sync", "slow_async")
# What the slow listener of bookkeeping_report takes per save (2 saves): the window's unexplained rest
# must stay below one call; 2.5 s leaves room for what a loaded 2-core machine adds between timers
# (1.24 s once, with three xdist workers), against the 5 s that bookkeeping left out would be.
BOOKKEEPING_S = 2.5


def checkpoint_jobs(dirs: dict[str, str]) -> dict[str, tuple[str, dict]]:
    """The in-rank checkpoint jobs, writing into `dirs` (CHECKPOINT_DIRS -> a folder)."""
    return {
        "continuity_sync": ("checkpoint_checks:continuity_report", {"mode": "sync", "directory": dirs["sync"]}),
        "continuity_async": ("checkpoint_checks:continuity_report", {"mode": "async", "directory": dirs["async"]}),
        "bytes_sync": ("checkpoint_checks:bytes_report", {"mode": "sync", "directory": dirs["tiny_sync"]}),
        "bytes_async": ("checkpoint_checks:bytes_report", {"mode": "async", "directory": dirs["tiny_async"]}),
        "reshard": ("checkpoint_checks:reshard_report", {"directory": dirs["hybrid"]}),
        "failed_save": ("checkpoint_checks:failed_save_report", {"directory": dirs["failed"]}),
        **{
            f"bookkeeping_{mode}": (
                "checkpoint_checks:bookkeeping_report",
                {"mode": mode, "directory": dirs[f"slow_{mode}"], "seconds": BOOKKEEPING_S},
            )
            for mode in ("sync", "async")
        },
    }


# The profiled steps' split (engine_checks.profile_report, asserted in test_step_breakdown.py): label ->
# spec fields of a short profiled `debug` point. On 2 ranks: clean and each knob that moves one part;
# on 1 rank: full_shard (no collective) and no_shard (an all-reduce per FSDP unit on a group of one).
PROFILED = {"steps": 3, "warmup_steps": 1, "profile.enabled": True, "profile.steps": 2}
COMM_DELAY_MS, EXTRA_MATMULS, SLOW_FRACTION = 20.0, 1000, 1.0
PROFILE_POINTS_WS2 = {
    "clean": {"gpus_per_node": 2},
    "comm_delay": {"gpus_per_node": 2, "debug.comm_delay_ms": COMM_DELAY_MS},
    "extra_matmuls": {"gpus_per_node": 2, "debug.extra_matmuls": EXTRA_MATMULS},
    "slow_fraction": {"gpus_per_node": 2, "debug.slow_fraction": SLOW_FRACTION},
}
PROFILE_POINTS_WS1 = {"full_shard": {"strategy": "full_shard"}, "no_shard": {"strategy": "no_shard"}}


def profile_jobs(points: dict[str, dict], trace_dir: Path) -> dict[str, tuple[str, dict]]:
    """In-rank jobs of profiled points (`profile/<label>`), each leaving its traces in trace_dir/<label>."""
    return {
        f"profile/{label}": (
            "engine_checks:profile_report",
            {"spec": debug_spec(**PROFILED, **fields).model_dump_json(), "trace_dir": str(trace_dir / label)},
        )
        for label, fields in points.items()
    }


# The GPU-path numerics (numerics_checks.py, asserted in test_gpu_path_numerics.py): precision -> the
# dtype a block's input has.
BLOCK_PRECISIONS = {"fp32": "float32", "bf16": "bfloat16", "bf16_pure": "bfloat16", "fp16": "float16"}


def gpu_path_jobs() -> dict[str, tuple[str, dict]]:
    return {
        "fp16_fused": ("numerics_checks:fp16_overflow_report", {"fused": True}),
        "fp16_foreach": ("numerics_checks:fp16_overflow_report", {"fused": False}),
        **{f"blocks/{p}": ("numerics_checks:block_input_report", {"precision": p}) for p in BLOCK_PRECISIONS},
        "blocks/bf16/ac_full": (
            "numerics_checks:block_input_report",
            {"precision": "bf16", "activation_checkpointing": "full"},
        ),
        "comm": ("numerics_checks:functional_comm_report", {}),
        # 2**40: every step's fp16 gradients overflow (5 halvings leave the scale far above what fits);
        # 1.0: none does; None: fp32, no scaler.
        "skips/overflow": ("numerics_checks:scaler_skip_report", {"init_scale": 2.0**40}),
        "skips/clean": ("numerics_checks:scaler_skip_report", {"init_scale": 1.0}),
        "skips/fp32": ("numerics_checks:scaler_skip_report", {"init_scale": None}),
    }
