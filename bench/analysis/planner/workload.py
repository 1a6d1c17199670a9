"""The planner's input: one training configuration on one cluster, as plain data.

A `Workload` is what a `RunSpec` says about shapes, parallelism and hardware, minus what
only the launcher needs. Published figures (llm-foundry's MPT rows) become Workloads too,
with shapes `fsdp-bench run` cannot train, which is why the planner does not take a RunSpec
directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from bench.analysis.planner.shapes import ModelShape, llama_shape
from bench.schema.ac_modes import DEFAULT_AC_EVERY, NONE
from bench.schema.recipes import HYBRID, PrecisionRecipe, StrategyRecipe, precision, strategy
from bench.schema.spec import ClusterSpec


@dataclass(frozen=True)
class Workload:
    shape: ModelShape
    cluster: ClusterSpec
    nodes: int
    gpus_per_node: int
    strategy: str
    precision: str
    seq_len: int
    micro_batch: int
    grad_accum: int = 1
    activation_checkpointing: str = NONE
    ac_every: int = DEFAULT_AC_EVERY  # selective_layer
    ac_save_ops: tuple[str, ...] | None = None  # selective_op (None: torchtitan's policy)
    compile: bool = False
    cpu_offload: bool = False
    # CPU threads each rank uses (0: cores // ranks on the host, as the worker does).
    threads_per_rank: int = 0
    # Measured collective links, overriding the cluster's nominal ones: "<kind>_gbps" and
    # "<kind>_latency_s" per collective kind (a CPU host's `fsdp-bench calibrate`).
    links: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    # A CPU host's compute calibration replacing `fsdp-bench calibrate`'s (a preflight's matmul rate).
    cpu: object | None = field(default=None, hash=False, compare=False)

    @property
    def strategy_recipe(self) -> StrategyRecipe:
        return strategy(self.strategy)

    @property
    def precision_recipe(self) -> PrecisionRecipe:
        return precision(self.precision)

    @property
    def hybrid(self) -> bool:
        return self.strategy_recipe.mesh == HYBRID

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def shard_degree(self) -> int:
        """How many ranks share one copy of the parameters."""
        return _shard_degree(self.strategy, self.nodes, self.gpus_per_node)

    @property
    def reshard_blocks(self) -> bool:
        """Whether blocks free their unsharded parameters after forward (ZeRO-3 behaviour)."""
        return self.strategy_recipe.reshard_after_forward

    @property
    def param_bytes(self) -> int:
        return self.precision_recipe.param_bytes

    @property
    def reduce_bytes(self) -> int:
        return self.precision_recipe.reduce_bytes

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation element: the compute dtype."""
        return self.precision_recipe.activation_bytes

    @property
    def tokens_per_micro_step(self) -> int:
        """Tokens one rank processes per micro-batch."""
        return self.micro_batch * self.seq_len

    def with_micro_batch(self, micro_batch: int) -> Workload:
        return replace(self, micro_batch=micro_batch)

    def with_nodes(self, nodes: int) -> Workload:
        return replace(self, nodes=nodes)


@lru_cache(maxsize=1024)
def _shard_degree(name: str, nodes: int, gpus_per_node: int) -> int:
    # Cached: the memory and communication models ask it a dozen times per point.
    return strategy(name).shard_degree(nodes, gpus_per_node)


def workload_from_spec(
    spec, cluster: ClusterSpec | None = None, links: dict[str, float] | None = None, cpu: object | None = None
) -> Workload:
    """A RunSpec's Workload; `cluster`, `links` and `cpu` replace the spec's (a calibrated or preflighted host's)."""
    train = spec.train
    return Workload(
        shape=llama_shape(spec.model),
        cluster=cluster or spec.cluster,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        strategy=spec.strategy,
        precision=spec.precision,
        seq_len=train.seq_len,
        micro_batch=train.micro_batch,
        grad_accum=train.grad_accum,
        activation_checkpointing=train.activation_checkpointing,
        ac_every=train.ac_every,
        ac_save_ops=tuple(train.ac_save_ops) if train.ac_save_ops is not None else None,
        compile=train.compile,
        cpu_offload=train.cpu_offload,
        threads_per_rank=train.threads_per_rank,
        links=dict(links or {}),
        cpu=cpu,
    )
