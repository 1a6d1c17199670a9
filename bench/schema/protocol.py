"""The parent-to-rank protocol: the files a launch shares between bench (the parent) and the ranks.

Torch-free (pydantic and the standard library): bench's launchers and the worker both read the
names, the file shapes and the rules from here, so neither side can drift from the other. The launch
file is typed: the parent writes a `LaunchFile` of validated `RunSpec`s, `Recipe`s and
`PreflightSettings`, and the ranks read it back into the same types (validated again on their side).

    <results>/<sweep>/.lock                           the parent's sweep lock: who holds the folder (bench/run/ownership/locks.py)
    <results>/<sweep>/_launches/<stamp>/launch.json   parent -> ranks: the points to run (LaunchFile)
    <results>/<sweep>/<point_id>/started              rank 0, when the point starts (its timeout runs from here)
    <results>/<sweep>/<point_id>/result.json          rank 0 (or the parent, for a failure): the record
    <results>/<sweep>/<point_id>/telemetry.parquet    rank 0, before the record: every rank's sampled series
                                                      (telemetry.csv where pyarrow is missing)
    <results>/<sweep>/<point_id>/trace_rank<R>.json.gz  rank R, profile.enabled: its profiler trace of the
                                                      profiled steps (gzipped Chrome-trace JSON)
    <results>/<sweep>/<point_id>/errors/rank<R>.json  rank R, when it fails: a one-line reason (RankError)
    <results>/<sweep>/<point_id>/memory_snapshot_rank<R>.pickle  rank R, on its out-of-memory with
                                                      profile.memory_history (CUDA): the allocator's snapshot
    <results>/<sweep>/<point_id>/flight_recorder/rank<R>.json  rank R, on SIGTERM or at the point's deadline:
                                                      its Flight Recorder dump (deleted when the point finishes)
    <results>/<sweep>/<point_id>/job/                  every rank: each attempt's journal (fsdp_core/job.py)
    <checkpoint dir>/step-<S>/                        every rank (DCP): the state after step S
    <checkpoint dir>/latest                           rank 0, after a save is durable: the latest complete checkpoint
    <results>/<sweep>/_preflight/<shape>/              a preflight: `started`, errors/ as a point's, and
                                                       measurements.json (rank 0's raw measurements), from
                                                       which the parent writes preflight.json (the record)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import Field

from bench.schema.base import Strict
from bench.schema.devices import PeakEntry
from bench.schema.files import write_json_atomic, write_text_atomic
from bench.schema.options import PreflightSettings

# Its names and numbers are protocol_names.py's (plain constants, importable without pydantic).
from bench.schema.protocol_names import (  # noqa: F401
    CHECKPOINT_MARKER,
    CHECKPOINT_STEP_PREFIX,
    CHECKPOINT_SUBDIR,
    DCP_METADATA_FILE,
    ERRORS_DIR,
    FLIGHT_RECORDER_DIR,
    FR_BACKWARD,
    FR_BUFFER_DEFAULT,
    FR_BUFFER_ENV,
    FR_CLOSING_BARRIER,
    FR_DEADLINE_LEAD_S,
    FR_FORWARD,
    FR_LEAD_ENV,
    FR_OPENING_BARRIER,
    JOB_DIR,
    JOB_FILE,
    LAUNCH_FILE,
    LAUNCHED_AT_ENV,
    LAUNCHES_DIR,
    MEMORY_SNAPSHOT_GLOB,
    MEMORY_SNAPSHOT_PREFIX,
    MEMORY_SNAPSHOT_SUFFIX,
    NODE_NAME_ENV,
    OWNER_HEARTBEAT_S,
    OWNER_SILENT_S,
    PG_TIMEOUT_MARGIN_S,
    PREFLIGHT_DIR,
    PREFLIGHT_MEASUREMENTS,
    PREFLIGHT_RECORD,
    QUEUED_S_ENV,
    RANKS_PER_HOST_ENV,
    RESULT_FILE,
    STARTED_MARK,
    SWEEP_LOCK,
    TELEMETRY_CSV,
    TELEMETRY_PARQUET,
    TELEMETRY_SIDECARS,
    TRACE_GLOB,
    TRACE_PREFIX,
    TRACE_SUFFIX,
)
from bench.schema.record import Recipe
from bench.schema.spec import RunSpec, TrainSpec
from bench.schema.units import GIB


class LaunchPoint(Strict):
    """One point of a launch: where its files go and everything the ranks need to run it."""

    point_id: str
    point_dir: str
    spec: RunSpec  # the resolved spec (the ranks validate it again when they read the launch file)
    recipe: Recipe  # the strategy and precision recipes it runs with (bench.schema.recipes)
    mfu_peak_dtype: str  # the device peak MFU divides by
    fp8_peak_dtype: str | None = None  # fp8 runs: also report MFU against this peak
    log_dir: str | None = None


class PreflightTask(Strict):
    """A preflight run before the launch's points: what the cluster itself does (fsdp_core/preflight.py)."""

    point_dir: str  # where `started`, errors/ and measurements.json go
    spec: RunSpec  # the point whose world shape, model and precision it measures
    settings: PreflightSettings
    strategies: list[str] = Field(default_factory=list)  # whose process groups to measure


