"""`metrics.checkpoint` of a record: what the point's DCP saves and loads cost (docs/checkpointing.md)."""

from __future__ import annotations

import statistics
import typing
from collections.abc import Iterable

from pydantic import ConfigDict, Field

from bench.schema.base import Strict
from bench.schema.spec import CheckpointMode

# Where an async save's state was staged in host memory (fsdp_core/checkpoint_staging.py), from the best
# to the most degraded; the record holds the most degraded of any rank's (a rank whose pinning failed shows).
Staging = typing.Literal["pinned", "pinned-per-save", "pageable", "writer", "pinning-failed"]
STAGINGS: tuple[Staging, ...] = typing.get_args(Staging)


class CheckpointSave(Strict):
    """One save: times are the slowest rank's; bytes as DCP's metadata lists them."""

    step: int = Field(description="the optimizer step (0-based) the saved state follows")
    blocked_s: float = Field(description="training held: the whole save (sync); previous save + staging (async)")
    staging_s: float | None = Field(None, description="async: copying the state into host memory")
    durable_s: float = Field(description="from the save's start until every file and the metadata are written")
    bookkeeping_s: float | None = Field(
        None,
        description="after the save is durable: counting its bytes in DCP's metadata and telling the listener "
        "(Ray's report); in the timed window, outside blocked_s (null: records from before it was measured)",
    )
    bytes: int = Field(description="files written by every rank, metadata included")
    bytes_per_rank: list[int] = Field(default_factory=list, description="file bytes each rank wrote")
    metadata_bytes: int = 0
    state_bytes_per_rank: list[int] = Field(default_factory=list, description="tensor bytes each rank wrote")
    write_bytes_per_s: float | None = Field(None, description="aggregate: bytes / durable_s")


class CheckpointLoad(Strict):
    step: int
    load_s: float = Field(description="reading the step folder into the sharded model and optimizer")
    bytes: int
    read_bytes_per_s: float | None = None


class CheckpointMetrics(Strict):
    """`metrics.checkpoint` of a point with train.checkpoint or train.resume (docs/checkpointing.md)."""

    # The worker fills the goodput fields after the saves' summary: checked as they are set.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    mode: CheckpointMode
    every: int
    dir: str
    saves: list[CheckpointSave] = Field(default_factory=list)
    staging: Staging | None = Field(
        None,
        description="async: where the saves staged the state in host memory: pinned (DCP's DefaultStager, pinned "
        "buffers reused by every save), pinned-per-save (a torch whose DefaultStager stages once: new pinned "
        "buffers each save), pageable (no GPU: nothing to pin), writer (a torch without DefaultStager: the writer "
        "copies into new pageable memory each save), pinning-failed (a rank could not pin its copy and staged into "
        "pageable memory); null: sync or no saves, or records from before it was recorded",
    )
    blocked_s: float = 0.0
    bookkeeping_s: float | None = Field(None, description="the saves' bookkeeping_s, summed")
    write_bytes_per_s: float | None = Field(
        None,
        description="aggregate write bandwidth: the median over the saves with durable_s > 0 of "
        "bytes / durable_s (write_bandwidth); null when no save took time",
    )
    load: CheckpointLoad | None = Field(None, description="a load of the latest checkpoint after the timed window")
    resumed: CheckpointLoad | None = Field(None, description="the load a resumed run started from")
    tokens_per_s_with_checkpoints: float | None = Field(None, description="over the timed window, saves included")
    goodput: float | None = Field(None, description="tokens_per_s_with_checkpoints / tokens_per_s")
    blocked_fraction: float | None = Field(
        None, description="(blocked_s + bookkeeping_s) / the timed window: what the saves took from it"
    )


def write_bandwidth(saves: Iterable[tuple[int, float]]) -> float | None:
    """A point's aggregate write bandwidth from its saves' (bytes, durable_s): the median of bytes /
    durable_s over the saves that took time (durable_s > 0), None when none did. The one rule: the
    ranks store it (`CheckpointMetrics.write_bytes_per_s`), the record's migration to version 3
    computes it for older records, and the report, the console and the GPU table read the stored value."""
    rates = [size / seconds for size, seconds in saves if seconds > 0]
    return statistics.median(rates) if rates else None
