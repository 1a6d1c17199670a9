"""Communication per training step: the exact bytes each collective moves, and ring-algorithm times.

Bytes follow the engine's counting convention (fsdp_core/comm_counter.py), per rank and per
optimizer step, gradients synchronised on every micro-batch:
- an all-gather counts its output (the whole, dim-0-padded parameters in param dtype), a
  reduce-scatter its input (the whole padded gradient in reduce dtype), an all-reduce its
  tensor; collectives on a one-rank group count nothing;
- the root (embeddings, final norm, output) is gathered once per micro-step (it never
  reshards); blocks are gathered in forward and, under full_shard/hybrid_shard, again in
  backward; every module reduce-scatters its gradient once;
- hybrid strategies then all-reduce the gradient shard across nodes; no_shard all-reduces
  whole gradients.

Times use ring algorithms: an all-gather or reduce-scatter over n ranks moves (n-1)/n of the
whole buffer through each rank's link in n-1 latency-bound steps, an all-reduce twice that.
Within a node the link is one GPU's NVLink bandwidth. A group spanning nodes runs NCCL's
parallel rings, one per NIC, so each GPU pushes its share through its own slice of the node's
network bandwidth: the group moves at min(NVLink, per-GPU network share x ranks per node),
the network part scaled by the fitted fabric efficiency at that node count
(`calibration.network_efficiency`). The hybrid all-reduce runs one ring per shard index
across nodes, each on one GPU's share. Latencies follow NCCL's own tuning model.
On a calibrated CPU host every link is the loopback measured by `fsdp-bench calibrate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from bench.analysis.planner.calibration import network_efficiency
from bench.analysis.planner.memory import padded_gather_bytes
from bench.analysis.planner.shapes import padded_numel
from bench.analysis.planner.workload import Workload
from bench.schema.spec import ClusterSpec

# Passes of a ring collective over its data: all-gather and reduce-scatter one, all-reduce two
# (a reduce-scatter then an all-gather). The bus-bandwidth factor of nccl-tests follows from it.
RING_PASSES = {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 2}

KINDS = ("all_gather", "reduce_scatter", "all_reduce")
GBIT = 1e9 / 8  # bytes per second in one Gbit/s


@dataclass(frozen=True)
class ModuleComm:
    """One module's collectives in one micro-step, in bytes (counted convention)."""

    gather: int  # one all-gather
    reduce_scatter: int
    all_reduce: int


