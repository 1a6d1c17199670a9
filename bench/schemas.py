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

import hashlib
import json
import re
import statistics
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fsdp_core import ac_modes
from fsdp_core.model_args import ModelArgs
from fsdp_core.protocol import RECORD_SCHEMA_VERSION
from fsdp_core.recipes import PRECISIONS, STRATEGIES

SCHEMA_VERSION = RECORD_SCHEMA_VERSION  # one home: fsdp_core/protocol.py (the worker writes it)

Strategy = Literal[tuple(STRATEGIES)]  # type: ignore[valid-type]
Precision = Literal[tuple(PRECISIONS)]  # type: ignore[valid-type]
Launcher = Literal["local", "slurm", "kubeflow", "ray"]
Checkpointing = Literal[ac_modes.AC_MODES]  # type: ignore[valid-type]
CheckpointMode = Literal["none", "sync", "async"]
CompileBackend = Literal["inductor", "aot_eager", "eager"]
DeviceType = Literal["cpu", "cuda"]
Status = Literal["ok", "oom", "failed", "timeout", "invalid", "interrupted", "skipped"]

LAUNCHERS: tuple[str, ...] = Launcher.__args__
CHECKPOINTING: tuple[str, ...] = Checkpointing.__args__
STATUSES: tuple[str, ...] = Status.__args__


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _positive(value: float, name: str) -> float:
    if isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name}: must be positive, got {value:g}")
    return value


class ModelSpec(Strict):
    """A Llama-architecture model, fully resolved (sweeps/model/<name>.yaml, with any overrides)."""

    name: str
    dim: int = Field(ge=1, strict=True)
    n_layers: int = Field(ge=1, strict=True)
    n_heads: int = Field(ge=1, strict=True)
    n_kv_heads: int = Field(ge=1, strict=True)
    ffn_dim: int = Field(ge=1, strict=True)
    vocab_size: int = Field(ge=1, strict=True)
    max_seq_len: int = Field(ge=1, strict=True)
    default_seq_len: int | None = Field(None, ge=1, strict=True, description="null: max_seq_len")
    norm_eps: float = Field(1e-5, gt=0, description="RMSNorm epsilon (Llama-2: 1e-5)")
    rope_theta: float = Field(10000.0, gt=0, description="RoPE base (Llama-2: 10000, Llama-3: 500000)")
    source: str = Field("", description="where the numbers come from")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="fields set away from the named preset when composed (labels only)"
    )

    @model_validator(mode="after")
    def _shape(self) -> ModelSpec:
        if self.dim % self.n_heads:
            raise ValueError(f"dim={self.dim} must be divisible by n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} must be divisible by n_kv_heads={self.n_kv_heads}")
        if self.default_seq_len is None:
            self.default_seq_len = self.max_seq_len
        return self

    def args(self) -> ModelArgs:
        """The engine's (torch-free) model arguments."""
        return ModelArgs(**self.model_dump(exclude={"overrides"}))


class DeviceSpec(Strict):
    """One accelerator model (sweeps/device/<name>.yaml): what MFU divides by and the planner fills."""

    name: str
    match: list[str] = Field(
        default_factory=list, description="torch.cuda.get_device_name() values without 'NVIDIA ', matched exactly"
    )
    memory_gib: float = Field(gt=0)
    peak_tflops: dict[str, float] = Field(default_factory=dict, description="dense peaks by dtype, TFLOP/s")
    memory_gbps: float | None = Field(None, gt=0, description="datasheet memory bandwidth, GB/s")
    host_link_gbps: float | None = Field(None, gt=0, description="host link per direction, GB/s (CPU offload)")
    relative_efficiency: float = Field(
        1.0, gt=0, description="the planner's achievable fraction of peak relative to the H100's fitted one"
    )
    source: str = ""

    @field_validator("peak_tflops")
    @classmethod
    def _peaks(cls, peaks: dict[str, float]) -> dict[str, float]:
        for dtype, value in peaks.items():
            _positive(value, f"peak_tflops.{dtype}")
        return peaks


