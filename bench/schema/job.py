"""`metrics.job` of a record: every second of a point, from the launch's resources running to its record.

The buckets are named after the goodput/badput taxonomy of Google's ml-goodput-measurement
(program start-up, initialization, checkpoint save, restore, wasted progress from a disruption,
recovery from it, profiling); `unattributed_s` is what no bucket holds, so the buckets and it add up
to `wall_s` exactly. How each is measured: docs/reliability.md ("Where a job's time goes").
"""

from __future__ import annotations

from pydantic import Field

from bench.schema.base import Strict

# The buckets that add up to the wall with `unattributed_s`, in the order of a point's life. The
# profiled steps' bucket (`profiling_s`) is null when the point profiled none.
BUCKETS: tuple[str, ...] = (
    "program_startup_s",
    "initialization_s",
    "restore_s",
    "step_startup_s",
    "productive_s",
    "checkpoint_save_s",
    "profiling_s",
    "wasted_progress_s",
    "recovery_s",
    "finalization_s",
)


class JobMetrics(Strict):
    """Whole-job accounting of one point over all its attempts (rank 0's clock)."""

    wall_s: float = Field(
        description="from the launch's resources running (the first point of a launch; a later point: its own "
        "start) to the record, over every attempt"
    )
    queued_s: float | None = Field(
        None, description="waiting for resources before the wall starts (not in it); null: not known to the launcher"
    )
    attempts: int = Field(1, ge=1, description="attempts at the point: 1 + the restarts after failures")
    steps_redone: int = Field(0, ge=0, description="steps that ran in an attempt a failure ended and ran again")
    job_goodput: float | None = Field(None, description="productive_s / wall_s")
    program_startup_s: float = Field(
        0.0,
        description="from the wall's start to the point's start in the worker: agents, rendezvous, the interpreter, "
        "imports; a restart's from its process start (the launch's first point carries the launch's)",
    )
    initialization_s: float = Field(
        0.0, description="device, process groups, mesh, model build and materialization, optimizer, checkpointer"
    )
    restore_s: float = Field(0.0, description="loading the checkpoint an attempt resumes from")
    step_startup_s: float = Field(
        0.0,
        description="the excess over the steady-state median step of each attempt's first steps (its warm-up "
        "count, at least one): compilation, allocator and cache warm-up",
    )
    productive_s: float = Field(0.0, description="the time of the steps whose result survived, less step_startup_s")
    checkpoint_save_s: float = Field(
        0.0, description="the loop held by saves (blocked_s + bookkeeping_s, and the attempt's journal)"
    )
    profiling_s: float | None = Field(None, description="profiled steps (null: the point profiled none)")
    wasted_progress_s: float = Field(
        0.0, description="steps a failure undid: from the save an attempt resumed from to the failure"
    )
    recovery_s: float = Field(0.0, description="from a failure to the restarted attempt's process start")
    finalization_s: float = Field(
        0.0, description="after the last step: the window's close, the measured load, pruning, the record"
    )
    unattributed_s: float = Field(0.0, description="wall_s less every bucket")
    startup_s: float | None = Field(
        None, description="program_startup_s + initialization_s + step_startup_s (the catalogue's job_startup_s)"
    )
    lost_s: float | None = Field(
        None, description="wasted_progress_s + recovery_s: what failures cost (the catalogue's job_lost_s)"
    )
    launch_startup_s: float | None = Field(
        None,
        description="the launch's start-up (launch start to its first point's start): in the first point's "
        "program_startup_s; every record of the launch carries it",
    )

    def bucket_sum(self) -> float:
        return sum(getattr(self, name) or 0.0 for name in BUCKETS)
