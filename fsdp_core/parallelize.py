"""Turn a meta-device Llama model into an FSDP2-sharded, materialised one.

Order (torchtitan's): fp8 conversion, activation checkpointing, then torch.compile, then FSDP:
each transformer block, then the root. Only after sharding are parameters materialised, one full
parameter at a time, so a 70B model is never whole in one process's memory. What each strategy
means (its mesh, whether blocks reshard after forward) is its recipe in bench/schema/recipes.py; what
a point asks for (strategy, precision, world shape, train.activation_checkpointing, train.compile,
train.cpu_offload) is its validated spec (bench.schema.spec.RunSpec).
The root (embeddings, final norm, output) never reshards after forward: backward needs it
first, so re-gathering it would be wasted traffic (torchtitan does the same).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from bench.schema import recipes
from bench.schema.ac_modes import DEFAULT_AC_EVERY, NONE, SELECTIVE_OP, checkpointed_indices
from bench.schema.spec import RunSpec
from fsdp_core.debug_knobs import apply_debug_knobs
from fsdp_core.model import Transformer, init_parameter_, parameter_generator
from fsdp_core.precision import apply_fp8, mixed_precision_policy

# Meshes built in this process, by (device type, shape, dimension names). One launch runs several
# points of one world shape in turn: a new 2-D mesh per point would create new communicators that
# nobody destroys (NCCL's buffers sit outside the caching allocator and grow point after point).
_MESHES: dict[tuple, DeviceMesh] = {}


def build_mesh(
    strategy: str, nodes: int, gpus_per_node: int, device_type: str, timeout: dt.timedelta | None = None
) -> DeviceMesh:
    """The strategy's device mesh for a world of nodes x gpus_per_node ranks, built once per shape in
    this process; `timeout` on all its groups."""
    shape, names = recipes.strategy(strategy).mesh_layout(nodes, gpus_per_node)
    key = (device_type, shape, names)
    if key not in _MESHES:
        _MESHES[key] = init_device_mesh(device_type, shape, mesh_dim_names=names)
    mesh = _MESHES[key]
    if timeout is not None:
        set_collective_timeout(timeout, [mesh.get_group(name) for name in names])
    return mesh


def set_collective_timeout(timeout: dt.timedelta, groups: list | None = None) -> None:
    """Give the default group and `groups` this point's collective timeout.

    Groups created without a timeout get the backend's default (NCCL 10 minutes, gloo 30), and the
    default group keeps the timeout of the launch's first point: a hang could then end as `failed`
    before the launcher's point timeout records it as `timeout`, or only long after it.
    """
    for group in {id(g): g for g in [dist.group.WORLD, *(groups or [])]}.values():
        group.set_timeout(timeout)


def apply_activation_checkpointing(
    model: Transformer, mode: str, every: int = DEFAULT_AC_EVERY, save_ops: Sequence[str] | None = None
) -> None:
    """Wrap blocks in checkpoint_wrapper as the mode says (bench/schema/ac_modes.py): all of them
    (`full`), all of them under the per-op policy (`selective_op`), or every `every`-th one
    (`selective_layer`)."""
    if mode == NONE:
        return
    # Private by its path, but PyTorch's FSDP tutorial wraps blocks with it (the allow-list of
    # tests/unit/test_private_access.py says why no public wrapper replaces it).
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    extra = {}
    if mode == SELECTIVE_OP:
        from fsdp_core.op_sac import op_sac_context_fn

        extra["context_fn"] = op_sac_context_fn(save_ops)
    wrapped = set(checkpointed_indices(len(model.layers), mode, every))
    for index, (name, block) in enumerate(list(model.layers.items())):
        if index in wrapped:
            # preserve_rng_state=False: the model has no dropout, so saving RNG state is pure cost.
            model.layers[name] = checkpoint_wrapper(block, preserve_rng_state=False, **extra)


def apply_compile(model: Transformer, backend: str = "inductor") -> None:
    """Compile each block separately: identical blocks share one compiled graph (torchtitan). The
    backend counts the graphs it compiles for the point's record (fsdp_core/compile_stats.py)."""
    from fsdp_core.compile_stats import counting_backend

    for name, block in list(model.layers.items()):
        model.layers[name] = torch.compile(block, fullgraph=True, backend=counting_backend(block, backend))


def point_mesh(spec: RunSpec, device_type: str, timeout: dt.timedelta | None = None) -> DeviceMesh:
    """The mesh of a point's strategy and world shape."""
    return build_mesh(spec.strategy, spec.nodes, spec.gpus_per_node, device_type, timeout)


def apply_fsdp(model: Transformer, mesh: DeviceMesh, spec: RunSpec) -> None:
    """fully_shard each block, then the root."""
    mp_policy = mixed_precision_policy(spec.precision)
    # Blocks do not cast their forward inputs: each gets (h, rope), and FSDP2's default cast would
    # turn the fp32 rotary table into bf16/fp16 (cos/sin with 8 or 11 significant bits, one cast
    # kernel per block per step), while apply_rope is written to rotate in fp32. h needs no cast:
    # it comes out of the embedding (root, computed in param_dtype) or the previous block, so it is
    # already in the compute dtype (tests/distributed/test_gpu_path_numerics.py observes both).
    # Chosen over torchtitan's complex table (never cast: not floating point) because it leaves the
    # model code and fp32 numerics untouched and puts no complex tensors in the compiled blocks.
    block_policy = mixed_precision_policy(spec.precision, cast_forward_inputs=False)
    offload: OffloadPolicy = CPUOffloadPolicy() if spec.train.cpu_offload else OffloadPolicy()
    reshard = recipes.strategy(spec.strategy).reshard_after_forward
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=block_policy, offload_policy=offload)
    fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=mp_policy, offload_policy=offload)


def parallelize_llama(model: Transformer, spec: RunSpec, mesh: DeviceMesh) -> Transformer:
    """Apply fp8, AC, compile and FSDP in the documented order, then the in-step debug knobs
    (fsdp_core/debug_knobs.py); the model stays on meta."""
    train = spec.train
    if recipes.precision(spec.precision).fp8_linears:
        apply_fp8(model)
    apply_activation_checkpointing(model, train.activation_checkpointing, train.ac_every, train.ac_save_ops)
    if train.compile:
        apply_compile(model, train.compile_backend)
    apply_fsdp(model, mesh, spec)
    apply_debug_knobs(model, spec.debug)
    return model


@torch.no_grad()
def materialize(model: Transformer, device: torch.device, seed: int, offload: bool = False) -> None:
    """Allocate shards on `device` and fill them so that values do not depend on the sharding.

    Each parameter is generated whole from a generator seeded by its name, then only this
    rank's shard is kept: world size 1 and world size N start from identical weights.
    """
    model.to_empty(device="cpu" if offload else device)
    model.init_buffers(device)
    for name, param in model.named_parameters():
        local = param.to_local() if isinstance(param, DTensor) else param
        full = torch.empty(param.shape, dtype=param.dtype, device=device)
        init_parameter_(full, name, model.args, parameter_generator(seed, name, device))
        if isinstance(param, DTensor):
            full = distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None).to_local()
        local.copy_(full)
