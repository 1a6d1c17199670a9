"""The single home of the pydantic models: what a point is (RunSpec) and what it yields (RunResult).

Torch-free. A `RunSpec` is nested like the config tree (model / strategy / precision / cluster /
train / launcher / debug) and self-contained: the model's dimensions and the cluster's and
device's facts are resolved into it when the point is composed (sweeps/ is the registry), so a
record that carries its spec never needs today's registry to be read, reported or checked.

Validation here is *structural*: types, ranges, physical sense (positive bandwidths, dimensions
that divide). The rules that decide whether a new point may launch (fp8 needs CUDA, warm-up
fewer than steps, ...) live in `launch_problems`, which the config layer runs before anything
launches and which a stored record is never subjected to: a record measured under older rules
stays readable.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from bench.schema import ac_modes
from bench.schema.base import DeviceType, Strict, positive
from bench.schema.flops import flops_per_token, hardware_flops_per_token
from bench.schema.identity import (
    DESCRIBES,
    HOW,
    IN,
    LATER,
    OBSERVES,
    WHERE,
    FieldPath,
    Legacy,
    Role,
    canonical_json,
    id_of_text,
    identity_of,
    paths,
)
from bench.schema.model import ModelSpec
from bench.schema.recipes import PRECISIONS, STRATEGIES

Strategy = Literal[tuple(STRATEGIES)]  # type: ignore[valid-type]

Precision = Literal[tuple(PRECISIONS)]  # type: ignore[valid-type]

Launcher = Literal["local", "slurm", "kubeflow", "ray"]

Checkpointing = Literal[ac_modes.AC_MODES]  # type: ignore[valid-type]

CheckpointMode = Literal["none", "sync", "async"]

CompileBackend = Literal["inductor", "aot_eager", "eager"]

LAUNCHERS: tuple[str, ...] = Launcher.__args__

CHECKPOINTING: tuple[str, ...] = Checkpointing.__args__


class DeviceSpec(Strict):
    """One accelerator model (sweeps/device/<name>.yaml): what MFU divides by and the planner fills."""

    name: Annotated[str, DESCRIBES]
    match: Annotated[list[str], DESCRIBES] = Field(
        default_factory=list, description="torch.cuda.get_device_name() values without 'NVIDIA ', matched exactly"
    )
    memory_gib: Annotated[float, DESCRIBES] = Field(gt=0)
    peak_tflops: Annotated[dict[str, float], DESCRIBES] = Field(
        default_factory=dict, description="dense peaks by dtype, TFLOP/s"
    )
    memory_gbps: Annotated[float | None, DESCRIBES] = Field(None, gt=0, description="datasheet memory bandwidth, GB/s")
    host_link_gbps: Annotated[float | None, DESCRIBES] = Field(
        None, gt=0, description="host link per direction, GB/s (CPU offload)"
    )
    relative_efficiency: Annotated[float, DESCRIBES] = Field(
        1.0, gt=0, description="the planner's achievable fraction of peak relative to the H100's fitted one"
    )
    source: Annotated[str, DESCRIBES] = ""

    @field_validator("peak_tflops")
    @classmethod
    def _peaks(cls, peaks: dict[str, float]) -> dict[str, float]:
        if peaks and not min(peaks.values()) > 0:  # one comparison when all are positive (every record read)
            _positive_peaks(peaks)
        return peaks


class ClusterSpec(Strict):
    """One node type (sweeps/cluster/<name>.yaml), resolved: its device and links.

    A point's identity names the node type (name, device type); the facts describe it (correcting
    a bandwidth or a source link keeps ids)."""

    name: Annotated[str, IN]
    device: Annotated[DeviceSpec, DESCRIBES]
    device_type: Annotated[DeviceType, IN] = "cuda"
    gpus_per_node: Annotated[int, DESCRIBES] = Field(ge=1, strict=True)
    device_memory_gib: Annotated[float | None, DESCRIBES] = Field(None, description="null: the device's memory")
    peak_tflops: Annotated[dict[str, float | None], DESCRIBES] = Field(
        default_factory=dict, description="per dtype; null: the device's"
    )
    intra_node_gbps: Annotated[float, DESCRIBES] = Field(
        description="one GPU's unidirectional NVLink bandwidth, Gbit/s"
    )
    inter_node_gbps: Annotated[float, DESCRIBES] = Field(description="the whole node's network bandwidth, Gbit/s")
    efa_devices: Annotated[int, DESCRIBES] = Field(0, ge=0, strict=True)
    link_latency_s: Annotated[float, DESCRIBES] = Field(
        1e-5, ge=0, description="per-message latency of a ring hop, seconds"
    )
    storage_gbps: Annotated[float, DESCRIBES] = Field(
        80.0, gt=0, description="aggregate write/read bandwidth of the checkpoint storage the nodes share, Gbit/s"
    )
    source: Annotated[str, DESCRIBES] = ""
    # Failures and prices describe the node type (or a user's contract), not what a point measures:
    # outside its identity. Null: not modelled / no price.
    node_mtbf_h: Annotated[float | None, DESCRIBES] = Field(
        None, gt=0, description="one node's mean time between failures, hours (the planner's failure model); null: none"
    )
    restart_s: Annotated[float | None, DESCRIBES] = Field(
        None,
        ge=0,
        description="seconds a restart takes before the restore (rendezvous, start-up, initialization), for the "
        "planner; null: not counted (a record's metrics.job measures it)",
    )
    usd_per_node_hour: Annotated[float | None, DESCRIBES] = Field(
        None, gt=0, description="price of one node for one hour, US dollars; null: no price"
    )
    price_source: Annotated[str | None, DESCRIBES] = Field(None, description="where usd_per_node_hour comes from")
    price_as_of: Annotated[str | None, DESCRIBES] = Field(
        None, description="the date usd_per_node_hour was published (or read, for a price without one)"
    )
    overrides: Annotated[dict[str, Any], DESCRIBES] = Field(
        default_factory=dict, description="fields set away from the preset when composed"
    )

    @model_validator(mode="after")
    def _resolve(self) -> ClusterSpec:
        """Fill the device's memory and peaks where the cluster does not override them."""
        device = self.device
        if self.device_memory_gib is None:
            self.device_memory_gib = device.memory_gib
        overrides = self.peak_tflops
        self.peak_tflops = peaks = {**device.peak_tflops, **{k: v for k, v in overrides.items() if v is not None}}
        # Validated floats: one comparison when all are positive (every record read checks these), the
        # named checks (the first failing one's message) otherwise.
        if not min(self.device_memory_gib, self.intra_node_gbps, self.inter_node_gbps, *peaks.values()) > 0:
            for name in ("device_memory_gib", "intra_node_gbps", "inter_node_gbps"):
                positive(getattr(self, name), name)
            _positive_peaks(peaks)
        return self


