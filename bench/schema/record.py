"""The result record (`RESULTS/<sweep>/<point_id>/result.json`): what a point yields, failures included."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from bench.schema.base import Status, Strict
from bench.schema.breakdown import StepBreakdown
from bench.schema.checkpoint import CheckpointMetrics
from bench.schema.env import EnvInfo, HostLoad
from bench.schema.hang import HangVerdict
from bench.schema.job import JobMetrics
from bench.schema.model import ModelInfo
from bench.schema.preflight import PreflightSummary
from bench.schema.recipes import PRECISIONS, STRATEGIES
from bench.schema.spec import RunSpec
from bench.schema.telemetry import Telemetry

# The record's shape, the one home of its version: rank 0 writes it, bench.analysis.records reads it
# (older versions are migrated on read, bench/schema/migrations).
# 3: derived values stored where the record is made (metrics.checkpoint.write_bytes_per_s):
#    bench/schema/migrations/v2.py; metrics.scaler_skipped_steps (null in older records: not counted).
# 4: metrics.job, the whole job's accounting, metrics.step_breakdown, the profiled steps' split (its ops
#    summary too), metrics.peak_mem_by_category (profile.memory_categories), and
#    hang, a timeout's Flight Recorder verdict (all optional: null in older records); bench/schema/migrations/v3.py.
SCHEMA_VERSION = 4


class StepTimeStats(Strict):
    median: float
    mean: float
    p10: float
    p90: float
    cv: float


class PeakMemory(Strict):
    """Memory over the timed steps. `max`/`per_rank`: the allocator's peak allocated (GPU) or the
    process's peak resident set size (CPU); the rest are GPU only (null on CPU)."""

    max: int
    per_rank: list[int]
    reserved_max: int | None = None
    reserved_per_rank: list[int] = Field(default_factory=list)
    device_used_max: int | None = None
    alloc_retries: int | None = None


class CompileInfo(Strict):
    """What torch.compile did during the point (fsdp_core/compile_stats.py)."""

    graphs: int
    cache_entries: int
    graph_breaks: int


class CommBytes(Strict):
    all_gather: int
    reduce_scatter: int
    all_reduce: int


class Metrics(Strict):
    """Measured numbers; null (with a reason in RunResult.notes) when they cannot be measured."""

    # The worker adds the sections measured after the throughput (telemetry, checkpoint, compile):
    # checked as they are set.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    tokens_per_s: float | None = None
    tokens_per_s_per_device: float | None = None
    step_times_s: list[float] = Field(default_factory=list)
    step_time_s: StepTimeStats | None = None
    mfu: float | None = None
    mfu_fp8_peak: float | None = None
    hfu: float | None = None
    tflops_per_device: float | None = None
    peak_flops_per_device: float | None = None
    peak_mem_bytes: PeakMemory | None = None
    comm_bytes_per_step: CommBytes | None = None
    loss_first: float | None = None
    loss_last: float | None = None
    losses: list[float] = Field(default_factory=list)
    flops_per_token: float | None = None
    tokens_per_step: int | None = None
    timed_window_s: float | None = None
    compile: CompileInfo | None = None
    telemetry: Telemetry | None = None
    checkpoint: CheckpointMetrics | None = None
    # Every second of the point over all its attempts (bench/schema/job.py); null in older records.
    job: JobMetrics | None = None
    # profile.enabled: the profiled steps' split into compute, exposed communication and idle.
    step_breakdown: StepBreakdown | None = None
    # profile.memory_categories: FSDP2's memory tracker's categories (bytes) at the moment of the total's
    # peak, of the rank whose peak was largest ("Sharded Param", ..., "Total").
    peak_mem_by_category: dict[str, int] | None = None
    # Each rank's median busy time per step (up to the step's closing synchronisation: on CPU the
    # time before the barrier, so a straggler shows; on GPU CUDA-event time, which includes waits
    # inside collectives) and the slowest of them.
    rank_step_time_medians_s: list[float] = Field(default_factory=list)
    slowest_rank: int | None = None
    host_load: list[HostLoad] = Field(default_factory=list)
    # fp16: timed steps whose optimizer step the gradient scaler skipped (inf/NaN gradients on some
    # rank); null without a scaler (and in records from before it was counted).
    scaler_skipped_steps: int | None = None


class Recipe(Strict):
    """The strategy and precision recipes a point ran with (bench/schema/recipes.py, as they were)."""

    strategy: dict[str, Any]
    precision: dict[str, Any]


class RunResult(Strict):
    """One point's record: `RESULTS/<sweep>/<point_id>/result.json` (bench/analysis/records.py reads older versions)."""

    schema_version: Literal[4] = SCHEMA_VERSION
    point_id: str
    sweep: str
    status: Status
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    wall_s: float | None = None
    spec: RunSpec
    recipe: Recipe | None = None
    model_info: ModelInfo
    metrics: Metrics = Field(default_factory=Metrics)
    env: EnvInfo = Field(default_factory=EnvInfo)
    notes: dict[str, str] = Field(default_factory=dict)
    prediction: dict[str, Any] | None = None
    # The preflight of this point's world shape, when the sweep ran one (sweep.preflight=true):
    # what it measured, in brief, and where its record is.
    preflight: PreflightSummary | None = None
    # A `timeout` record's verdict from the ranks' Flight Recorder dumps (bench/analysis/hang.py).
    hang: HangVerdict | None = None
    log_dir: str | None = None


def recipe_of(spec: RunSpec) -> Recipe:
    return Recipe(strategy=STRATEGIES[spec.strategy].as_dict(), precision=PRECISIONS[spec.precision].as_dict())


def model_info(spec: RunSpec) -> ModelInfo:
    return spec.model.info()


def rank_record_json(record: RunResult) -> dict[str, Any]:
    """The record as rank 0 writes it (fsdp_core/worker.py): the fields it filled, so a section it never
    measured is absent rather than null (no `metrics.telemetry` with telemetry.enabled=false, no
    `metrics.checkpoint` without checkpoints, no `metrics.step_breakdown` without profiling, a CPU point's `peak_mem_bytes` without the GPU views), as
    records have always been written. Reading fills the defaults back in: both read the same. The
    version is always written, also where the constructor left it at its default."""
    return {"schema_version": record.schema_version, **record.model_dump(mode="json", exclude_unset=True)}