class ClusterSpec(Strict):
    """One node type (sweeps/cluster/<name>.yaml), resolved: its device and links."""

    name: str
    device: DeviceSpec
    device_type: DeviceType = "cuda"
    gpus_per_node: int = Field(ge=1, strict=True)
    device_memory_gib: float | None = Field(None, description="null: the device's memory")
    peak_tflops: dict[str, float | None] = Field(default_factory=dict, description="per dtype; null: the device's")
    intra_node_gbps: float = Field(description="one GPU's unidirectional NVLink bandwidth, Gbit/s")
    inter_node_gbps: float = Field(description="the whole node's network bandwidth, Gbit/s")
    efa_devices: int = Field(0, ge=0, strict=True)
    link_latency_s: float = Field(1e-5, ge=0, description="per-message latency of a ring hop, seconds")
    storage_gbps: float = Field(
        80.0, gt=0, description="aggregate write/read bandwidth of the checkpoint storage the nodes share, Gbit/s"
    )
    source: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict, description="fields set away from the preset when composed")

    @model_validator(mode="after")
    def _resolve(self) -> ClusterSpec:
        """Fill the device's memory and peaks where the cluster does not override them."""
        if self.device_memory_gib is None:
            self.device_memory_gib = self.device.memory_gib
        self.peak_tflops = {**self.device.peak_tflops, **{k: v for k, v in self.peak_tflops.items() if v is not None}}
        for name in ("device_memory_gib", "intra_node_gbps", "inter_node_gbps"):
            _positive(getattr(self, name), name)
        for dtype, value in self.peak_tflops.items():
            _positive(value, f"peak_tflops.{dtype}")
        return self


class TrainSpec(Strict):
    """How a point trains (the config's `train.*`)."""

    seq_len: int | None = Field(None, ge=1, strict=True, description="null: the model's default_seq_len")
    micro_batch: int = Field(1, ge=1, strict=True, description="sequences per rank per micro-step")
    grad_accum: int = Field(1, ge=1, strict=True, description="micro-steps per optimizer step")
    steps: int = Field(8, ge=1, strict=True, description="optimizer steps, warm-up included")
    warmup_steps: int = Field(
        2, ge=0, strict=True, description="untimed first steps; the last one counts communication"
    )
    activation_checkpointing: Checkpointing = Field(
        "none",
        description="none, full (every block), selective_op (torchtitan's per-op policy in every block; "
        "`selective` means this), selective_layer (every ac_every-th block)",
    )
    ac_every: int = Field(
        ac_modes.DEFAULT_AC_EVERY, ge=1, strict=True, description="selective_layer: checkpoint every N-th block"
    )
    ac_save_ops: list[str] | None = Field(
        None,
        description="selective_op: the op groups whose outputs are saved (mm, sdpa, collectives, max); "
        "null: all of them (torchtitan's policy)",
    )
    compile: bool = Field(False, description="torch.compile each block")
    compile_backend: CompileBackend = Field(
        "inductor", description="torch.compile backend: inductor (real kernels) or aot_eager/eager (debugging)"
    )
    cpu_offload: bool = Field(False, description="offload parameters, gradients and optimizer state to the host (CUDA)")
    seed: int = Field(0, description="model initialisation and data")
    lr: float = Field(3e-4, gt=0, description="AdamW learning rate")
    data: str = Field("synthetic", description="'synthetic' or the path of a token file (uint16/uint32 memmap)")
    threads_per_rank: int = Field(0, ge=0, description="CPU threads per rank; 0 = cores // ranks on the host")
    checkpoint: CheckpointMode = Field("none", description="DCP checkpoints of model and optimizer: none, sync, async")
    checkpoint_every: int | None = Field(
        None,
        ge=1,
        strict=True,
        description="save after every K-th timed step; null: once, after the last step (ignored with checkpoint=none)",
    )
    checkpoint_dir: str | None = Field(
        None, description="a path or fsspec URL; null: <results_dir>/<sweep>/<point_id>/checkpoint"
    )
    resume: bool = Field(False, description="start from the latest complete checkpoint in checkpoint_dir")

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
        unknown = ac_modes.unknown_save_ops(groups or [])
        if unknown:
            allowed = ", ".join(ac_modes.SAVE_OP_GROUPS)
            raise ValueError(f"unknown op group {', '.join(map(repr, unknown))}; allowed: {allowed}")
        return groups


