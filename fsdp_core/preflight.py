"""A preflight: what the cluster itself does, measured by the ranks that will run the points.

Per rank, on its own device: matmul time at the model's own GEMM shapes in the dtype the point
runs each in (the compute dtype; fp8, through PyTorch's scaled_mm, for the linears an fp8 point
converts), and memory bandwidth (a large copy). Per process group the strategies use (the whole
world, each strategy's mesh shard and replicate groups, each node's own ranks): all-gather,
reduce-scatter and all-reduce over message sizes from `min_bytes` to the model's largest FSDP unit
in the wider of the gather and reduce dtypes (fp32 gradients: twice a bf16 unit's bytes).
On CUDA the ranks time their matmuls at once, as in training (each has its own GPU); on CPU, where
every rank of a local launch shares this host's cores, one rank at a time, so the host's scheduler
does not decide who looks slow. Nodes' own groups are timed one node at a time for the same reason.
Every rank times every repetition; rank 0 gathers the raw times and writes them
(PREFLIGHT_MEASUREMENTS). The parent turns them into the record: medians, bandwidths with
nccl-tests' conventions, stragglers (bench/analysis/preflight.py), so the statistics stay in one place.

Message sizes follow the engine's counting convention (fsdp_core/comm_counter.py): an all-gather's
size is its gathered output, a reduce-scatter's its input, an all-reduce's its buffer.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from bench.schema import recipes
from bench.schema.files import write_json_atomic
from bench.schema.model import ModelSpec
from bench.schema.options import PreflightSettings
from bench.schema.preflight import CollectiveTiming, MatmulTiming, PreflightMeasurements, RankMeasurements
from bench.schema.protocol import PREFLIGHT_MEASUREMENTS, STARTED_MARK, GitInfo, PreflightTask
from fsdp_core.lifeline import check_owned
from fsdp_core.metrics import capture_env, host_loads, node_name
from fsdp_core.parallelize import build_mesh
from fsdp_core.precision import TORCH_DTYPES
from fsdp_core.train import slow_down_fraction

# A CPU matmul is capped at this many FLOPs (the token dimension shrinks): a CPU preflight takes
# seconds, and the rate of a shape barely depends on its token count once it is this large.
CPU_MATMUL_FLOP_CAP = 2e9
MEMORY_COPY_BYTES = {"cpu": 64 * 2**20, "cuda": 1 * 2**30}
GROUP_ORDER = ("world", "shard", "replicate", "node")


def gemm_shapes(model: ModelSpec, tokens: int) -> dict[str, tuple[int, int, int]]:
    """(m, k, n) of the model's linears for `tokens` tokens: one block's and the output projection."""
    kv = model.n_kv_heads * model.head_dim
    return {
        "attn_qo": (tokens, model.dim, model.dim),
        "attn_kv": (tokens, model.dim, kv),
        "mlp_up": (tokens, model.dim, model.ffn_dim),
        "mlp_down": (tokens, model.ffn_dim, model.dim),
        "output": (tokens, model.dim, model.vocab_size),
    }


def largest_unit_bytes(model: ModelSpec, precision: str) -> int:
    """Bytes of the model's largest FSDP unit (a block or the root) in the wider of its all-gather
    and reduce dtypes: bf16 and fp8 gather bf16 (2 bytes) but reduce-scatter fp32 gradients (4), so
    the largest reduce-scatter FSDP2 sends is twice the gathered unit's bytes; the sizes end there
    (the all-gather then also gets a point beyond its own largest, which costs little)."""
    recipe = recipes.precision(precision)
    root = 2 * model.vocab_size * model.dim + model.dim
    return max(model.block_params, root) * max(recipe.param_bytes, recipe.reduce_bytes)


FP8 = torch.float8_e4m3fn  # torchao's forward dtype for inputs and weights (tensorwise scaling)


def matmul_dtype(name: str, k: int, n: int, precision: str) -> torch.dtype:
    """The dtype the point runs GEMM `name` ((m, k) x (k, n), weight (n, k)) in: fp8 where the recipe
    converts that linear (fsdp_core/precision.py fp8_module_filter's rules: aligned, not the
    output), else the compute dtype."""
    recipe = recipes.precision(precision)
    if recipe.fp8_linears and name not in recipes.FP8_EXCLUDED_FQNS and recipes.fp8_converts(n, k):
        return FP8
    return TORCH_DTYPES[recipe.param_dtype]


def matmul_operands(m: int, k: int, n: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input (m, k), weight operand (k, n)): for fp8 the weight is an (n, k) tensor transposed, i.e.
    column-major, as torchao's Float8Linear passes it (the fp8 GEMM needs it so on CUDA)."""
    if dtype == FP8:
        return torch.randn(m, k, device=device).to(FP8), torch.randn(n, k, device=device).to(FP8).t()
    return torch.randn(m, k, dtype=dtype, device=device), torch.randn(k, n, dtype=dtype, device=device)


