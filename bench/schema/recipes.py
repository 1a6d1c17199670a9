"""What each sharding strategy and precision means: the one home of these facts.

Torch-free and dependency-free, so every layer reads the same table: the config schema (the
allowed names), the engine (mesh, resharding, dtypes, scaler, fp8), the planner (shard degree,
bytes per element, the peak its matmuls run at), MFU (the peak it divides by), the report's
labels and the tests. A record stores the recipes it ran with, so it stays readable if a recipe
changes later.

Strategies (FSDP2 `fully_shard` on a DeviceMesh; the root module never reshards after forward):

| strategy           | mesh                                  | blocks reshard after forward | gradients          |
|--------------------|---------------------------------------|------------------------------|--------------------|
| full_shard         | (world,) shard                        | yes (ZeRO-3)                 | reduce-scatter     |
| shard_grad_op      | (world,) shard                        | no  (ZeRO-2)                 | reduce-scatter     |
| hybrid_shard       | (nodes, gpus_per_node) replicate x shard | yes                       | reduce-scatter in a node, all-reduce across |
| hybrid_shard_zero2 | (nodes, gpus_per_node) replicate x shard | no                        | as hybrid_shard    |
| no_shard           | (world, 1) replicate x shard          | no (plain data parallel)     | all-reduce         |

Precisions (FSDP2 MixedPrecisionPolicy; sharded master weights, gradients as the optimizer sees
them and AdamW state stay fp32 in every recipe):

| precision | parameters gathered and computed in     | gradients reduced in | extra                  |
|-----------|-----------------------------------------|----------------------|------------------------|
| fp32      | fp32                                    | fp32                 |                        |
| bf16      | bf16                                    | fp32                 |                        |
| bf16_pure | bf16                                    | bf16                 | llama-recipes' pure_bf16 |
| fp16      | fp16                                    | fp32                 | sharded gradient scaler |
| fp8       | fp8 linears (torchao), bf16 elsewhere   | fp32                 | CUDA, compute capability >= 8.9 |
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

# Mesh layouts: how the world is arranged into the data-parallel mesh.
SHARD, HYBRID, REPLICATE = "shard", "hybrid", "replicate"


@dataclass(frozen=True)
class StrategyRecipe:
    name: str
    mesh: str  # SHARD: (world,); HYBRID: (nodes, gpus_per_node); REPLICATE: (world, 1)
    reshard_after_forward: bool  # blocks free their gathered parameters after forward (ZeRO-3)
    summary: str

    def mesh_layout(self, nodes: int, gpus_per_node: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """(shape, dimension names) of the data-parallel mesh."""
        world = nodes * gpus_per_node
        if self.mesh == SHARD:
            return (world,), ("shard",)
        if self.mesh == HYBRID:
            return (nodes, gpus_per_node), ("replicate", "shard")
        return (world, 1), ("replicate", "shard")

    def shard_degree(self, nodes: int, gpus_per_node: int) -> int:
        """How many ranks share one copy of the parameters (the size of the mesh's shard dimension)."""
        shape, names = self.mesh_layout(nodes, gpus_per_node)
        return shape[names.index("shard")]

    def replicas(self, nodes: int, gpus_per_node: int) -> int:
        """How many copies of the parameters the world holds (gradients are all-reduced across them)."""
        return nodes * gpus_per_node // self.shard_degree(nodes, gpus_per_node)

    def as_dict(self) -> dict:
        return _json_native(asdict(self))


@dataclass(frozen=True)
class PrecisionRecipe:
    name: str
    param_dtype: str  # all-gathered parameters and compute ("float32", "bfloat16", "float16")
    reduce_dtype: str  # gradient reduce-scatter / all-reduce
    grad_scaler: bool  # fp16: ShardedGradScaler
    fp8_linears: bool  # torchao Float8Linear with fp8 all-gather for the aligned block linears
    device_types: tuple[str, ...]  # where it can run
    min_capability: tuple[int, int] | None  # CUDA compute capability it needs
    peak_dtype: str  # the tensor-core rate its matmuls run at (the planner's compute rate)
    mfu_peak_dtype: str  # the peak MFU divides by (fp8: bf16, torchtitan's convention)
    summary: str

    @property
    def param_bytes(self) -> int:
        """Bytes per element of what is all-gathered (fp8 linears: see FP8_LINEAR_BYTES)."""
        return DTYPE_BYTES[self.param_dtype]

    @property
    def reduce_bytes(self) -> int:
        return DTYPE_BYTES[self.reduce_dtype]

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation element: the compute dtype."""
        return DTYPE_BYTES[self.param_dtype]

    def as_dict(self) -> dict:
        return _json_native(asdict(self))


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# fp8 with enable_fsdp_float8_all_gather: the converted linears' weights travel in fp8.
FP8_LINEAR_BYTES = 1
# torch._scaled_mm (the fp8 matmul behind torchao's Float8Linear) needs both dimensions of the
# weight to be multiples of 16; an unaligned Linear fails at its first matmul on the GPU.
FP8_ALIGNMENT = 16
# The output projection stays in bf16: its vocab-sized matmul feeds the loss directly and is
# sensitive to fp8 error (torchtitan's default filter_fqns = ["output"] does the same).
FP8_EXCLUDED_FQNS = ("output",)


def fp8_converts(out_features: int, in_features: int) -> bool:
    """Whether a block's Linear of this shape runs in fp8 (the engine's rule; torch-free for the planner)."""
    return out_features % FP8_ALIGNMENT == 0 and in_features % FP8_ALIGNMENT == 0


STRATEGIES: dict[str, StrategyRecipe] = {
    r.name: r
    for r in (
        StrategyRecipe("full_shard", SHARD, True, "ZeRO-3: parameters, gradients and optimizer state sharded"),
        StrategyRecipe("shard_grad_op", SHARD, False, "ZeRO-2: parameters stay gathered from forward to backward"),
        StrategyRecipe("hybrid_shard", HYBRID, True, "HSDP: shard within a node, replicate across nodes"),
        StrategyRecipe("hybrid_shard_zero2", HYBRID, False, "HSDP with ZeRO-2 behaviour inside the node"),
        StrategyRecipe("no_shard", REPLICATE, False, "plain data parallelism: gradients all-reduced"),
    )
}

_ANY = ("cpu", "cuda")
PRECISIONS: dict[str, PrecisionRecipe] = {
    r.name: r
    for r in (
        PrecisionRecipe("fp32", "float32", "float32", False, False, _ANY, None, "fp32", "fp32", "fp32 throughout"),
        PrecisionRecipe(
            "bf16", "bfloat16", "float32", False, False, _ANY, None, "bf16", "bf16", "bf16 compute, fp32 reduce"
        ),
        PrecisionRecipe(
            "bf16_pure", "bfloat16", "bfloat16", False, False, _ANY, None, "bf16", "bf16", "bf16 compute and reduce"
        ),
        PrecisionRecipe(
            "fp16", "float16", "float32", True, False, _ANY, None, "fp16", "fp16", "fp16 compute with a gradient scaler"
        ),
        PrecisionRecipe(
            "fp8",
            "bfloat16",
            "float32",
            False,
            True,
            ("cuda",),
            (8, 9),
            "fp8",
            "bf16",
            "fp8 linears (torchao), bf16 elsewhere",
        ),
    )
}


def _json_native(data: dict) -> dict:
    """As a record stores it (tuples become lists), so a recipe compares equal after a JSON round trip."""
    return json.loads(json.dumps(data))


def strategy(name: str) -> StrategyRecipe:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy '{name}'; allowed: {', '.join(STRATEGIES)}") from None


def precision(name: str) -> PrecisionRecipe:
    try:
        return PRECISIONS[name]
    except KeyError:
        raise ValueError(f"unknown precision '{name}'; allowed: {', '.join(PRECISIONS)}") from None
