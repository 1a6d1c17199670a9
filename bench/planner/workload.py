"""The planner's input: one training configuration on one cluster, as plain data.

A `Workload` is what a `RunSpec` says about shapes, parallelism and hardware, minus what
only the launcher needs. Published figures (llm-foundry's MPT rows) become Workloads too,
with shapes `fsdp-bench run` cannot train, which is why the planner does not take a RunSpec
directly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bench.hardware import ClusterFacts
from bench.planner.shapes import ModelShape, llama_shape

# Bytes per element of what a precision all-gathers (parameters in param_dtype) and reduces.
PARAM_BYTES = {"fp32": 4, "bf16": 2, "bf16_pure": 2, "fp16": 2, "fp8": 2}
REDUCE_BYTES = {"fp32": 4, "bf16": 4, "bf16_pure": 2, "fp16": 4, "fp8": 4}
# fp8 (torchao, enable_fsdp_float8_all_gather): the blocks' linear weights travel in fp8.
FP8_LINEAR_BYTES = 1


@dataclass(frozen=True)
class Workload:
    shape: ModelShape
    cluster: ClusterFacts
    nodes: int
    gpus_per_node: int
    strategy: str
    precision: str
    seq_len: int
    micro_batch: int
    grad_accum: int = 1
    activation_checkpointing: str = "none"
    compile: bool = False
    cpu_offload: bool = False
    # CPU threads each rank uses (0: cores // ranks on the host, as the worker does).
    threads_per_rank: int = 0

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def shard_degree(self) -> int:
        """How many ranks share one copy of the parameters."""
        if self.strategy in ("full_shard", "shard_grad_op"):
            return self.world_size
        if self.strategy.startswith("hybrid"):
            return self.gpus_per_node
        return 1

    @property
    def reshard_blocks(self) -> bool:
        """Whether blocks free their unsharded parameters after forward (ZeRO-3 behaviour)."""
        return self.strategy in ("full_shard", "hybrid_shard")

    @property
    def param_bytes(self) -> int:
        return PARAM_BYTES[self.precision]

    @property
    def reduce_bytes(self) -> int:
        return REDUCE_BYTES[self.precision]

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation element: the compute dtype."""
        return 4 if self.precision == "fp32" else 2

    @property
    def tokens_per_micro_step(self) -> int:
        """Tokens one rank processes per micro-batch."""
        return self.micro_batch * self.seq_len

    def with_micro_batch(self, micro_batch: int) -> Workload:
        return replace(self, micro_batch=micro_batch)

    def with_nodes(self, nodes: int) -> Workload:
        return replace(self, nodes=nodes)


def workload_from_spec(spec, cluster: ClusterFacts | None = None) -> Workload:
    """A RunSpec's Workload; `cluster` replaces the spec's preset (the calibrated local-cpu one)."""
    return Workload(
        shape=llama_shape(spec.model_args()),
        cluster=cluster or spec.cluster_facts(),
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        strategy=spec.strategy,
        precision=spec.precision,
        seq_len=spec.seq_len,
        micro_batch=spec.micro_batch,
        grad_accum=spec.grad_accum,
        activation_checkpointing=spec.activation_checkpointing,
        compile=spec.compile,
        cpu_offload=spec.cpu_offload,
        threads_per_rank=spec.threads_per_rank,
    )