def _positive_peaks(peaks: dict[str, float]) -> None:
    """positive() of each peak, named by its dtype: the first one that is not says so."""
    for dtype, value in peaks.items():
        positive(value, f"peak_tflops.{dtype}")


# Activation checkpointing in the identity: a knob counts only under the mode it tunes, both came
# after schema version 2, and every second block keeps the name it was first measured under
# (`selective`), so records from before the split into selective_op and selective_layer keep their
# ids (bench/schema/migrations/ac_split.py reads them back).
_AC_MODE = Role(
    "in",
    legacy=Legacy(
        ac_modes.SELECTIVE_LAYER, when=(("ac_every", ac_modes.DEFAULT_AC_EVERY),), name=ac_modes.LEGACY_SELECTIVE
    ),
)
_AC_EVERY = Role("later", only_under=("activation_checkpointing", ac_modes.SELECTIVE_LAYER))
_AC_SAVE_OPS = Role("later", only_under=("activation_checkpointing", ac_modes.SELECTIVE_OP))


class TrainSpec(Strict):
    """How a point trains (the config's `train.*`)."""

    seq_len: Annotated[int | None, IN] = Field(None, ge=1, strict=True, description="null: the model's default_seq_len")
    micro_batch: Annotated[int, IN] = Field(1, ge=1, strict=True, description="sequences per rank per micro-step")
    grad_accum: Annotated[int, IN] = Field(1, ge=1, strict=True, description="micro-steps per optimizer step")
    steps: Annotated[int, IN] = Field(8, ge=1, strict=True, description="optimizer steps, warm-up included")
    warmup_steps: Annotated[int, IN] = Field(
        2, ge=0, strict=True, description="untimed first steps; the last one counts communication"
    )
    activation_checkpointing: Annotated[Checkpointing, _AC_MODE] = Field(
        "none",
        description="none, full (every block), selective_op (torchtitan's per-op policy in every block; "
        "`selective` means this), selective_layer (every ac_every-th block)",
    )
    ac_every: Annotated[int, _AC_EVERY] = Field(
        ac_modes.DEFAULT_AC_EVERY, ge=1, strict=True, description="selective_layer: checkpoint every N-th block"
    )
    ac_save_ops: Annotated[list[str] | None, _AC_SAVE_OPS] = Field(
        None,
        description="selective_op: the op groups whose outputs are saved (mm, sdpa, collectives, max); "
        "null: all of them (torchtitan's policy)",
    )
    compile: Annotated[bool, IN] = Field(False, description="torch.compile each block")
    compile_backend: Annotated[CompileBackend, IN] = Field(
        "inductor", description="torch.compile backend: inductor (real kernels) or aot_eager/eager (debugging)"
    )
    cpu_offload: Annotated[bool, IN] = Field(
        False, description="offload parameters, gradients and optimizer state to the host (CUDA)"
    )
    seed: Annotated[int, IN] = Field(0, description="model initialisation and data")
    lr: Annotated[float, IN] = Field(3e-4, gt=0, description="AdamW learning rate")
    data: Annotated[str, IN] = Field(
        "synthetic", description="'synthetic' or the path of a token file (uint16/uint32 memmap)"
    )
    threads_per_rank: Annotated[int, IN] = Field(
        0, ge=0, description="CPU threads per rank; 0 = cores // ranks on the host"
    )
    checkpoint: Annotated[CheckpointMode, LATER] = Field(
        "none", description="DCP checkpoints of model and optimizer: none, sync, async"
    )
    checkpoint_every: Annotated[int | None, LATER] = Field(
        None,
        ge=1,
        strict=True,
        description="save after every K-th timed step; null: once, after the last step (ignored with checkpoint=none)",
    )
    # Where a checkpoint goes and whether a run resumes say where and how a point runs (a resumed
    # run continues the same point, in the same results folder).
    checkpoint_dir: Annotated[str | None, WHERE] = Field(
        None, description="a path or fsspec URL; null: <results_dir>/<sweep>/<point_id>/checkpoint"
    )
    resume: Annotated[bool, HOW] = Field(
        False, description="start from the latest complete checkpoint in checkpoint_dir"
    )

    @model_validator(mode="after")
    def _no_interval_without_saves(self) -> TrainSpec:
        """An interval means nothing without saves: dropped, so a grid over modes x intervals gives one
        checkpoint=none point, not one per interval."""
        if self.checkpoint == "none":
            self.checkpoint_every = None
        return self

    @field_validator("ac_save_ops")
    @classmethod
    def _known_ops(cls, groups: list[str] | None) -> list[str] | None:
        if not groups:  # null (the default) or none: nothing to look up
            return groups
        unknown = ac_modes.unknown_save_ops(groups)
        if unknown:
            allowed = ", ".join(ac_modes.SAVE_OP_GROUPS)
            raise ValueError(f"unknown op group {', '.join(map(repr, unknown))}; allowed: {allowed}")
        return groups

    @property
    def checkpoints(self) -> bool:
        """Whether the point saves or resumes DCP checkpoints (docs/checkpointing.md)."""
        return self.checkpoint != "none" or self.resume

    @property
    def timed_steps(self) -> int:
        return self.steps - self.warmup_steps

    @property
    def save_interval(self) -> int:
        """Timed steps between checkpoint saves: checkpoint_every, or all of them (one save, after the last)."""
        return self.checkpoint_every or self.timed_steps

    def saves_after(self, step: int) -> bool:
        """Whether a checkpoint save follows optimizer step `step` (0-based): every save_interval-th timed step."""
        timed_index = step - self.warmup_steps + 1
        return self.checkpoint != "none" and timed_index >= 1 and timed_index % self.save_interval == 0


