"""Turn a meta-device Llama model into an FSDP2-sharded, materialised one.

Order (torchtitan's): activation checkpointing, then torch.compile, then FSDP: each
transformer block, then the root. Only after sharding are parameters materialised, one
full parameter at a time, so a 70B model is never whole in one process's memory.

| strategy           | device mesh                         | blocks reshard after forward |
|--------------------|-------------------------------------|------------------------------|
| full_shard         | (world,) shard                      | yes (ZeRO-3)                 |
| shard_grad_op      | (world,) shard                      | no  (ZeRO-2)                 |
| hybrid_shard       | (nodes, gpus_per_node) replicate x shard | yes                     |
| hybrid_shard_zero2 | (nodes, gpus_per_node) replicate x shard | no                      |
| no_shard           | (world, 1) replicate x shard        | no (plain data parallel)     |
The root (embeddings, final norm, output) never reshards after forward: backward needs it
first, so re-gathering it would be wasted traffic (torchtitan does the same).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from fsdp_core.flops import SELECTIVE_AC_EVERY
from fsdp_core.model import Transformer, init_parameter_, parameter_generator
from fsdp_core.precision import apply_fp8, mixed_precision_policy

RESHARD_BLOCKS = {
    "full_shard": True,
    "shard_grad_op": False,
    "hybrid_shard": True,
    "hybrid_shard_zero2": False,
    "no_shard": False,
}


@dataclass(frozen=True)
class ParallelConfig:
    strategy: str
    precision: str
    nodes: int
    gpus_per_node: int
    activation_checkpointing: str = "none"
    compile: bool = False
    cpu_offload: bool = False


def build_mesh(cfg: ParallelConfig, device_type: str) -> DeviceMesh:
    """The data-parallel device mesh of a strategy (see the table above)."""
    world = cfg.nodes * cfg.gpus_per_node
    if cfg.strategy in ("full_shard", "shard_grad_op"):
        return init_device_mesh(device_type, (world,), mesh_dim_names=("shard",))
    if cfg.strategy in ("hybrid_shard", "hybrid_shard_zero2"):
        return init_device_mesh(device_type, (cfg.nodes, cfg.gpus_per_node), mesh_dim_names=("replicate", "shard"))
    if cfg.strategy == "no_shard":
        return init_device_mesh(device_type, (world, 1), mesh_dim_names=("replicate", "shard"))
    raise ValueError(f"unknown strategy {cfg.strategy}")


def apply_activation_checkpointing(model: Transformer, mode: str) -> None:
    """Wrap blocks in checkpoint_wrapper: all of them (`full`) or every second one (`selective`)."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    every = 1 if mode == "full" else SELECTIVE_AC_EVERY
    for index, (name, block) in enumerate(list(model.layers.items())):
        if index % every == 0:
            # preserve_rng_state=False: the model has no dropout, so saving RNG state is pure cost.
            model.layers[name] = checkpoint_wrapper(block, preserve_rng_state=False)


def apply_compile(model: Transformer) -> None:
    """Compile each block separately: identical blocks share one compiled graph (torchtitan)."""
    for name, block in list(model.layers.items()):
        model.layers[name] = torch.compile(block, fullgraph=True)


def apply_fsdp(model: Transformer, mesh: DeviceMesh, cfg: ParallelConfig) -> None:
    """fully_shard each block, then the root."""
    mp_policy = mixed_precision_policy(cfg.precision)
    offload: OffloadPolicy = CPUOffloadPolicy() if cfg.cpu_offload else OffloadPolicy()
    reshard = RESHARD_BLOCKS[cfg.strategy]
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp_policy, offload_policy=offload)
    fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=mp_policy, offload_policy=offload)


def parallelize_llama(model: Transformer, cfg: ParallelConfig, mesh: DeviceMesh) -> Transformer:
    """Apply fp8, AC, compile and FSDP in the documented order; the model stays on meta."""
    if cfg.precision == "fp8":
        apply_fp8(model)
    apply_activation_checkpointing(model, cfg.activation_checkpointing)
    if cfg.compile:
        apply_compile(model)
    apply_fsdp(model, mesh, cfg)
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
