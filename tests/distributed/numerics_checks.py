"""Rank checks for the GPU code paths that CPU ranks can still exercise (test_gpu_path_numerics.py).

Like rank_checks.py: every function runs on every rank (via rank_entry.py), builds `debug`
the way the engine does, observes, and returns a JSON-able report; nothing here asserts.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from rank_checks import ARGS, CPU, build, build_point, local, loss_of, point
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from bench.schema.metrics import get
from fsdp_core.comm_counter import CommCounter
from fsdp_core.data import SyntheticTokens
from fsdp_core.precision import build_grad_scaler
from fsdp_core.train import run_loop


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


# ---------------------------------------------------------------------------------------------
# 1. fp16: every rank must skip the step and back off the scale when any rank overflows.


def _scaled_step(model: nn.Module, optimizer, scaler, inject_on_rank: int | None) -> dict:
    """One fp16 step through the scaler; optionally an inf in one rank's local gradient shard."""
    params = list(model.parameters())
    before = [local(p).detach().clone() for p in params]
    scale_before = float(scaler.get_scale())
    scaler.scale(loss_of(model)).backward()
    finite_natural = all(bool(torch.isfinite(local(p.grad)).all()) for p in params)
    if inject_on_rank == dist.get_rank():
        # First parameter with a non-empty shard here (every debug parameter shards evenly on 2 ranks).
        grad = next(local(p.grad) for p in params if local(p.grad).numel())
        grad.view(-1)[0] = float("inf")  # to_local() is a view: the DTensor gradient sees it
    finite_after_injection = all(bool(torch.isfinite(local(p.grad)).all()) for p in params)
    counter = CommCounter()
    with counter:
        scaler.step(optimizer)
        scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return {
        "grads_finite_before_injection": finite_natural,
        "grads_finite_after_injection": finite_after_injection,
        "params_changed": sum(not torch.equal(b, local(p)) for b, p in zip(before, params)),
        "params": len(params),
        "scale_before": scale_before,
        "scale_after": float(scaler.get_scale()),
        "step_comm_bytes": counter.snapshot(),
        "step_comm_calls": {kind: int(n) for kind, n in counter.calls.items()},
    }


def fp16_overflow_report(fused: bool) -> dict:
    """The engine's fp16 recipe (ShardedGradScaler + AdamW), a clean step, then an overflow on rank 0 only."""
    model = build("full_shard", "fp16")
    # As fsdp_core/worker.py build_training: fused on GPU, foreach on CPU; here both on CPU.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=fused, foreach=not fused)
    scaler = build_grad_scaler("fp16", "cpu")
    return {
        "scaler": type(scaler).__name__,
        # True for fused AdamW: GradScaler.step then skips unscale_ (where ShardedGradScaler
        # all-reduces found_inf) and hands found_inf to the optimizer's kernel instead.
        "optimizer_handles_scaling": bool(getattr(optimizer, "_step_supports_amp_scaling", False)),
        "clean": _scaled_step(model, optimizer, scaler, inject_on_rank=None),
        "overflow_on_rank0": _scaled_step(model, optimizer, scaler, inject_on_rank=0),
    }


def scaler_skip_report(init_scale: float | None, steps: int = 5, warmup_steps: int = 2) -> dict:
    """The engine's timed loop (fsdp_core.train.run_loop) in fp16 with the engine's scaler class, its
    scale started at `init_scale` (None: fp32, no scaler): the skipped timed steps the loop counted,
    the scale after, and how many parameter shards moved over the whole run."""
    spec = point("full_shard", "fp16" if init_scale else "fp32", steps=steps, warmup_steps=warmup_steps)
    model = build_point(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=True)
    scaler = ShardedGradScaler(device="cpu", init_scale=init_scale) if init_scale else None
    before = [local(p).detach().clone() for p in model.parameters()]
    loop = run_loop(model, optimizer, scaler, SyntheticTokens(ARGS.vocab_size, seed=0), spec, CPU)
    field = get("scaler_skipped_steps").field
    return {
        "has_count": field in loop.metrics,
        "skipped": loop.metrics.get(field),
        "timed": len(loop.step_times_s),
        "scale_after": float(scaler.get_scale()) if scaler else None,
        "params_changed": sum(not torch.equal(b, local(p)) for b, p in zip(before, model.parameters())),
    }


# ---------------------------------------------------------------------------------------------
# 2. The dtypes each transformer block receives: activation in the compute dtype, RoPE in fp32.


def block_input_report(precision: str, activation_checkpointing: str = "none") -> dict:
    """dtypes of (activation, rope) as every block's forward sees them, after FSDP2's pre-forward hook."""
    model = build("full_shard", precision, activation_checkpointing=activation_checkpointing)
    seen: dict[str, set[str]] = {"activation": set(), "rope": set()}
    calls = 0

    def record(module: nn.Module, args: tuple) -> None:
        nonlocal calls
        calls += 1
        seen["activation"].add(_dtype(args[0]))
        seen["rope"].add(_dtype(args[1]))

    # Registered after fully_shard, so it runs after FSDP2's own pre-forward hook (and its cast).
    # With activation checkpointing the hook goes on the wrapped block, so it also sees the recompute.
    blocks = [getattr(b, "_checkpoint_wrapped_module", b) for b in model.layers.values()]
    hooks = [block.register_forward_pre_hook(record) for block in blocks]
    loss = loss_of(model)
    loss.backward()
    for hook in hooks:
        hook.remove()
    return {
        "activation": sorted(seen["activation"]),
        "rope": sorted(seen["rope"]),
        "hook_calls": calls,
        "loss_finite": bool(torch.isfinite(loss)),
    }