def matmul_op(a: torch.Tensor, b: torch.Tensor):
    """One GEMM as the point runs it: torch.mm, or for fp8 the scaled GEMM of torchao's Float8Linear
    forward (tensorwise fp32 scales, bf16 output, fast accumulation), through PyTorch's public
    torch.nn.functional.scaled_mm."""
    if a.dtype == FP8:
        one, tensorwise = torch.ones((), dtype=torch.float32, device=a.device), F.ScalingType.TensorWise
        return lambda: F.scaled_mm(
            a, b, one, tensorwise, one, tensorwise, output_dtype=torch.bfloat16, use_fast_accum=True
        )
    return lambda: torch.mm(a, b)


def message_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from min_bytes, ending exactly at max_bytes."""
    sizes, size = [], min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= 2
    return [*sizes, max_bytes]


class _Timer:
    """Seconds of a region: CUDA events on a GPU (the device's own clock, no host jitter in short
    collectives), perf_counter on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def __enter__(self) -> _Timer:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            self._events[0].record()
        else:
            self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            self._events[1].record()
            self._events[1].synchronize()
            self.seconds = self._events[0].elapsed_time(self._events[1]) / 1e3
        else:
            self.seconds = time.perf_counter() - self.start


def _slowed(seconds: float, slow_fraction: float) -> float:
    """debug.slow_rank: this rank sleeps the given fraction of its own time (a straggler on demand)."""
    if slow_fraction > 0:
        time.sleep(slow_fraction * seconds)
        return seconds * (1 + slow_fraction)
    return seconds


def in_turns(turns: int, mine: int, measure):
    """Run `measure` when it is this rank's turn (of `turns`; mine = -1: every rank at once), every
    other rank waiting at a barrier; all ranks leave together, so none disturbs a later turn."""
    result = None
    for turn in range(max(turns, 1)):
        dist.barrier()
        if mine in (-1, turn):
            result = measure()
    dist.barrier()
    return result


def device_turns(device: torch.device) -> tuple[int, int]:
    """(turns, this rank's): all ranks at once on CUDA, one after the other on CPU (a shared host)."""
    return (1, -1) if device.type == "cuda" else (dist.get_world_size(), dist.get_rank())


