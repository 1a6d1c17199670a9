"""Checks that run inside every rank (via rank_entry.py) and return JSON-able observations.

They build `debug` exactly as the engine does (fsdp_core.parallelize), look at FSDP2's state
and at the tensors that really flow, and report; the tests in this folder assert on the
reports. Nothing here asserts, so one run's report shows everything at once.
"""

from __future__ import annotations

import hashlib

import torch
import torch.distributed as dist
import torch.nn.functional as F
from ac_cases import AC_CASES, AC_STEPS
from torch import nn
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode

from bench.config.compose import flavors
from bench.schema.ac_modes import AC_MODES
from bench.schema.model import ModelSpec
from bench.schema.recipes import HYBRID, STRATEGIES
from bench.schema.spec import ClusterSpec, DeviceSpec, RunSpec, TelemetrySpec, TrainSpec
from fsdp_core.comm_counter import COUNTED_OPS, CommCounter
from fsdp_core.data import SyntheticTokens, local_batch
from fsdp_core.model import build_model
from fsdp_core.parallelize import materialize, parallelize_llama, point_mesh
from fsdp_core.precision import build_grad_scaler
from fsdp_core.train import train_step

ARGS = flavors()["debug"]
SEQ_LEN = 32  # short sequences: these checks look at shapes and dtypes, not speed
CPU = torch.device("cpu")
# A CPU host as the spec names it; inside a rank only its device type matters (the facts are the planner's).
CPU_CLUSTER = ClusterSpec(
    name="local-cpu", device=DeviceSpec(name="cpu", memory_gib=16.0), device_type="cpu", gpus_per_node=1,
    intra_node_gbps=8.0, inter_node_gbps=8.0,
)  # fmt: skip


def point(
    strategy: str = "full_shard",
    precision: str = "fp32",
    nodes: int = 1,
    model: ModelSpec = ARGS,
    telemetry: TelemetrySpec | None = None,
    **train,
) -> RunSpec:
    """The spec the engine gets for a point on this world (its ranks split over `nodes`), SEQ_LEN-token
    sequences and `train` fields (bench.schema.spec.TrainSpec)."""
    world = dist.get_world_size()
    return RunSpec(
        model=model, cluster=CPU_CLUSTER, strategy=strategy, precision=precision, nodes=nodes,
        gpus_per_node=world // nodes, train=TrainSpec(**{"seq_len": SEQ_LEN, **train}),
        telemetry=telemetry or TelemetrySpec(),
    )  # fmt: skip


def build_point(spec: RunSpec) -> nn.Module:
    """The engine's model of a point: meta -> parallelised -> materialised on CPU (train.seed 0)."""
    model = parallelize_llama(build_model(spec.model), spec, point_mesh(spec, "cpu"))
    materialize(model, CPU, seed=0)
    return model


def build(strategy: str, precision: str = "fp32", nodes: int = 1, **train) -> nn.Module:
    """The engine's model for this world: meta -> parallelised -> materialised on CPU."""
    return build_point(point(strategy, precision, nodes, **train))