def module_comm(shapes: tuple[tuple[int, int], ...], w: Workload, fp8_linears: bool) -> ModuleComm:
    """Bytes of one module's all-gather, reduce-scatter and all-reduce (0 on one-rank groups)."""
    shards = w.shard_degree
    return _module_comm(shapes, shards, w.world_size // shards, w.param_bytes, w.reduce_bytes, fp8_linears)


@lru_cache(maxsize=4096)
def _module_comm(
    shapes: tuple[tuple[int, int], ...], shards: int, replicas: int, param_bytes: int, reduce_bytes: int, fp8: bool
) -> ModuleComm:
    # Cached on exactly what the bytes depend on: a grid's points share a few shapes and meshes.
    numel = padded_numel(shapes, shards)
    sharded = shards > 1
    return ModuleComm(
        gather=padded_gather_bytes(shapes, shards, param_bytes, fp8) if sharded else 0,
        reduce_scatter=numel * reduce_bytes if sharded else 0,
        all_reduce=(numel // shards) * reduce_bytes if replicas > 1 else 0,
    )


def block_and_root(w: Workload) -> tuple[ModuleComm, ModuleComm]:
    fp8 = w.precision_recipe.fp8_linears
    return module_comm(w.shape.block_shapes, w, fp8), module_comm(w.shape.root_shapes, w, False)


def comm_bytes_per_step(w: Workload) -> dict[str, int]:
    """Counted bytes per rank per optimizer step, by collective kind (see the module docstring)."""
    return {kind: value * w.grad_accum for kind, value in comm_bytes_per_micro_step(w).items()}


def comm_bytes_per_micro_step(w: Workload) -> dict[str, int]:
    """`comm_bytes_per_step` of one micro-step (it reads no grad_accum)."""
    block, root = block_and_root(w)
    layers = w.shape.n_layers
    gathers_per_block = 2 if w.reshard_blocks else 1
    return {
        "all_gather": root.gather + layers * gathers_per_block * block.gather,
        "reduce_scatter": root.reduce_scatter + layers * block.reduce_scatter,
        "all_reduce": root.all_reduce + layers * block.all_reduce,
    }


@dataclass(frozen=True)
class Link:
    """A ring's bandwidth and its per-step latencies (NCCL's tuning model, Simple protocol)."""

    bytes_per_s: float
    hop_latency_s: float  # a ring step inside a node
    net_latency_s: float = 0.0  # a ring step that crosses the network
    nodes: int = 1  # nodes the ring spans
    base_latency_s: float = 0.0


# NCCL's tuning model (src/graph/tuning.cc, ring algorithm, Simple protocol used for large
# messages): a ring collective costs baseLat 8.4 us plus, per step, 3.4 us on an NVLink hop or
# the network latency on a step that crosses nodes.
NCCL_BASE_LATENCY_S = 8.4e-6
NVLINK_HOP_LATENCY_S = 3.4e-6


def _calibrated(w: Workload, kind: str) -> Link | None:
    """A measured loopback link for this collective kind (local-cpu after `calibrate`), if any."""
    extra = w.links
    if f"{kind}_gbps" not in extra:
        return None
    return Link(extra[f"{kind}_gbps"] * GBIT, extra.get(f"{kind}_latency_s", w.cluster.link_latency_s))


def _gpu_link(w: Workload, bandwidth_gbps: float, nodes: int) -> Link:
    return Link(bandwidth_gbps * GBIT, NVLINK_HOP_LATENCY_S, w.cluster.link_latency_s, nodes, NCCL_BASE_LATENCY_S)


def network_share(cluster: ClusterSpec, nodes: int, ranks_per_node: int) -> float:
    """The fraction of one node's network (`cluster.inter_node_gbps`: the whole node's bandwidth)
    that a ring spanning `nodes` nodes through `ranks_per_node` ranks of each node moves at.

    NCCL runs parallel rings, one per NIC, so each GPU pushes through its own slice of the node's
    network (1 / gpus_per_node of it), at the fitted fabric efficiency of that node count. 1 on a
    CPU host: its loopback has no NICs to share and no fabric to fit. The one meaning of
    `inter_node_gbps` in a ring: the planner multiplies by it, a preflight divides the bus bandwidth
    it measured by it (bench/analysis/preflight.py `measured_links`), and the report draws it.
    """
    if cluster.device_type == "cpu":
        return 1.0
    return ranks_per_node / cluster.gpus_per_node * network_efficiency(nodes)


def spanning_ring_gbps(cluster: ClusterSpec, nodes: int, ranks_per_node: int) -> float:
    """Bus bandwidth (Gbit/s) of a ring through `ranks_per_node` ranks of each of `nodes` nodes
    (a shard group or the world spanning nodes): its share of the node's network, at most NVLink."""
    return min(cluster.intra_node_gbps, cluster.inter_node_gbps * network_share(cluster, nodes, ranks_per_node))


def replica_ring_gbps(cluster: ClusterSpec, nodes: int) -> float:
    """Bus bandwidth (Gbit/s) of one hybrid all-reduce ring across nodes: one rank per node, every
    shard index's ring at once, so each moves at one GPU's share of the node's network."""
    return cluster.inter_node_gbps * network_share(cluster, nodes, 1)


def shard_group_link(w: Workload, kind: str) -> Link:
    """The link of the shard group's rings (all-gather, reduce-scatter; no_shard's all-reduce)."""
    measured = _calibrated(w, kind)
    if measured:
        return measured
    if w.cluster.device_type == "cpu":
        return Link(w.cluster.intra_node_gbps * GBIT, w.cluster.link_latency_s)
    c = w.cluster
    spans_nodes = w.nodes > 1 and not w.hybrid
    if not spans_nodes:
        return _gpu_link(w, c.intra_node_gbps, 1)
    return _gpu_link(w, spanning_ring_gbps(c, w.nodes, w.gpus_per_node), w.nodes)


def replica_group_link(w: Workload) -> Link:
    """The link of the hybrid all-reduce across nodes: one GPU's share of the node's network."""
    measured = _calibrated(w, "all_reduce")
    if measured:
        return measured
    c = w.cluster
    if c.device_type == "cpu":
        return Link(c.inter_node_gbps * GBIT, c.link_latency_s)
    # One rank per node in each ring: every step crosses the network.
    return Link(replica_ring_gbps(c, w.nodes) * GBIT, c.link_latency_s, c.link_latency_s, w.nodes, NCCL_BASE_LATENCY_S)


def ring_time(nbytes: float, ranks: int, link: Link, passes: int = 1) -> float:
    """Seconds for a ring collective: `passes` = 1 for all-gather/reduce-scatter, 2 for all-reduce.

    (ranks-1)/ranks of the buffer crosses each link per pass; of the ranks-1 steps per pass,
    nodes-1 cross the network.
    """
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    steps = ranks - 1
    net_steps = min(steps, max(0, link.nodes - 1))
    latency = (steps - net_steps) * link.hop_latency_s + net_steps * link.net_latency_s
    return link.base_latency_s + passes * (steps / ranks * nbytes / link.bytes_per_s + latency)


@dataclass(frozen=True)
class ModuleTimes:
    """Seconds of one module's collectives in one micro-step."""

    gather: float
    reduce: float  # reduce-scatter plus any all-reduce that follows it


def module_times(comm: ModuleComm, w: Workload) -> ModuleTimes:
    shards, replicas = w.shard_degree, w.world_size // w.shard_degree
    gather = ring_time(comm.gather, shards, shard_group_link(w, "all_gather"))
    reduce = ring_time(comm.reduce_scatter, shards, shard_group_link(w, "reduce_scatter"))
    if replicas > 1:
        hybrid = w.hybrid
        link = replica_group_link(w) if hybrid else shard_group_link(w, "all_reduce")
        reduce += ring_time(comm.all_reduce, replicas, link, passes=2)
    return ModuleTimes(gather, reduce)


def collective_times(w: Workload) -> tuple[ModuleTimes, ModuleTimes]:
    """(one block, the root): seconds per micro-step of their gathers and reductions, shared by
    every workload of the same `comm_key` (a grid's points that differ only in micro-batch,
    accumulation or checkpointing gather and reduce the same bytes over the same links)."""
    key = comm_key(w)
    times = _TIMES.get(key)
    if times is None:
        if len(_TIMES) >= CACHE_SIZE:
            _TIMES.clear()
        block, root = block_and_root(w)
        times = _TIMES[key] = (module_times(block, w), module_times(root, w))
    return times


CACHE_SIZE = 65536
_TIMES: dict[tuple, tuple[ModuleTimes, ModuleTimes]] = {}


def comm_key(w: Workload) -> tuple:
    """Everything `collective_times` reads: the shapes, the mesh, the dtypes, the cluster's links and
    the fitted network efficiency at this node count (so a changed fit is a new key), the measured
    links. Not micro-batch, accumulation, checkpointing, compile, threads or offload: tests/unit/
    test_planner_predict.py changes each and finds the same times computed afresh."""
    c = w.cluster
    links = tuple(sorted(w.links.items()))
    return (w.shape, w.strategy, w.nodes, w.gpus_per_node, w.precision, c.device_type, c.gpus_per_node,
            c.intra_node_gbps, c.inter_node_gbps, c.link_latency_s, network_efficiency(w.nodes), links)  # fmt: skip


def clear_caches() -> None:
    """Forget every cached collective time (the next call computes afresh)."""
    _TIMES.clear()