class GitInfo(Strict):
    """The launching checkout's commit (bench/config/version.py `git_info`); None where unknown."""

    sha: str | None = None
    dirty: bool | None = None


class Conditions(Strict):
    """What the parent knows about a measurement's conditions: whether it held this host alone
    (bench/run/ownership/locks.py; None when the ranks run elsewhere)."""

    exclusive_host: bool | None = None


class LaunchFile(Strict):
    """launch.json: points of one world shape, run in turn by the same ranks (a preflight first, if any)."""

    points: list[LaunchPoint]
    peak_table: list[PeakEntry] = Field(default_factory=list)  # every known device's runtime names and peaks
    git: GitInfo = Field(default_factory=lambda: GitInfo())  # the parent checkout's commit, for the record
    harness: str | None = None  # the launching fsdp-bench's version (bench/config/version.py), for the record
    preflight: PreflightTask | None = None
    # What the parent knows about the measurement's conditions, for the record (e.g. whether it held
    # the host lock: bench/run/ownership/locks.py).
    conditions: Conditions = Field(default_factory=lambda: Conditions())
    # The token of the sweep lock whose holder launched it: ranks write only while the lock still
    # names it (fsdp_core/lifeline.py). None: no owner to check (ranks started without a sweep lock).
    owner: str | None = None
    # launcher.max_failures: how many times the launcher restarts the ranks after a failure. With
    # restarts, every rank journals its progress at each save, so that a restart can resume the point.
    max_failures: int = 0

    def write(self, path: Path) -> None:
        write_text_atomic(Path(path), self.model_dump_json(indent=2))

    @classmethod
    def read(cls, path: Path) -> LaunchFile:
        return cls.model_validate_json(Path(path).read_text())


@dataclass
class RankError:
    """errors/rank<R>.json: why rank R failed, in one line."""

    rank: int
    type: str
    message: str
    oom: bool = False
    traceback: str = ""
    # An OSError's number and file (a full or read-only results disk is the storage's fault, not the point's).
    errno: int | None = None
    filename: str | None = None
    # An out-of-memory's context: what the harness was doing ("backward of step 0"), and with the
    # allocator's history on (profile.memory_history, CUDA) the largest live allocations by category
    # (fsdp_core/allocations.py: category, bytes, blocks, largest, where).
    phase: str = ""
    largest: list[dict] = field(default_factory=list)

    def write(self, point_dir: Path) -> None:
        path = error_file(point_dir, self.rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, asdict(self))

    @classmethod
    def read(cls, path: Path) -> RankError:
        return cls(**json.loads(Path(path).read_text()))

    def oom_reason(self) -> str:
        """The record's one-line reason for this rank's out-of-memory: the message, the phase, and what
        filled the memory where the snapshot says."""
        parts = [f"rank {self.rank}: {self.message}"]
        if self.phase:
            parts.append(f"in {self.phase}")
        if self.largest:
            parts.append(
                "largest live allocations: "
                + ", ".join(
                    f"{a['category']} {a['bytes'] / GIB:.2f} GiB ({a['blocks']} block{'s' * (a['blocks'] != 1)})"
                    for a in self.largest
                )
            )
            top = self.largest[0]
            if top.get("where"):  # where to look first: the largest category's largest block
                parts.append(f"its largest block {top['largest'] / GIB:.2f} GiB from {top['where']}")
        return "; ".join(parts)