# The knobs that slow a point down without changing its workload: in the point's identity (a slowed
# run is another point to the ledger), but `check` compares such a run with its clean baseline.
# slow_rank came after schema version 2.
_SLOWDOWN = Role("in", slowdown=True)
_SLOWDOWN_LATER = Role("later", slowdown=True)


class DebugKnobs(Strict):
    """Fault injection and slow-down knobs for testing the harness itself."""

    fail_rank: Annotated[int | None, IN] = Field(None, ge=0, description="rank that raises at fail_step")
    fail_step: Annotated[int | None, IN] = Field(None, ge=0, description="step at which fail_rank raises")
    hang: Annotated[bool, IN] = Field(False, description="fail_rank sleeps forever at fail_step instead of raising")
    oom: Annotated[bool, IN] = Field(False, description="fail_rank raises an out-of-memory error at fail_step")
    slow_fraction: Annotated[float, _SLOWDOWN] = Field(
        0.0, ge=0.0, lt=10.0, description="sleep this fraction of each step's compute time"
    )
    slow_rank: Annotated[int | None, _SLOWDOWN_LATER] = Field(
        None,
        ge=0,
        description="only this rank is slowed (a straggler), by slow_fraction or, when that is 0, by half its own "
        "step and matmul time",
    )
    comm_delay_ms: Annotated[float, _SLOWDOWN_LATER] = Field(
        0.0,
        ge=0.0,
        description="the last rank enters each FSDP all-gather and reduce-scatter this many milliseconds late "
        "(a late peer: the others wait inside the collective)",
    )
    extra_matmuls: Annotated[int, _SLOWDOWN_LATER] = Field(
        0, ge=0, strict=True, description="extra matmuls of the block's shape in each block's forward (more compute)"
    )
    # Repeated, unannounced failures (a lost node): SIGKILL of one rank's own process, no error file, no
    # clean shutdown. They came after schema version 2: in a point's id only when set.
    kill_steps: Annotated[list[int] | None, LATER] = Field(
        None,
        description="strictly increasing steps; the i-th kills kill_rank in the point's i-th attempt at the start "
        "of that step, before its forward (needs train.checkpoint and launcher.max_failures >= the kills)",
    )
    kill_rank: Annotated[int | None, LATER] = Field(
        None, ge=0, description="the rank the kills end; null: the last rank"
    )
    kill_mtbf_s: Annotated[float | None, LATER] = Field(
        None,
        gt=0,
        description="for demonstrations: kill kill_rank after seconds drawn from an exponential distribution of "
        "this mean, counted from each attempt's first step, while restarts are left (launcher.max_failures)",
    )
    kill_seed: Annotated[int, LATER] = Field(0, description="the seed of kill_mtbf_s's draws")

    @property
    def kills(self) -> bool:
        """Whether this point kills one of its ranks on purpose."""
        return bool(self.kill_steps) or self.kill_mtbf_s is not None