# The knobs that slow a point down without changing its workload: `check` compares such a run
# with its clean baseline (bench/check/points.py).
SLOWDOWN_KNOBS = ("slow_fraction", "slow_rank")


class DebugKnobs(Strict):
    """Fault injection and slow-down knobs for testing the harness itself."""

    fail_rank: int | None = Field(None, ge=0, description="rank that raises at fail_step")
    fail_step: int | None = Field(None, ge=0, description="step at which fail_rank raises")
    hang: bool = Field(False, description="fail_rank sleeps forever at fail_step instead of raising")
    oom: bool = Field(False, description="fail_rank raises an out-of-memory error at fail_step")
    slow_fraction: float = Field(0.0, ge=0.0, lt=10.0, description="sleep this fraction of each step's compute time")
    slow_rank: int | None = Field(
        None,
        ge=0,
        description="only this rank is slowed (a straggler), by slow_fraction or, when that is 0, by half its own "
        "step and matmul time",
    )


class TelemetrySpec(Strict):
    """What each rank samples during the timed steps (the config's `telemetry.*`, docs/telemetry.md).

    It observes the point and never changes what is measured: left out of the point's identity."""

    enabled: bool = Field(True, strict=True, description="sample device and host signals during the timed steps")
    interval_ms: int = Field(100, description="milliseconds between samples (an integer, at least 10)")

    @field_validator("interval_ms", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value < 10:
            raise ValueError(f"must be an integer number of milliseconds, at least 10; got {value!r}")
        return value


class PointSweep(Strict):
    """Which sweep a point belongs to and how patiently it runs (the config's `sweep.name`, `sweep.point_timeout_s`)."""

    name: str = "adhoc"
    point_timeout_s: float = Field(600.0, gt=0, description="seconds a started point may run before it is `timeout`")


# Spec fields that say where or how patiently a point runs, or only describe it: left out of the
# point's identity, so moving a results folder, raising a timeout or correcting a source link
# keeps ids. Model and cluster enter by what changes the measurement (shape; the node type).
# A checkpoint's location and whether a run resumes say where and how a point runs (a resumed run
# continues the same point, in the same results folder).
_IDENTITY_EXCLUDE = {
    "sweep": True,
    "telemetry": True,
    "model": {"source", "overrides", "max_seq_len", "default_seq_len"},
    "cluster": {
        "device", "gpus_per_node", "device_memory_gib", "peak_tflops", "intra_node_gbps", "inter_node_gbps",
        "efa_devices", "link_latency_s", "storage_gbps", "source", "overrides",
    },
    "train": {"checkpoint_dir", "resume"},
}  # fmt: skip
# Fields added after schema version 2, as (section, field): they enter a point's identity only when
# set away from their default, so every point measured before they existed keeps its id.
LATER_FIELDS: tuple[tuple[str, str], ...] = (
    ("debug", "slow_rank"),
    ("train", "ac_every"),
    ("train", "ac_save_ops"),
    ("train", "checkpoint"),
    ("train", "checkpoint_every"),
)


def _ac_identity(train: dict[str, Any]) -> None:
    """The checkpointing fields as a point's identity says them: a knob enters only under the mode
    it tunes, and every second block keeps the name it was first measured under (`selective`), so
    records from before the split into selective_op and selective_layer keep their ids."""
    mode = train.get("activation_checkpointing")
    if mode != ac_modes.SELECTIVE_LAYER:
        train.pop("ac_every", None)
    elif train.get("ac_every") == ac_modes.DEFAULT_AC_EVERY:
        train["activation_checkpointing"] = ac_modes.LEGACY_SELECTIVE
    if mode != ac_modes.SELECTIVE_OP:
        train.pop("ac_save_ops", None)


class RunSpec(Strict):
    """One benchmark point, fully resolved. Field names are the config keys (`train.seq_len`, ...)."""

    sweep: PointSweep = Field(default_factory=PointSweep)
    repeat: int = Field(0, ge=0, description="repeat index (sweep.repeats); part of the point id")
    model: ModelSpec
    strategy: Strategy = "full_shard"
    precision: Precision = "fp32"
    cluster: ClusterSpec
    launcher: Launcher = "local"
    nodes: int = Field(1, ge=1, strict=True)
    gpus_per_node: int = Field(1, ge=1, strict=True, description="ranks per node")
    world_size: int = 0
    train: TrainSpec = Field(default_factory=TrainSpec)
    debug: DebugKnobs = Field(default_factory=DebugKnobs)
    telemetry: TelemetrySpec = Field(default_factory=TelemetrySpec)

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
        sweep = cfg.get("sweep") or {}
        fields = {
            key: cfg[key]
            for key in ("model", "strategy", "precision", "cluster", "launcher", "train", "debug", "telemetry")
            if key in cfg
        }
        fields.update(nodes=cfg.get("nodes"), gpus_per_node=cfg.get("gpus_per_node"))
        fields["sweep"] = {
            "name": sweep.get("name") or "adhoc",
            **({"point_timeout_s": sweep["point_timeout_s"]} if sweep.get("point_timeout_s") is not None else {}),
        }
        return cls.model_validate(fields)

    @property
    def device_type(self) -> str:
        return self.cluster.device_type

    @property
    def tokens_per_step(self) -> int:
        """Tokens of the global batch in one optimizer step."""
        return self.world_size * self.train.micro_batch * self.train.grad_accum * self.train.seq_len

    @property
    def matmul_peak_tflops(self) -> float | None:
        """The device's dense peak at the rate this point's matmuls run (the precision's tensor-core
        dtype); None where the cluster has none (CPUs)."""
        return self.cluster.peak_tflops.get(PRECISIONS[self.precision].peak_dtype)

    def identity(self) -> dict[str, Any]:
        """The fields that define what is measured (the point id and check's matching)."""
        identity = self.model_dump(mode="json", exclude=_IDENTITY_EXCLUDE)
        _ac_identity(identity["train"])
        for section, name in LATER_FIELDS:
            node = identity.get(section, {})
            if name in node and node[name] == type(getattr(self, section)).model_fields[name].default:
                del node[name]
        return identity

    @property
    def point_id(self) -> str:
        """Content hash of the identity: the same point always gets the same id."""
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


# Rules a new point must satisfy before it launches (never applied to stored records): each
# returns a one-line problem naming the config key, or None.
def _seq_len_rule(spec: RunSpec) -> str | None:
    if spec.train.seq_len > spec.model.max_seq_len:
        return f"train.seq_len: {spec.train.seq_len} exceeds {spec.model.name}'s maximum {spec.model.max_seq_len}"
    return None


def _warmup_rule(spec: RunSpec) -> str | None:
    train = spec.train
    if train.warmup_steps >= train.steps:
        return f"train.warmup_steps: must be fewer than train.steps ({train.warmup_steps} >= {train.steps})"
    if train.compile and train.warmup_steps < 2:
        # The last warm-up step runs eager (it counts communication): with one warm-up step,
        # compilation would land in the first timed step.
        return f"train.warmup_steps: train.compile=true needs at least 2 warm-up steps, got {train.warmup_steps}"
    return None


def _device_rule(spec: RunSpec) -> str | None:
    recipe = PRECISIONS[spec.precision]
    if spec.device_type not in recipe.device_types:
        allowed = ", ".join(p for p, r in PRECISIONS.items() if spec.device_type in r.device_types)
        return (
            f"precision: {spec.precision} needs a CUDA GPU ({recipe.summary}); allowed on {spec.device_type}: {allowed}"
        )
    peaks = spec.cluster.peak_tflops
    if spec.device_type == "cuda" and recipe.peak_dtype not in peaks:
        allowed = ", ".join(p for p, r in PRECISIONS.items() if r.peak_dtype in peaks and "cuda" in r.device_types)
        return f"precision: {spec.cluster.name}'s devices have no {recipe.peak_dtype} tensor cores; allowed: {allowed}"
    if spec.train.cpu_offload and spec.device_type != "cuda":
        return "train.cpu_offload: offloads GPU state to host memory, so it needs a CUDA cluster; allowed on CPU: false"
    if spec.device_type == "cuda" and spec.gpus_per_node > spec.cluster.gpus_per_node:
        return (
            f"gpus_per_node: {spec.gpus_per_node} exceeds the {spec.cluster.gpus_per_node} GPUs of a "
            f"{spec.cluster.name} node; allowed: 1..{spec.cluster.gpus_per_node}"
        )
    return None


def _debug_rule(spec: RunSpec) -> str | None:
    """A fault aimed at a rank or step this point does not have would silently never fire."""
    knobs = spec.debug
    if knobs.fail_rank is not None and knobs.fail_rank >= spec.world_size:
        return f"debug.fail_rank: {knobs.fail_rank} is not a rank of this point; allowed: 0..{spec.world_size - 1}"
    if knobs.fail_step is not None and knobs.fail_step >= spec.train.steps:
        return f"debug.fail_step: {knobs.fail_step} is not a step of this point; allowed: 0..{spec.train.steps - 1}"
    if knobs.slow_rank is not None and knobs.slow_rank >= spec.world_size:
        return f"debug.slow_rank: {knobs.slow_rank} is not a rank of this point; allowed: 0..{spec.world_size - 1}"
    return None


def _ac_rule(spec: RunSpec) -> str | None:
    """A checkpointing knob set for a mode it does not tune would silently do nothing."""
    train = spec.train
    mode = train.activation_checkpointing
    if train.ac_every != ac_modes.DEFAULT_AC_EVERY and mode != ac_modes.SELECTIVE_LAYER:
        return f"train.ac_every: tunes selective_layer only, but train.activation_checkpointing is {mode}"
    if train.ac_save_ops is not None and mode != ac_modes.SELECTIVE_OP:
        return f"train.ac_save_ops: tunes selective_op only, but train.activation_checkpointing is {mode}"
    return None


def _checkpoint_rule(spec: RunSpec) -> str | None:
    """Saves happen after timed steps: an interval needs a mode and must fit in the timed steps."""
    train = spec.train
    timed = train.steps - train.warmup_steps
    if train.checkpoint_every is None:
        return None
    if train.checkpoint_every > timed:
        return (
            f"train.checkpoint_every: {train.checkpoint_every} is beyond the {timed} timed steps "
            f"(train.steps - train.warmup_steps); allowed: 1..{timed}"
        )
    return None


LAUNCH_RULES = (_seq_len_rule, _warmup_rule, _device_rule, _debug_rule, _ac_rule, _checkpoint_rule)


def launch_problems(spec: RunSpec) -> list[str]:
    """Every rule a new point breaks (one line each, naming the config key); empty when it may launch."""
    return [message for rule in LAUNCH_RULES if (message := rule(spec))]


class ModelInfo(Strict):
    params: int
    non_embedding_params: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int


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


class HostLoad(Strict):
    """A host's 1-minute load average when the timed window opened and closed, and the cores the
    point's ranks on it used (CPU threads; one per rank on GPU)."""

    host: str
    cores: int
    ranks_cores: int
    before: float
    after: float

    @property
    def loaded(self) -> bool:
        """Other work used cores beyond the ones this point's ranks use."""
        return max(self.before, self.after) > self.ranks_cores + 0.5


class CommBytes(Strict):
    all_gather: int
    reduce_scatter: int
    all_reduce: int


class SignalSummary(Strict):
    """One sampled signal over the timed window: a gauge's samples, or a cumulative counter's
    per-second rate (in `unit`, e.g. W for an energy counter) plus its `total` (difference)."""

    unit: str
    mean: float
    p10: float
    p90: float
    max: float
    samples: int
    total: float | None = None


class RankTelemetry(Strict):
    """One rank's device and process signals (fsdp_core/telemetry_summary.py's rank_summary)."""

    rank: int
    host: str
    device: str = ""
    samples: int
    span_s: float
    signals: dict[str, SignalSummary] = Field(default_factory=dict)
    util_pct: float | None = None
    idle_fraction: float | None = None
    throttle_fraction: float | None = None
    energy_j: float | None = None
    avg_power_w: float | None = None
    sampler_cpu_s: float | None = None
    missing: dict[str, str] = Field(default_factory=dict)


class HostTelemetry(Strict):
    """One host's shared signals (CPU, network, InfiniBand/EFA, RAPL), read by its lowest rank."""

    host: str
    ranks: int
    signals: dict[str, SignalSummary] = Field(default_factory=dict)
    cpu_energy_j: float | None = None
    cpu_power_w: float | None = None


class Telemetry(Strict):
    """What the devices and hosts did during the timed steps (docs/telemetry.md); `missing` says
    why a null field or an absent signal was not measured. `sidecar`: the raw series' file, next
    to result.json."""

    interval_ms: int | None = None
    window_s: float
    ranks: int
    samples: int
    sampler_cpu_s: float | None = None  # CPU time the sampling threads used, summed over ranks
    sidecar: str | None = None
    util_pct: float | None = None
    idle_devices: int = 0
    throttle_fraction: float | None = None
    throttle_reasons: dict[str, float] = Field(default_factory=dict)
    energy_source: Literal["gpu", "cpu-package"] | None = None
    energy_j: float | None = None
    energy_per_token_j: float | None = None
    avg_power_w_per_device: float | None = None
    signals: dict[str, SignalSummary] = Field(default_factory=dict)
    per_rank: list[RankTelemetry] = Field(default_factory=list)
    per_host: list[HostTelemetry] = Field(default_factory=list)
    missing: dict[str, str] = Field(default_factory=dict)


class CheckpointSave(Strict):
    """One save: times are the slowest rank's; bytes as DCP's metadata lists them."""

    step: int = Field(description="the optimizer step (0-based) the saved state follows")
    blocked_s: float = Field(description="training held: the whole save (sync); previous save + staging (async)")
    staging_s: float | None = Field(None, description="async: copying the state into host memory")
    durable_s: float = Field(description="from the save's start until every file and the metadata are written")
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

    mode: CheckpointMode
    every: int
    dir: str
    saves: list[CheckpointSave] = Field(default_factory=list)
    blocked_s: float = 0.0
    load: CheckpointLoad | None = Field(None, description="a load of the latest checkpoint after the timed window")
    resumed: CheckpointLoad | None = Field(None, description="the load a resumed run started from")
    tokens_per_s_with_checkpoints: float | None = Field(None, description="over the timed window, saves included")
    goodput: float | None = Field(None, description="tokens_per_s_with_checkpoints / tokens_per_s")
    blocked_fraction: float | None = Field(None, description="blocked_s / the timed window")


class Metrics(Strict):
    """Measured numbers; null (with a reason in RunResult.notes) when they cannot be measured."""

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
    # Each rank's median busy time per step (up to the step's closing synchronisation: on CPU the
    # time before the barrier, so a straggler shows; on GPU CUDA-event time, which includes waits
    # inside collectives) and the slowest of them.
    rank_step_time_medians_s: list[float] = Field(default_factory=list)
    slowest_rank: int | None = None
    host_load: list[HostLoad] = Field(default_factory=list)


class EnvInfo(Strict):
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    driver: str | None = None  # the NVIDIA kernel driver (CUDA only); not in the fingerprint, history shows it
    device_name: str | None = None
    device_count: int | None = None
    hostnames: list[str] = Field(default_factory=list)
    rank_hosts: list[str] = Field(default_factory=list)  # each rank's node, in rank order (names stragglers)
    python: str | None = None
    platform: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None
    # The fsdp-bench that launched the point (bench/version.py): package version, plus "+g<commit>"
    # (".dirty") when run from a checkout. Not in the fingerprint: a harness upgrade keeps baselines comparable.
    harness: str | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    # Whether the point ran holding the host lock (bench/locks.py): True held, False skipped
    # (sweep.allow_concurrent=true), None not applicable (a cluster launcher).
    exclusive_host: bool | None = None

    def fingerprint(self) -> dict[str, Any]:
        """What must match for two results to be comparable: software and hardware, not hosts."""
        return {
            "torch": self.torch,
            "cuda": self.cuda,
            "nccl": self.nccl,
            "device_name": self.device_name,
            "platform": self.platform,
        }


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

    kind: Literal["preflight"] = "preflight"
    schema_version: Literal[1] = 1
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


Objective = Literal["tokens_per_s", "tokens_per_s_per_device", "mfu"]
OBJECTIVES: tuple[str, ...] = Objective.__args__


class SearchOptions(Strict):
    """The config's `search.*`: what `plan --best` and `sweep.autotune` rank by and hold fixed."""

    objective: Objective = Field("tokens_per_s", description="what the planner ranks configurations by")
    global_batch: int | None = Field(
        None, ge=1, strict=True, description="sequences per optimizer step held fixed (grad_accum follows); null: free"
    )


class Recipe(Strict):
    """The strategy and precision recipes a point ran with (fsdp_core/recipes.py, as they were)."""

    strategy: dict[str, Any]
    precision: dict[str, Any]


class RunResult(Strict):
    """One point's record: `RESULTS/<sweep>/<point_id>/result.json` (bench/records.py reads older versions)."""

    schema_version: Literal[2] = SCHEMA_VERSION
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
    log_dir: str | None = None


def recipe_of(spec: RunSpec) -> Recipe:
    return Recipe(strategy=STRATEGIES[spec.strategy].as_dict(), precision=PRECISIONS[spec.precision].as_dict())


def model_info(spec: RunSpec) -> ModelInfo:
    return ModelInfo(**spec.model.args().info())


def describe_validation_error(exc: ValidationError, prefix: str = "") -> list[str]:
    """One line per problem, naming the field as a config key (`train.seq_len`), for exit-2 messages."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-after"))
        msg = err["msg"].removeprefix("Value error, ")
        # A validator that checks a nested field names it first ("peak_tflops.bf16: must be positive").
        named = re.match(r"^([A-Za-z_][\w.]*): (.+)$", msg, re.S)
        if named and err["type"] == "value_error":
            loc, msg = ".".join(p for p in (loc, named[1]) if p), named[2]
        loc = f"{prefix}{loc}" if loc else prefix.rstrip(".").rstrip(":").rstrip()
        if err["type"] == "literal_error":
            allowed = err.get("ctx", {}).get("expected", "")
            msg = f"got {err.get('input')!r}; allowed: {allowed}"
        elif err["type"] in ("bool_type", "bool_parsing"):
            msg = f"got {err.get('input')!r}; allowed: true, false"
        elif err["type"] == "missing":
            msg = "missing"
        lines.extend(f"{loc}: {part}" if loc else part for part in msg.splitlines())
    return lines