def results_relative(item_dir: Path) -> tuple[str, ...]:
    """A point's or preflight's folder relative to the results folder (<sweep>/<point_id>, or
    <sweep>/_preflight/<shape>): how a launcher maps it into pods or object storage."""
    parts = Path(item_dir).parts
    return parts[-3:] if len(parts) >= 3 and parts[-2] == PREFLIGHT_DIR else parts[-2:]


def point_dir(results_dir: str | Path, spec: RunSpec) -> Path:
    """A point's folder, `<results>/<sweep>/<point_id>`, of a RunSpec: its record, marks, errors, sidecars."""
    return Path(results_dir) / spec.sweep.name / spec.point_id


def sweep_dir_of(item_dir: Path) -> Path:
    """The sweep folder a point's or preflight's folder lies in (where its SWEEP_LOCK is)."""
    return Path(item_dir).parents[len(results_relative(item_dir)) - 2]


def error_file(point_dir: Path, rank: int) -> Path:
    """Where rank `rank` leaves its one-line reason when it fails."""
    return Path(point_dir) / ERRORS_DIR / f"rank{rank}.json"


def error_files(point_dir: Path) -> list[Path]:
    """Every rank's error file of a point, in rank order."""
    return sorted((Path(point_dir) / ERRORS_DIR).glob("rank*.json"), key=lambda p: int(p.stem[4:]))


def trace_file_name(rank: int) -> str:
    """Rank `rank`'s profiler trace beside the record."""
    return f"{TRACE_PREFIX}{rank}{TRACE_SUFFIX}"


def trace_files(point_dir: Path) -> list[Path]:
    """Every rank's profiler trace of a point."""
    return sorted(Path(point_dir).glob(TRACE_GLOB))


def memory_snapshot_file(point_dir: Path, rank: int) -> Path:
    """Rank `rank`'s allocator snapshot on its out-of-memory (profile.memory_history)."""
    return Path(point_dir) / f"{MEMORY_SNAPSHOT_PREFIX}{rank}{MEMORY_SNAPSHOT_SUFFIX}"


def memory_snapshots(point_dir: Path) -> list[Path]:
    """Every rank's allocator snapshot of a point."""
    return sorted(Path(point_dir).glob(MEMORY_SNAPSHOT_GLOB))


def flight_recorder_file(point_dir: Path, rank: int) -> Path:
    """Rank `rank`'s Flight Recorder dump of a point."""
    return Path(point_dir) / FLIGHT_RECORDER_DIR / f"rank{rank}.json"


def flight_recorder_files(point_dir: Path) -> list[Path]:
    """Every rank's Flight Recorder dump of a point, in rank order."""
    return sorted((Path(point_dir) / FLIGHT_RECORDER_DIR).glob("rank*.json"), key=lambda p: int(p.stem[4:]))


def read_errors(point_dir: Path) -> list[RankError]:
    return [RankError.read(p) for p in error_files(point_dir)]


def collective_timeout_s(point_timeout_s: float) -> float:
    """The process groups' timeout for a point: its own timeout plus the margin."""
    return float(point_timeout_s) + PG_TIMEOUT_MARGIN_S


def checkpoint_folder(step: int) -> str:
    """The step folder a save after optimizer step `step` (0-based) writes into."""
    return f"{CHECKPOINT_STEP_PREFIX}{step:08d}"


def default_checkpoint_dir(point_dir: str | Path) -> Path:
    return Path(point_dir) / CHECKPOINT_SUBDIR


def checkpoint_location(train: TrainSpec, point_dir: str | Path) -> str:
    """Where a point's checkpoints go: train.checkpoint_dir, or the point's own folder."""
    return train.checkpoint_dir or str(default_checkpoint_dir(point_dir))


def is_url(location: str) -> bool:
    """An fsspec URL (s3://, file://, ...) rather than a path of this file system."""
    return "://" in location


@dataclass
class CheckpointMarker:
    """<checkpoint dir>/latest: the latest complete checkpoint (written after it is durable)."""

    step: int
    folder: str
    world_size: int
    point_id: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> CheckpointMarker:
        data = json.loads(text)
        return cls(int(data["step"]), str(data["folder"]), int(data["world_size"]), str(data.get("point_id", "")))


def read_local_marker(directory: str | Path) -> CheckpointMarker | None:
    """The marker of a checkpoint dir on this file system, or None when there is no complete checkpoint."""
    path = Path(directory) / CHECKPOINT_MARKER
    try:
        marker = CheckpointMarker.from_json(path.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return marker if (Path(directory) / marker.folder / DCP_METADATA_FILE).is_file() else None
