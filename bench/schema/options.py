"""The config's options that are not part of a point: how a sweep runs (`sweep.*`), what the planner's
search ranks by (`search.*`) and what a preflight measures (`preflight.*`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from bench.schema.base import Strict
from bench.schema.units import parse_count

Collective = Literal["all_gather", "reduce_scatter", "all_reduce"]

# The process groups a preflight measures: the whole world, the mesh's shard and replicate groups of
# each strategy, and each node's own ranks (to compare nodes with each other).
ProcessGroupKind = Literal["world", "shard", "replicate", "node"]


class PreflightSettings(Strict):
    """What `fsdp-bench preflight` and `sweep.preflight=true` measure (the config's `preflight.*`)."""

    collectives: list[Collective] = Field(
        default_factory=lambda: ["all_gather", "reduce_scatter", "all_reduce"], description="collectives to time"
    )
    groups: list[ProcessGroupKind] = Field(
        default_factory=lambda: ["world", "shard", "replicate", "node"], description="process groups to time them on"
    )
    min_bytes: int = Field(1024, ge=1, strict=True, description="smallest message, bytes")
    max_bytes: int | None = Field(
        None, ge=1, strict=True, description="largest message, bytes; null: the model's largest FSDP unit"
    )
    iters: int = Field(5, ge=1, strict=True, description="timed repetitions per collective and size")
    matmul_iters: int = Field(10, ge=1, strict=True, description="timed repetitions per GEMM shape")
    # Megatron-style straggler rule: slower than the median by more than max(k x MAD, floor x median).
    straggler_k: float = Field(3.0, gt=0, description="MADs beyond the median a straggler must be")
    straggler_floor: float = Field(0.10, ge=0, description="and at least this fraction slower than the median")

    @model_validator(mode="after")
    def _sizes(self) -> PreflightSettings:
        if self.max_bytes is not None and self.max_bytes < self.min_bytes:
            raise ValueError(f"max_bytes: {self.max_bytes} is smaller than min_bytes {self.min_bytes}")
        return self


class SweepOptions(Strict):
    """The config's `sweep.*`: how a sweep runs its points (the point's own part is PointSweep)."""

    name: str | None = Field(None, description="default: the experiment's name, or adhoc")
    force: bool = Field(False, strict=True, description="rerun points that already have an ok result")
    retry_failed: bool = Field(False, strict=True, description="rerun failed, timed-out and out-of-memory points")
    point_timeout_s: float = Field(600.0, gt=0, description="seconds a started point may run")
    repeats: int = Field(1, ge=1, strict=True, description="runs of every point, interleaved")
    plan: bool = Field(False, strict=True, description="skip points the planner predicts will not fit")
    group_launches: bool = Field(True, strict=True, description="points that share a world shape run inside one launch")
    grid: dict[str, Any] = Field(default_factory=dict, description="key -> comma-separated values")
    wait: bool = Field(
        True, strict=True, description="wait for another sweep holding the folder or host (false: exit 2)"
    )
    allow_concurrent: bool = Field(
        False, strict=True, description="run local launches without the host lock (recorded in each record)"
    )
    preflight: bool = Field(
        False, strict=True, description="measure the cluster once per world shape before its points"
    )
    orphans: Literal["cancel", "wait"] = Field(
        "cancel", description="a cluster job a dead fsdp-bench left running in this sweep: cancel it, or wait for it"
    )
    autotune: int = Field(
        0, ge=0, strict=True, description="run the K configurations the planner ranks best (search.*), not the grid"
    )


Objective = Literal["tokens_per_s", "tokens_per_s_per_device", "mfu", "cost", "time_to_train"]

OBJECTIVES: tuple[str, ...] = Objective.__args__
# Ranked lowest first (dollars per million tokens, hours to train search.tokens); they make `nodes` a
# searched axis (`nodes=8,16,32`), the others hold it fixed.
LOWER_IS_BETTER: tuple[str, ...] = ("cost", "time_to_train")


class SearchOptions(Strict):
    """The config's `search.*`: what `plan --best` and `sweep.autotune` rank by and hold fixed."""

    objective: Objective = Field("tokens_per_s", description="what the planner ranks configurations by")
    global_batch: int | None = Field(
        None, ge=1, strict=True, description="sequences per optimizer step held fixed (grad_accum follows); null: free"
    )
    tokens: float | None = Field(
        None, description="tokens to train (2T = 2e12; K, M, B/G, T): what time_to_train, max_hours and max_usd count"
    )
    max_hours: float | None = Field(
        None, gt=0, description="a deadline: configurations that train search.tokens later are dropped"
    )
    max_usd: float | None = Field(
        None, gt=0, description="a budget: configurations that cost more for search.tokens are dropped"
    )

    @field_validator("tokens", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        try:
            return parse_count(str(value))
        except ValueError:
            raise ValueError(
                f"cannot read {value!r}; allowed: a positive number with an optional suffix K, M, B/G, T (2T)"
            ) from None
