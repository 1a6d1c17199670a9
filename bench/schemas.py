"""The single home of the pydantic models: what a point is (RunSpec) and what it yields (RunResult).

Torch-free. `RunSpec` validates a composed config before anything launches; `RunResult`
validates every stored record (extra="forbid", a versioned schema), so a record written
by an older or broken writer is reported rather than silently misread.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bench.hardware import CLUSTERS, PRECISION_PEAK_DTYPE, ClusterFacts
from fsdp_core.flavors import FLAVORS, ModelArgs

SCHEMA_VERSION = 1

Strategy = Literal["full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard"]
Precision = Literal["fp32", "bf16", "bf16_pure", "fp16", "fp8"]
Launcher = Literal["local", "slurm", "kubeflow", "ray"]
Checkpointing = Literal["none", "full", "selective"]
CompileBackend = Literal["inductor", "aot_eager", "eager"]
Status = Literal["ok", "oom", "failed", "timeout", "invalid", "interrupted", "skipped"]

STRATEGIES: tuple[str, ...] = Strategy.__args__
PRECISIONS: tuple[str, ...] = Precision.__args__
LAUNCHERS: tuple[str, ...] = Launcher.__args__
CHECKPOINTING: tuple[str, ...] = Checkpointing.__args__
STATUSES: tuple[str, ...] = Status.__args__

# Spec fields that say where or how patiently a point runs, not what it measures:
# they are left out of the point id so moving a results folder or raising a timeout keeps ids.
_NON_IDENTITY_FIELDS = {"sweep", "point_timeout_s", "results_dir"}
# Fields added after the first schema: they enter a point's identity only when set to something
# other than their default, so every point measured before they existed keeps its id.
_LATER_FIELDS = {"compile_backend"}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DebugKnobs(Strict):
    """Fault injection and slow-down knobs for testing the harness itself (documented in the README)."""

    fail_rank: int | None = Field(None, ge=0, description="rank that raises at fail_step")
    fail_step: int | None = Field(None, ge=0, description="step at which fail_rank raises")
    hang: bool = Field(False, description="fail_rank sleeps forever at fail_step instead of raising")
    oom: bool = Field(False, description="fail_rank raises an out-of-memory error at fail_step")
    slow_fraction: float = Field(0.0, ge=0.0, lt=10.0, description="sleep this fraction of each step's compute time")


class RunSpec(Strict):
    """One benchmark point, fully resolved. Field names are the CLI/config contract."""

    sweep: str = "adhoc"
    model: str
    model_overrides: dict[str, int | float] = Field(default_factory=dict)
    nodes: int = Field(1, ge=1, strict=True)
    gpus_per_node: int = Field(1, ge=1, strict=True)
    world_size: int = 0
    strategy: Strategy = "full_shard"
    precision: Precision = "fp32"
    cluster: str = "local-cpu"
    cluster_overrides: dict[str, Any] = Field(default_factory=dict)
    device_type: Literal["cpu", "cuda"] = "cpu"
    launcher: Launcher = "local"
    seq_len: int | None = Field(
        None, ge=1, strict=True, description="None (null) means the flavor's default sequence length"
    )
    micro_batch: int = Field(1, ge=1, strict=True)
    grad_accum: int = Field(1, ge=1, strict=True)
    steps: int = Field(8, ge=1, strict=True)
    warmup_steps: int = Field(2, ge=0, strict=True)
    activation_checkpointing: Checkpointing = "none"
    compile: bool = False
    compile_backend: CompileBackend = Field(
        "inductor", description="torch.compile backend: inductor (real kernels) or aot_eager/eager (debugging)"
    )
    cpu_offload: bool = False
    seed: int = 0
    lr: float = Field(3e-4, gt=0)
    data: str = Field("synthetic", description="'synthetic' or the path of a token file (uint16/uint32 memmap)")
    threads_per_rank: int = Field(0, ge=0, description="CPU threads per rank; 0 = cores // local ranks")
    repeat: int = Field(0, ge=0, description="repeat index (sweep.repeats); part of the point id")
    point_timeout_s: float = Field(600.0, gt=0)
    debug: DebugKnobs = Field(default_factory=DebugKnobs)

    @model_validator(mode="after")
    def _check_consistency(self) -> RunSpec:
        """Cross-field rules; every broken rule is reported (one line each), not just the first."""
        if self.model not in FLAVORS:
            raise ValueError(f"model: unknown model '{self.model}'; allowed: {', '.join(FLAVORS)}")
        args = self.model_args()  # raises on unknown override fields or inconsistent dims
        self.cluster_facts()  # raises on an unknown preset or a physically meaningless override
        if self.seq_len is None:
            self.seq_len = args.default_seq_len
        self.world_size = self.world_size or self.nodes * self.gpus_per_node
        problems = [msg for rule in _SPEC_RULES if (msg := rule(self, args))]
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def model_args(self) -> ModelArgs:
        """The flavor with this spec's overrides applied."""
        try:
            return FLAVORS[self.model].with_overrides(**self.model_overrides)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"model: {exc}") from None

    def cluster_facts(self) -> ClusterFacts:
        """The cluster preset with this spec's overrides applied, checked for physical sense."""
        if self.cluster not in CLUSTERS:
            raise ValueError(f"cluster: unknown cluster '{self.cluster}'; allowed: {', '.join(CLUSTERS)}")
        try:
            facts = CLUSTERS[self.cluster].with_overrides(**self.cluster_overrides)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"cluster: {exc}") from None
        for name in ("gpus_per_node", "device_memory_gib", "intra_node_gbps", "inter_node_gbps"):
            if getattr(facts, name) <= 0:
                raise ValueError(f"cluster.{name}: must be positive, got {getattr(facts, name)}")
        for name in ("link_latency_s", "efa_devices"):
            if getattr(facts, name) < 0:
                raise ValueError(f"cluster.{name}: must be zero or positive, got {getattr(facts, name)}")
        if facts.device_type == "cuda" and self.gpus_per_node > facts.gpus_per_node:
            raise ValueError(
                f"gpus_per_node: {self.gpus_per_node} exceeds the {facts.gpus_per_node} GPUs of a {self.cluster} node; "
                f"allowed: 1..{facts.gpus_per_node}"
            )
        for dtype, value in facts.peak_tflops.items():
            if value <= 0:
                raise ValueError(f"cluster.peak_tflops.{dtype}: must be positive, got {value}")
        return facts

    def identity(self) -> dict[str, Any]:
        """The fields that define what is measured (used for the point id and baseline matching)."""
        identity = self.model_dump(mode="json", exclude=_NON_IDENTITY_FIELDS)
        for name in _LATER_FIELDS:
            if identity[name] == type(self).model_fields[name].default:
                del identity[name]
        return identity

    @property
    def point_id(self) -> str:
        """Content hash of the resolved spec: the same point always gets the same id."""
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def tokens_per_step(self) -> int:
        """Tokens of the global batch in one optimizer step."""
        return self.world_size * self.micro_batch * self.grad_accum * self.seq_len


