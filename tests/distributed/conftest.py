"""Session-scoped launches shared by the distributed tests: starting ranks is the expensive part.

Each runs once per test session (dist_helpers.once_per_session), however many pytest-xdist workers
run the files that use it.
"""

from __future__ import annotations

import json

import pytest
from dist_helpers import (
    CHECKPOINT_DIRS,
    ENGINE_POINTS,
    LOOP_POINTS_2X2,
    PROFILE_POINTS_WS1,
    PROFILE_POINTS_WS2,
    checkpoint_jobs,
    debug_spec,
    gpu_path_jobs,
    once_per_session,
    profile_jobs,
    run_engine,
    run_ranks,
    spec_jobs,
)

from bench.schema.record import RunResult


@pytest.fixture(scope="session")
def ws2_reports(tmp_path_factory) -> list[dict]:
    """Every in-rank check of 2 ranks, one launch: sharding, precision, the engine's peak window,
    activation checkpointing and telemetry, the checkpoint checks (each rank's report also names
    their folders, "checkpoint_dirs"), the GPU-path numerics and the profiled steps' split."""

    def launch() -> list[dict]:
        checkpoints = tmp_path_factory.mktemp("ckpt_ranks")
        dirs = {name: str(checkpoints / name) for name in CHECKPOINT_DIRS}
        jobs = {
            "full_shard": ("rank_checks:sharding_report", {"strategy": "full_shard"}),
            "shard_grad_op": ("rank_checks:sharding_report", {"strategy": "shard_grad_op"}),
            "no_shard": ("rank_checks:sharding_report", {"strategy": "no_shard"}),
            **{p: ("rank_checks:precision_report", {"precision": p}) for p in ("fp32", "bf16", "bf16_pure", "fp16")},
            "peak_window": ("engine_checks:peak_window_report", {}),
            "activation_checkpointing": ("rank_checks:activation_checkpointing_losses", {}),
            "telemetry": (
                "engine_checks:telemetry_report",
                {"point_dir": str(tmp_path_factory.getbasetemp() / "ws2_telemetry_point")},
            ),
            **checkpoint_jobs(dirs),
            **gpu_path_jobs(),
            **profile_jobs(PROFILE_POINTS_WS2, tmp_path_factory.getbasetemp() / "ws2_traces"),
        }
        reports = run_ranks(2, jobs, tmp_path_factory.mktemp("ws2"))
        return [{**report, "checkpoint_dirs": dirs} for report in reports]

    return once_per_session(tmp_path_factory, "ws2_reports", launch)


@pytest.fixture(scope="session")
def ws1_reports(tmp_path_factory) -> list[dict]:
    """Activation-checkpointing losses on one rank (compared with ws2_reports' two) and the profiled
    steps of full_shard and no_shard on a world of one."""
    jobs = {
        "activation_checkpointing": ("rank_checks:activation_checkpointing_losses", {}),
        **profile_jobs(PROFILE_POINTS_WS1, tmp_path_factory.getbasetemp() / "ws1_traces"),
    }
    return once_per_session(tmp_path_factory, "ws1_reports", lambda: run_ranks(1, jobs, tmp_path_factory.mktemp("ws1")))


@pytest.fixture(scope="session")
def ws4_reports(tmp_path_factory) -> list[dict]:
    """hybrid_shard on a 2x2 mesh (2 "nodes" of 2 ranks), one launch of 4 ranks."""
    jobs = {
        "hybrid": ("rank_checks:hybrid_report", {"nodes": 2}),
        "meshes": ("engine_checks:mesh_report", {"nodes": 2}),
        "loop_comm": ("engine_checks:loop_comm_bytes_report", {"specs": spec_jobs(LOOP_POINTS_2X2)}),
    }
    return once_per_session(tmp_path_factory, "ws4_reports", lambda: run_ranks(4, jobs, tmp_path_factory.mktemp("ws4")))


@pytest.fixture(scope="session")
def engine_records(tmp_path_factory) -> dict[str, RunResult]:
    """Records of ENGINE_POINTS, run by the real launcher and worker (three launches)."""
    specs = {label: debug_spec(**fields) for label, fields in ENGINE_POINTS.items()}

    def launch() -> dict[str, RunResult]:
        by_id = run_engine(list(specs.values()), tmp_path_factory.mktemp("engine"))
        return {label: by_id[spec.point_id] for label, spec in specs.items()}

    return once_per_session(tmp_path_factory, "engine_records", launch, dump_records, load_records)


def dump_records(records: dict[str, RunResult]) -> str:
    return json.dumps({label: record.model_dump(mode="json") for label, record in records.items()})


def load_records(text: str) -> dict[str, RunResult]:
    return {label: RunResult.model_validate_json(json.dumps(record)) for label, record in json.loads(text).items()}