def time_matmuls(
    model: ModelSpec, tokens: int, precision: str, device, iters: int, slow: float
) -> dict[str, MatmulTiming]:
    """Each GEMM shape's time per repetition, in the dtype the point runs it in (matmul_dtype: fp8
    for the linears an fp8 point converts). Repetitions are the outer loop, each one taken in turns
    (on CPU): a load that comes and goes on a shared host falls on every rank alike instead of on
    whichever rank's turn it was, so it cannot make one rank look slow."""
    turns = device_turns(device)
    operands = {}
    for name, (m, k, n) in gemm_shapes(model, tokens).items():
        if device.type == "cpu":
            m = max(1, min(m, int(CPU_MATMUL_FLOP_CAP // (2 * k * n))))
        dtype = matmul_dtype(name, k, n, precision)
        operands[name] = (matmul_op(*matmul_operands(m, k, n, dtype, device)), 2.0 * m * k * n, [m, k, n], dtype)
    out = {
        name: MatmulTiming(flops=flops, shape=shape, dtype=str(dtype).removeprefix("torch."))
        for name, (_, flops, shape, dtype) in operands.items()
    }

    def one_pass(warm_up: bool = False) -> None:
        for name, (run, _, _, _) in operands.items():
            with _Timer(device) as timer:
                run()
            if not warm_up:
                out[name].seconds.append(_slowed(timer.seconds, slow))

    in_turns(*turns, lambda: one_pass(warm_up=True))  # allocator, kernels, thread pool
    for _ in range(iters):
        in_turns(*turns, one_pass)
    return out


def memory_bandwidth(device: torch.device, iters: int) -> float:
    """GB/s of a large device-to-device copy (bytes read plus bytes written, over the median time)."""
    size = MEMORY_COPY_BYTES[device.type]
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    seconds = []
    for _ in range(iters):
        with _Timer(device) as timer:
            dst.copy_(src)
        seconds.append(timer.seconds)
    seconds.sort()
    return 2 * size / seconds[len(seconds) // 2] / 1e9


def process_groups(task: PreflightTask, device: torch.device, timeout: dt.timedelta) -> list[tuple[str, object, int]]:
    """(kind, group, node or -1) of every distinct group to measure, in GROUP_ORDER; groups of one rank
    and groups whose members repeat an earlier one are left out (a full_shard shard group is the world)."""
    wanted = set(task.settings.groups)
    nodes, per_node = task.spec.nodes, task.spec.gpus_per_node
    rank = dist.get_rank()
    found: dict[str, list] = {kind: [] for kind in GROUP_ORDER}
    found["world"].append((dist.group.WORLD, -1))
    for strategy in task.strategies:
        mesh = build_mesh(strategy, nodes, per_node, device.type, timeout)
        for kind in ("shard", "replicate"):
            if kind in mesh.mesh_dim_names:
                found[kind].append((mesh.get_group(kind), -1))
    # Each node's own ranks: every rank takes part in creating every subgroup (torch's rule).
    node_groups = [dist.new_group(list(range(n * per_node, (n + 1) * per_node)), timeout=timeout) for n in range(nodes)]
    found["node"].append((node_groups[rank // per_node], rank // per_node))
    measured, seen = [], set()
    for kind in GROUP_ORDER:
        for group, node in found[kind]:
            members = tuple(dist.get_process_group_ranks(group))
            if kind not in wanted or len(members) < 2 or (kind == "node" and nodes < 2):
                continue
            if kind != "node" and members in seen:  # node groups stay: they compare nodes with each other
                continue
            seen.add(members)
            measured.append((kind, group, node))
    return measured


def time_collectives(task: PreflightTask, groups, sizes: list[int], device: torch.device) -> list[dict]:
    """Every rank's time of each repetition of each collective, group and size."""
    settings, spec = task.settings, task.spec
    recipe = recipes.precision(spec.precision)
    # gloo reduces fp32 only: CPU runs time fp32 buffers; a GPU uses what FSDP would send.
    gather_dtype = TORCH_DTYPES[recipe.param_dtype] if device.type == "cuda" else torch.float32
    reduce_dtype = TORCH_DTYPES[recipe.reduce_dtype] if device.type == "cuda" else torch.float32
    samples = []
    my_node = dist.get_rank() // spec.gpus_per_node
    for kind, group, node in groups:
        # Nodes are compared with each other: one node at a time, repetition by repetition, so a
        # load that comes and goes falls on every node alike. The other groups run all at once.
        turns = (spec.nodes, my_node) if kind == "node" else (1, -1)
        samples += time_group(kind, group, node, settings, sizes, gather_dtype, reduce_dtype, device, turns)
    return samples


def time_group(
    kind, group, node, settings: PreflightSettings, sizes, gather_dtype, reduce_dtype, device, turns
) -> list[dict]:
    """This rank's times of every collective and size on one group, each repetition taken in `turns`."""
    samples = []
    n = dist.get_world_size(group)
    for op in settings.collectives:
        dtype = gather_dtype if op == "all_gather" else reduce_dtype
        element = torch.empty((), dtype=dtype).element_size()
        for size in sizes:
            numel = max(n, size // element // n * n)  # divisible by the group size
            run = _collective(op, numel, n, dtype, device, group)
            seconds: list[float] = []

            def once(run=run, seconds=seconds) -> None:
                dist.barrier(group=group)
                with _Timer(device) as timer:
                    run()
                seconds.append(timer.seconds)

            in_turns(*turns, run)  # warm-up: buffers, connections
            for _ in range(settings.iters):
                in_turns(*turns, once)
            samples.append(
                CollectiveTiming(op=op, group=kind, group_size=n, bytes=numel * element, node=node, seconds=seconds)
            )
    return samples


def _collective(op: str, numel: int, n: int, dtype, device, group):
    """A closure running one collective of `numel` elements (the counted size) on `group`."""
    if op == "all_gather":
        shard = torch.zeros(numel // n, dtype=dtype, device=device)
        full = torch.empty(numel, dtype=dtype, device=device)
        return lambda: dist.all_gather_into_tensor(full, shard, group=group)
    if op == "reduce_scatter":
        full = torch.ones(numel, dtype=dtype, device=device)
        shard = torch.empty(numel // n, dtype=dtype, device=device)
        return lambda: dist.reduce_scatter_tensor(shard, full, group=group)
    buffer = torch.ones(numel, dtype=dtype, device=device)
    return lambda: dist.all_reduce(buffer, group=group)


def run_preflight(
    task: PreflightTask, device: torch.device, timeout: dt.timedelta, git: GitInfo, harness: str | None
) -> None:
    """Measure, gather on rank 0 and have it write the raw measurements next to the preflight's marks."""
    spec, settings = task.spec, task.settings
    point_dir = Path(task.point_dir)
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    if dist.get_rank() == 0:
        check_owned()
        point_dir.mkdir(parents=True, exist_ok=True)
        (point_dir / STARTED_MARK).write_text(started)
    slow = slow_down_fraction(spec.debug.slow_fraction, spec.debug.slow_rank, dist.get_rank())
    tokens, iters = spec.train.micro_batch * spec.train.seq_len, settings.matmul_iters
    load_before = os.getloadavg()[0]
    matmuls = time_matmuls(spec.model, tokens, spec.precision, device, iters, slow)
    bandwidth = in_turns(*device_turns(device), lambda: memory_bandwidth(device, iters))
    max_bytes = settings.max_bytes or largest_unit_bytes(spec.model, spec.precision)
    sizes = message_sizes(min(settings.min_bytes, max_bytes), max_bytes)
    collectives = time_collectives(task, process_groups(task, device, timeout), sizes, device)
    loads = host_loads((load_before, os.getloadavg()[0]), spec.device_type)
    mine = RankMeasurements(
        rank=dist.get_rank(),
        host=node_name(),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        node=dist.get_rank() // spec.gpus_per_node,
        matmul=matmuls,
        memory_gbps=bandwidth,
        collectives=collectives,
    )
    everyone: list[RankMeasurements | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    env = capture_env(device, git, harness)
    if dist.get_rank() == 0:
        check_owned()
        finished = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        measurements = PreflightMeasurements(
            started_at=started, finished_at=finished, sizes=sizes, ranks=everyone, env=env, host_load=loads
        )
        write_json_atomic(point_dir / PREFLIGHT_MEASUREMENTS, measurements.model_dump(mode="json"))
    dist.barrier()