def this_rank_batch(step: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's rows of the global batch (different on every rank)."""
    return local_batch(SyntheticTokens(ARGS.vocab_size, seed=0), step, 0, dist.get_rank(), 1, SEQ_LEN)


def loss_of(model: nn.Module, step: int = 0) -> torch.Tensor:
    inputs, targets = this_rank_batch(step)
    return F.cross_entropy(model(inputs).flatten(0, 1).float(), targets.flatten())


def local(param: torch.Tensor) -> torch.Tensor:
    return param.to_local() if isinstance(param, DTensor) else param


def param_view(param: torch.Tensor) -> dict:
    """Type, placements, global and local shape of one parameter."""
    is_dtensor = isinstance(param, DTensor)
    return {
        "dtensor": is_dtensor,
        "placements": [str(p) for p in param.placements] if is_dtensor else [],
        "shape": list(param.shape),
        "local_shape": list(local(param).shape),
        "dtype": str(param.dtype).removeprefix("torch."),
    }


def fsdp_group_view(module: nn.Module) -> dict:
    """FSDP2's sharded state of one fully_shard-ed module and what its parameters look like now."""
    group = module._get_fsdp_state()._fsdp_param_group
    params = list(module.parameters(recurse=True))
    return {
        "state": group._sharded_state.name,  # SHARDED, SHARDED_POST_FORWARD or UNSHARDED
        "all_dtensor": all(isinstance(p, DTensor) for p in params),
        "local_numel": sum(local(p).numel() for p in params),
    }


def block_views(model: nn.Module) -> dict:
    views = {f"layers.{name}": fsdp_group_view(block) for name, block in model.layers.items()}
    views["root"] = fsdp_group_view(model)
    return views


def unsharded_reference() -> dict[str, torch.Tensor]:
    """The same flavor initialised whole in this process (no sharding): what the shards must add up to."""
    model = build_model(ARGS, "cpu")
    model.init_weights(seed=0)
    return dict(model.named_parameters())


def sharding_report(strategy: str, nodes: int = 1) -> dict:
    """Placements after sharding, FSDP2's state after forward and after backward, and init values."""
    model = build(strategy, nodes=nodes)
    reference = unsharded_reference()
    report = {
        "params": {name: param_view(p) for name, p in model.named_parameters()},
        "full_values_match_unsharded_init": sorted(
            name for name, p in model.named_parameters() if torch.equal(p.full_tensor(), reference[name])
        ),
        "before_forward": block_views(model),
    }
    loss = loss_of(model)
    report["after_forward"] = block_views(model)
    loss.backward()
    report["after_backward"] = block_views(model)
    return report


class DtypeRecorder(TorchDispatchMode):
    """Records the dtype of every all-gather output and reduce-scatter input that runs."""

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: dict[str, set[str]] = {"all_gather": set(), "reduce_scatter": set(), "all_reduce": set()}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        counted = COUNTED_OPS.get(func)
        if counted is not None:
            kind, index = counted
            tensors = args[index] if isinstance(args[index], (list, tuple)) else [args[index]]
            self.dtypes[kind].update(str(t.dtype).removeprefix("torch.") for t in tensors)
        return func(*args, **(kwargs or {}))


def precision_report(precision: str) -> dict:
    """dtypes of sharded parameters, matmul inputs, logits, collectives and sharded gradients."""
    model = build("full_shard", precision)
    seen: dict[str, set[str]] = {"linear_input": set(), "linear_weight": set()}

    def record(module: nn.Module, inputs: tuple) -> None:
        seen["linear_input"].add(str(inputs[0].dtype).removeprefix("torch."))
        seen["linear_weight"].add(str(module.weight.dtype).removeprefix("torch."))

    hooks = [m.register_forward_pre_hook(record) for m in model.modules() if isinstance(m, nn.Linear)]
    recorder = DtypeRecorder()
    inputs, targets = this_rank_batch()
    with recorder:
        logits = model(inputs)
        F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten()).backward()
    for hook in hooks:
        hook.remove()

    def dtypes(tensors) -> list[str]:
        return sorted({str(t.dtype).removeprefix("torch.") for t in tensors})

    return {
        "sharded_params": dtypes(model.parameters()),
        "linear_input": sorted(seen["linear_input"]),
        "linear_weight": sorted(seen["linear_weight"]),
        "logits": str(logits.dtype).removeprefix("torch."),
        "collectives": {kind: sorted(values) for kind, values in recorder.dtypes.items()},
        "grads": dtypes(p.grad for p in model.parameters()),
    }


def tensor_digest(tensor: torch.Tensor) -> str:
    """Exact fingerprint of a tensor's bytes (replicas must be bit-identical)."""
    return hashlib.sha256(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def hybrid_report(nodes: int) -> dict:
    """hybrid_shard on a (nodes, world // nodes) mesh: placements, shard digests before and after a step, comm."""
    model = build("hybrid_shard", nodes=nodes)
    mesh = next(p for p in model.parameters() if isinstance(p, DTensor)).device_mesh
    before = {name: tensor_digest(local(p)) for name, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    spec = point("hybrid_shard", nodes=nodes, steps=1, warmup_steps=0)
    counter = CommCounter()
    with counter:
        train_step(model, optimizer, None, SyntheticTokens(ARGS.vocab_size, seed=0), spec, 0, CPU)
    return {
        "mesh_dim_names": list(mesh.mesh_dim_names),
        "mesh": mesh.mesh.tolist(),
        "coordinate": mesh.get_coordinate(),
        "params": {name: param_view(p) for name, p in model.named_parameters()},
        "digest_before": before,
        "digest_after": {name: tensor_digest(local(p)) for name, p in model.named_parameters()},
        "comm_bytes": counter.snapshot(),
    }


GLOBAL_ROWS = 2  # world size 1 trains 2 rows per step, world size 2 one row per rank: the same batch


def activation_checkpointing_losses() -> dict:
    """Mean losses of AC_STEPS optimizer steps per case and checkpointing mode, same seed and batch."""
    world = dist.get_world_size()
    report = {}
    for strategy, precision in AC_CASES:
        nodes = world if STRATEGIES[strategy].mesh == HYBRID else 1
        for mode in AC_MODES:
            torch.manual_seed(0)
            spec = point(strategy, precision, nodes, activation_checkpointing=mode, steps=AC_STEPS, warmup_steps=0,
                         micro_batch=GLOBAL_ROWS // world)  # fmt: skip
            model = build_point(spec)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
            scaler = build_grad_scaler(precision, "cpu")
            source = SyntheticTokens(ARGS.vocab_size, seed=0)
            losses = torch.stack([train_step(model, optimizer, scaler, source, spec, s, CPU) for s in range(AC_STEPS)])
            dist.all_reduce(losses)
            report[f"{strategy}/{precision}/{mode}"] = (losses / world).tolist()
    return report
