"""A preflight's record (`_preflight/<shape>/preflight.json`) and what a point's record keeps of it."""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import Field

from bench.schema.base import Status, Strict
from bench.schema.env import EnvInfo, HostLoad
from bench.schema.options import Collective, PreflightSettings, ProcessGroupKind
from bench.schema.spec import RunSpec

PREFLIGHT_KIND = "preflight"  # the `kind` every preflight record carries
PREFLIGHT_SCHEMA_VERSION = 1  # migrations on read: bench/schema/migrations `PREFLIGHT`


# What the ranks measure (fsdp_core/preflight.py), written by rank 0 as the preflight's
# measurements file (bench/schema/protocol.py PREFLIGHT_MEASUREMENTS) and read by the parent
# (bench/analysis/preflight.py), which reduces it into the record below.


class MatmulTiming(Strict):
    """One GEMM shape's time per repetition on one rank."""

    seconds: list[float] = Field(default_factory=list)
    flops: float
    shape: list[int] = Field(default_factory=list)  # m, k, n
    # The operands' dtype as torch names it ("bfloat16", "float8_e4m3fn": an fp8 point's converted
    # linears); None in measurements written before it was recorded (the compute dtype then).
    dtype: str | None = None


class CollectiveTiming(Strict):
    """One collective at one size on one process group: this rank's time per repetition."""

    op: Collective
    group: ProcessGroupKind
    group_size: int
    bytes: int
    node: int | None = None
    seconds: list[float]


class RankMeasurements(Strict):
    """Everything one rank measured."""

    rank: int
    host: str
    local_rank: int
    node: int
    matmul: dict[str, MatmulTiming]
    memory_gbps: float | None = None
    collectives: list[CollectiveTiming] = Field(default_factory=list)


class PreflightMeasurements(Strict):
    """The measurements file: every rank's measurements, gathered on rank 0."""

    started_at: str | None = None
    finished_at: str | None = None
    sizes: list[int] = Field(default_factory=list)
    ranks: list[RankMeasurements]
    env: EnvInfo = Field(default_factory=EnvInfo)
    host_load: list[HostLoad] = Field(default_factory=list)


class RankDevice(Strict):
    """One rank's own device: matmul throughput at the model's GEMM shapes and memory bandwidth."""

    rank: int
    host: str
    local_rank: int
    node: int
    matmul_s: float  # seconds for one pass over every GEMM shape (medians per shape)
    matmul_best_s: float  # the same from each shape's fastest repetition (the straggler measure)
    matmul_tflops: float
    matmul_tflops_by_shape: dict[str, float] = Field(default_factory=dict)
    # shape -> the dtype it was timed in (fp8 points time their converted linears in fp8); empty in
    # records written before it was recorded.
    matmul_dtype_by_shape: dict[str, str] = Field(default_factory=dict)
    memory_gbps: float | None = None

    @property
    def matmul_best_tflops(self) -> float:
        """The rate of the fastest repetitions: what the straggler rule compares."""
        return self.matmul_tflops * self.matmul_s / self.matmul_best_s


class CollectiveSample(Strict):
    """One collective on one process group at one message size (nccl-tests' conventions)."""

    op: Collective
    group: ProcessGroupKind
    group_size: int
    bytes: int  # all-gather: the gathered output; reduce-scatter: the input; all-reduce: the buffer
    time_s: float  # median over repetitions of the slowest rank's time
    best_s: float  # the fastest repetition's (the node straggler measure)
    algbw_gbps: float  # bytes / time, GB/s
    busbw_gbps: float  # algbw x (n-1)/n (all-gather, reduce-scatter) or 2(n-1)/n (all-reduce)
    node: int | None = None  # for group "node": which node's ranks


class Straggler(Strict):
    """A rank (or a node) slower than the median by more than the rule allows."""

    # "matmul" (a rank) or "node all_reduce" (a node's own ranks), each compared on its fastest
    # repetition: interference only ever adds time, so what is slow even at its best is slow.
    measure: str
    rank: int | None = None
    host: str
    local_rank: int | None = None
    node: int | None = None
    value_s: float
    median_s: float
    slower_by: float  # fraction over the median


class PreflightSummary(Strict):
    """What a point's record keeps of its world shape's preflight."""

    path: str  # relative to the results folder: <sweep>/_preflight/<shape>/preflight.json
    matmul_tflops_median: float
    busbw_gbps: dict[str, float] = Field(default_factory=dict)  # "<op>/<group>" -> bus bandwidth at the largest size
    stragglers: list[Straggler] = Field(default_factory=list)
    measured_links: dict[str, float] = Field(default_factory=dict)  # PreflightResult.measured_links


class PreflightResult(Strict):
    """A preflight's record: `<results>/<sweep>/_preflight/<shape>/preflight.json`."""

    kind: Literal["preflight"] = PREFLIGHT_KIND
    schema_version: Literal[1] = PREFLIGHT_SCHEMA_VERSION
    sweep: str
    status: Status
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    spec: RunSpec
    settings: PreflightSettings
    strategies: list[str] = Field(default_factory=list)
    ranks: list[RankDevice] = Field(default_factory=list)
    collectives: list[CollectiveSample] = Field(default_factory=list)
    stragglers: list[Straggler] = Field(default_factory=list)
    # Links the planner can use instead of the cluster's nominal ones: Gbit/s as the cluster fields
    # mean them (intra: one GPU's link; inter: the whole node's network), latency per ring hop.
    measured_links: dict[str, float] = Field(default_factory=dict)
    host_load: list[HostLoad] = Field(default_factory=list)  # around the whole measurement
    env: EnvInfo = Field(default_factory=EnvInfo)
    notes: dict[str, str] = Field(default_factory=dict)

    @property
    def matmul_tflops_median(self) -> float | None:
        """The median rank's matmul rate (what the summary, the planner and history show)."""
        return statistics.median(r.matmul_tflops for r in self.ranks) if self.ranks else None

    def summary(self, path: str) -> PreflightSummary:
        largest = {}
        for sample in self.collectives:
            if sample.group == "node":
                continue
            key = f"{sample.op}/{sample.group}"
            if key not in largest or sample.bytes > largest[key].bytes:
                largest[key] = sample
        return PreflightSummary(
            path=path,
            matmul_tflops_median=self.matmul_tflops_median or 0.0,
            busbw_gbps={k: v.busbw_gbps for k, v in sorted(largest.items())},
            stragglers=self.stragglers,
            measured_links=self.measured_links,
        )