def _seq_len_rule(spec: RunSpec, args: ModelArgs) -> str | None:
    if spec.seq_len > args.max_seq_len:
        return f"train.seq_len: {spec.seq_len} exceeds {spec.model}'s maximum {args.max_seq_len}"
    return None


def _warmup_rule(spec: RunSpec, args: ModelArgs) -> str | None:
    if spec.warmup_steps >= spec.steps:
        return f"train.warmup_steps: must be fewer than train.steps ({spec.warmup_steps} >= {spec.steps})"
    if spec.compile and spec.warmup_steps < 2:
        # The last warm-up step runs eager (it counts communication): with one warm-up step,
        # compilation would land in the first timed step.
        return f"train.warmup_steps: train.compile=true needs at least 2 warm-up steps, got {spec.warmup_steps}"
    return None


def _world_rule(spec: RunSpec, args: ModelArgs) -> str | None:
    if spec.world_size != spec.nodes * spec.gpus_per_node:
        return f"world_size: {spec.world_size} != nodes x gpus_per_node = {spec.nodes * spec.gpus_per_node}"
    return None


def _device_rule(spec: RunSpec, args: ModelArgs) -> str | None:
    if spec.precision == "fp8" and spec.device_type != "cuda":
        return (
            "precision: fp8 needs a CUDA GPU with FP8 tensor cores (H100/H200); "
            "allowed on CPU: fp32, bf16, bf16_pure, fp16"
        )
    peaks = spec.cluster_facts().peak_tflops
    if spec.device_type == "cuda" and spec.precision == "fp8" and "fp8" not in peaks:
        allowed = ", ".join(p for p in PRECISION_PEAK_DTYPE if PRECISION_PEAK_DTYPE[p] in peaks)
        return f"precision: {spec.cluster}'s devices have no FP8 tensor cores; allowed: {allowed}"
    if spec.cpu_offload and spec.device_type != "cuda":
        return "train.cpu_offload: offloads GPU state to host memory, so it needs a CUDA cluster; allowed on CPU: false"
    return None


def _debug_rule(spec: RunSpec, args: ModelArgs) -> str | None:
    """A fault aimed at a rank or step this point does not have would silently never fire."""
    knobs = spec.debug
    if knobs.fail_rank is not None and knobs.fail_rank >= spec.world_size:
        return f"debug.fail_rank: {knobs.fail_rank} is not a rank of this point; allowed: 0..{spec.world_size - 1}"
    if knobs.fail_step is not None and knobs.fail_step >= spec.steps:
        return f"debug.fail_step: {knobs.fail_step} is not a step of this point; allowed: 0..{spec.steps - 1}"
    return None


_SPEC_RULES = (_seq_len_rule, _warmup_rule, _world_rule, _device_rule, _debug_rule)


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


class CommBytes(Strict):
    all_gather: int
    reduce_scatter: int
    all_reduce: int


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


class EnvInfo(Strict):
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    device_name: str | None = None
    device_count: int | None = None
    hostnames: list[str] = Field(default_factory=list)
    python: str | None = None
    platform: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)

    def fingerprint(self) -> dict[str, Any]:
        """What must match for two results to be comparable: software and hardware, not hosts."""
        return {
            "torch": self.torch,
            "cuda": self.cuda,
            "nccl": self.nccl,
            "device_name": self.device_name,
            "platform": self.platform,
        }


class RunResult(Strict):
    """One point's record: `RESULTS/<sweep>/<point_id>/result.json`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    point_id: str
    sweep: str
    status: Status
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    wall_s: float | None = None
    spec: RunSpec
    model_info: ModelInfo
    metrics: Metrics = Field(default_factory=Metrics)
    env: EnvInfo = Field(default_factory=EnvInfo)
    notes: dict[str, str] = Field(default_factory=dict)
    prediction: dict[str, Any] | None = None
    log_dir: str | None = None


def describe_validation_error(exc: ValidationError) -> list[str]:
    """One line per problem, naming the field, for the CLI's exit-2 messages."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "literal_error":
            allowed = err.get("ctx", {}).get("expected", "")
            msg = f"got {err.get('input')!r}; allowed: {allowed}"
        lines.extend(f"{loc}: {part}" if loc else part for part in msg.splitlines())
    return lines