# ---------------------------------------------------------------------------------------------
# 4. Functional collectives (DTensor, torchao) counted like c10d ones.


def _counted(fn) -> dict:
    """Bytes and calls CommCounter records while fn runs (fn waits on its results itself)."""
    counter = CommCounter()
    with counter:
        fn()
    return {"bytes": counter.snapshot(), "calls": {k: int(v) for k, v in counter.calls.items() if v}}


def functional_comm_report() -> dict:
    """CommCounter's figures for known functional collectives, DTensor redistributions and c10d ops.

    Every tensor is float32 with its own element count, so each expected figure is exact.
    """
    world, group = dist.get_world_size(), dist.group.WORLD
    name = group.group_name
    fc = torch.ops._c10d_functional
    mesh = init_device_mesh("cpu", (world,))
    # The second dimension of a (world, 1) mesh is a group of one rank: it moves nothing.
    solo = init_device_mesh("cpu", (world, 1), mesh_dim_names=("replicate", "shard"))["shard"].get_group()
    sharded = distribute_tensor(torch.arange(16.0 * world).reshape(4 * world, 4), mesh, [Shard(0)], src_data_rank=None)

    def amax_clamp(tensors: list[torch.Tensor]) -> torch.Tensor:
        # torchao's precompute_float8_dynamic_scale_for_fsdp: inf-norms of Shard(0) DTensors are
        # Partial(max); the clamp needs them replicated, so DTensor all-reduces inside that aten op.
        return torch.clamp(torch.stack(torch._foreach_norm(tensors, ord=math.inf)), min=1e-12)

    cases = {
        "funcol_all_reduce_10": lambda: funcol.all_reduce(torch.ones(10), "sum", group).wait(),
        "funcol_all_gather_6": lambda: funcol.all_gather_tensor(torch.ones(6), 0, group).wait(),
        "funcol_reduce_scatter_8": lambda: funcol.reduce_scatter_tensor(torch.ones(8), "sum", 0, group).wait(),
        "funcol_all_reduce_coalesced_3_5": lambda: [
            t.wait() for t in funcol.all_reduce_coalesced([torch.ones(3), torch.ones(5)], "sum", group)
        ],
        "funcol_all_gather_coalesced_7_9": lambda: [
            t.wait() for t in funcol.all_gather_into_tensor_coalesced([torch.ones(7), torch.ones(9)], group)
        ],
        "funcol_reduce_scatter_coalesced_4_12": lambda: [
            t.wait()
            for t in funcol.reduce_scatter_tensor_coalesced([torch.ones(4), torch.ones(12)], "sum", [0, 0], group)
        ],
        # The in-place and out= variants have no funcol wrapper: called as ops.
        "op_all_reduce__11": lambda: fc.wait_tensor(fc.all_reduce_(torch.ones(11), "sum", name)),
        "op_all_reduce_coalesced__13_2": lambda: [
            fc.wait_tensor(t) for t in fc.all_reduce_coalesced_([torch.ones(13), torch.ones(2)], "sum", name)
        ],
        "op_all_gather_out_15": lambda: fc.wait_tensor(
            fc.all_gather_into_tensor_out(torch.ones(15), world, name, out=torch.empty(15 * world))
        ),
        "op_reduce_scatter_out_14": lambda: fc.wait_tensor(
            fc.reduce_scatter_tensor_out(torch.ones(14), "sum", world, name, out=torch.empty(14 // world))
        ),
        "single_rank_group": lambda: (
            funcol.all_reduce(torch.ones(10), "sum", solo).wait(),
            funcol.all_gather_tensor(torch.ones(6), 0, solo).wait(),
            funcol.reduce_scatter_tensor(torch.ones(8), "sum", 0, solo).wait(),
        ),
        # DTensor, explicitly: Shard(0) -> Replicate all-gathers the local (4, 4) shard.
        "dtensor_shard0_to_replicate": lambda: sharded.redistribute(mesh, [Replicate()]).to_local().sum(),
        # DTensor, inside an aten op: one all-reduce of the 2 stacked amaxes.
        "dtensor_amax_clamp_2": lambda: amax_clamp([sharded, sharded * 2]).to_local(),
        # A c10d op and a functional op under the same mode: each counted once.
        "c10d_all_reduce_12_and_funcol_all_reduce_10": lambda: (
            dist.all_reduce(torch.ones(12)),
            funcol.all_reduce(torch.ones(10), "sum", group).wait(),
        ),
    }
    amax = amax_clamp([sharded])
    return {
        "world": world,
        "cases": {label: _counted(fn) for label, fn in cases.items()},
        "amax_placements": [type(p).__name__ for p in amax.placements],
        "amax_value": float(amax.full_tensor()[0]),
    }