class TelemetrySpec(Strict):
    """What each rank samples during the timed steps (the config's `telemetry.*`, docs/telemetry.md).

    It observes the point and never changes what is measured: left out of the point's identity."""

    enabled: Annotated[bool, OBSERVES] = Field(
        True, strict=True, description="sample device and host signals during the timed steps"
    )
    interval_ms: Annotated[int, OBSERVES] = Field(
        100, description="milliseconds between samples (an integer, at least 10)"
    )

    @field_validator("interval_ms", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value < 10:
            raise ValueError(f"must be an integer number of milliseconds, at least 10; got {value!r}")
        return value


class ProfileSpec(Strict):
    """torch.profiler traces of a few steps after the timed window (the config's `profile.*`,
    docs/engine.md "Profiled steps"): each rank's trace beside the record and the step's split into
    compute, exposed communication and idle (`metrics.step_breakdown`).

    The profiled steps run after the timed ones, so nothing measured is ever profiled: it observes
    the point, left out of its identity."""

    enabled: Annotated[bool, OBSERVES] = Field(
        False, strict=True, description="profile steps after the timed window; traces beside the record"
    )
    steps: Annotated[int, OBSERVES] = Field(
        3, ge=1, strict=True, description="profiled steps (after one untraced warm-up step of the profiler)"
    )
    max_mib: Annotated[float, OBSERVES] = Field(
        64.0, gt=0, description="cap on each rank's trace, MiB before compression; cut at a whole step"
    )
    every_repeats: Annotated[int, OBSERVES] = Field(
        1,
        ge=1,
        strict=True,
        description="keep the traces of one repeat in K (repeat index divisible by K); every repeat keeps its split",
    )
    memory_categories: Annotated[bool, OBSERVES] = Field(
        False,
        strict=True,
        description="one more step under FSDP2's memory tracker: metrics.peak_mem_by_category (several steps' time)",
    )
    memory_history: Annotated[bool, OBSERVES] = Field(
        False,
        strict=True,
        description="CUDA: record the allocator's history through set-up and warm-up; its snapshot on an OOM",
    )
    memory_history_entries: Annotated[int, OBSERVES] = Field(
        100_000, gt=0, strict=True, description="allocator events the memory history keeps"
    )


class PointSweep(Strict):
    """Which sweep a point belongs to and how patiently it runs (the config's `sweep.name`, `sweep.point_timeout_s`)."""

    name: Annotated[str, WHERE] = "adhoc"
    point_timeout_s: Annotated[float, HOW] = Field(
        600.0, gt=0, description="seconds a started point may run before it is `timeout`"
    )


# The repeat index is in the point's id (each repeat is a point of its own to the ledger), but
# `check` pools repeats and a history series holds every repeat.
_REPEAT = Role("in", check=False, series=False)
# The fault and slow-down knobs: in the id and in check's match (a failure injected on purpose is
# compared with a baseline that had it), not in a history series (history shows a changed knob
# like an environment change, bench/analysis/history/envdiff.py).
_DEBUG = Role("in", series=False)


def point_id_of(identity: dict[str, Any]) -> str:
    """The point id of an identity (`RunSpec.identity()`): sha256 of its sorted JSON, 12 hex digits.
    For callers that need the identity for something else too (the planner's scaling series)."""
    return id_of_text(canonical_json(identity))


class RunSpec(Strict):
    """One benchmark point, fully resolved. Field names are the config keys (`train.seq_len`, ...)."""

    sweep: Annotated[PointSweep, WHERE] = Field(default_factory=PointSweep)
    repeat: Annotated[int, _REPEAT] = Field(0, ge=0, description="repeat index (sweep.repeats); part of the point id")
    model: Annotated[ModelSpec, IN]
    strategy: Annotated[Strategy, IN] = "full_shard"
    precision: Annotated[Precision, IN] = "fp32"
    cluster: Annotated[ClusterSpec, IN]
    launcher: Annotated[Launcher, IN] = "local"
    nodes: Annotated[int, IN] = Field(1, ge=1, strict=True)
    gpus_per_node: Annotated[int, IN] = Field(1, ge=1, strict=True, description="ranks per node")
    world_size: Annotated[int, IN] = 0
    train: Annotated[TrainSpec, IN] = Field(default_factory=TrainSpec)
    debug: Annotated[DebugKnobs, _DEBUG] = Field(default_factory=DebugKnobs)
    telemetry: Annotated[TelemetrySpec, OBSERVES] = Field(default_factory=TelemetrySpec)
    profile: Annotated[ProfileSpec, OBSERVES] = Field(default_factory=ProfileSpec)

    @field_validator("strategy", "precision", "launcher", mode="before")
    @classmethod
    def _selected_name(cls, value: Any) -> Any:
        """A config group node ({name: ..., other options}) selects by its name."""
        return value.get("name") if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _resolve(self) -> RunSpec:
        if self.train.seq_len is None:
            self.train.seq_len = self.model.default_seq_len
        expected = self.nodes * self.gpus_per_node
        if self.world_size and self.world_size != expected:
            raise ValueError(f"world_size: {self.world_size} != nodes x gpus_per_node = {expected}")
        self.world_size = expected
        return self

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> RunSpec:
        """The spec of a composed config: the tree's sections as they are, `sweep` reduced to the point's part."""
        return cls.model_validate(cls.config_fields(cfg))

    @classmethod
    def config_fields(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        """What `from_config` validates: the spec's fields of a composed config (its section nodes as they are)."""
        sweep = cfg.get("sweep") or {}
        fields = {
            key: cfg[key]
            for key in (
                "model",
                "strategy",
                "precision",
                "cluster",
                "launcher",
                "train",
                "debug",
                "telemetry",
                "profile",
            )
            if key in cfg
        }
        fields.update(nodes=cfg.get("nodes"), gpus_per_node=cfg.get("gpus_per_node"))
        fields["sweep"] = {
            "name": sweep.get("name") or "adhoc",
            **({"point_timeout_s": sweep["point_timeout_s"]} if sweep.get("point_timeout_s") is not None else {}),
        }
        return fields

    @property
    def device_type(self) -> str:
        return self.cluster.device_type

    @property
    def tokens_per_step(self) -> int:
        """Tokens of the global batch in one optimizer step."""
        return self.world_size * self.train.micro_batch * self.train.grad_accum * self.train.seq_len

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs per trained token (bench/schema/flops.py): MFU's numerator."""
        return flops_per_token(self.model, self.train.seq_len)

    @property
    def hardware_flops_per_token(self) -> float:
        """FLOPs per token with what activation checkpointing recomputes: HFU's numerator."""
        train = self.train
        return hardware_flops_per_token(
            self.model, train.seq_len, train.activation_checkpointing, train.ac_every, train.ac_save_ops
        )

    @property
    def matmul_peak_tflops(self) -> float | None:
        """The device's dense peak at the rate this point's matmuls run (the precision's tensor-core
        dtype); None where the cluster has none (CPUs)."""
        return self.cluster.peak_tflops.get(PRECISIONS[self.precision].peak_dtype)

    def identity(self) -> dict[str, Any]:
        """The fields that define what is measured (the point id, check's matching, history's series),
        as each field's identity role declares it (bench/schema/identity.py)."""
        return identity_of(self)

    @property
    def point_id(self) -> str:
        """Content hash of the identity: the same point always gets the same id."""
        return point_id_of(self.identity())


# Derived from the declarations above (bench/schema/identity.py), never written again:
# fields added after schema version 2: they enter a point's identity only when set away from their
# default, so every point measured before they existed keeps its id;
LATER_FIELDS: tuple[FieldPath, ...] = paths(RunSpec, lambda role: role.enters == "later")
# the slow-down knobs (check compares a slowed run with its clean baseline);
SLOWDOWN_KNOBS: tuple[FieldPath, ...] = paths(RunSpec, lambda role: role.slowdown)
# what check's matching identity leaves out (the repeat index and the slow-down knobs);
CHECK_DROPPED: tuple[FieldPath, ...] = paths(RunSpec, lambda role: not role.matched)
# what a history series key leaves out (the repeat index and the debug knobs).
SERIES_DROPPED: tuple[FieldPath, ...] = paths(RunSpec, lambda role: not role.series)
