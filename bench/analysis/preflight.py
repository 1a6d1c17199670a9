"""Preflights in the parent: the task a launch carries, and the record made of the ranks' measurements.

A preflight (`fsdp-bench preflight`, or `sweep.preflight=true` once per world shape) runs on the
same world shape, launcher and worker as the points (fsdp_core/preflight.py measures). Here the raw
per-rank times become the record (bench.schema.preflight.PreflightResult): medians, nccl-tests' algorithm and
bus bandwidth, stragglers by bench.analysis.stats' rule, and the links the planner can use instead of the
cluster's nominal ones.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from bench.analysis.planner.comm import RING_PASSES, network_share, replica_ring_gbps, spanning_ring_gbps
from bench.analysis.records import files_named
from bench.analysis.stats import stragglers
from bench.schema.files import write_json_atomic
from bench.schema.migrations import PREFLIGHT
from bench.schema.options import PreflightSettings
from bench.schema.preflight import (
    CollectiveSample,
    PreflightMeasurements,
    PreflightResult,
    RankDevice,
    RankMeasurements,
    Straggler,
)
from bench.schema.protocol import (
    PREFLIGHT_MEASUREMENTS,
    PREFLIGHT_RECORD,
    PreflightTask,
    read_errors,
)
from bench.schema.spec import RunSpec


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor: what each rank's link carries per byte of the collective."""
    return RING_PASSES[op] * (n - 1) / n


def collect(task: PreflightTask, status_if_missing: str, reason: str) -> PreflightResult:
    """The record of a finished preflight launch, written next to its measurements."""
    directory = Path(task.point_dir)
    spec, settings = task.spec, task.settings
    raw_path = directory / PREFLIGHT_MEASUREMENTS
    if raw_path.exists():
        raw = PreflightMeasurements.model_validate_json(raw_path.read_text())
        record = from_measurements(raw, spec, settings, task.strategies)
    else:
        errors = read_errors(directory)
        error = f"rank {errors[0].rank}: {errors[0].message}" if errors else reason
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        record = PreflightResult(
            sweep=spec.sweep.name, status=status_if_missing, error=error[:500], started_at=now, finished_at=now,
            spec=spec, settings=settings, strategies=task.strategies,
        )  # fmt: skip
    write_json_atomic(directory / PREFLIGHT_RECORD, record.model_dump(mode="json"))
    return record


def from_measurements(
    raw: PreflightMeasurements, spec: RunSpec, settings: PreflightSettings, strategies: list[str]
) -> PreflightResult:
    ranks = [_rank_device(r) for r in raw.ranks]
    samples = _collective_samples(raw.ranks)
    record = PreflightResult(
        sweep=spec.sweep.name,
        status="ok",
        started_at=raw.started_at,
        finished_at=raw.finished_at,
        spec=spec,
        settings=settings,
        strategies=strategies,
        ranks=ranks,
        collectives=samples,
        host_load=raw.host_load,
        env=raw.env,
    )
    record.stragglers = find_stragglers(record)
    record.measured_links = measured_links(record)
    if spec.device_type == "cpu":
        record.notes["matmul"] = "CPU matmuls are capped at 2 GFLOP each (the token dimension shrinks)"
    fp8 = sorted({name for r in ranks for name, dtype in r.matmul_dtype_by_shape.items() if dtype.startswith("float8")})
    if fp8:
        record.notes["matmul"] = (
            f"fp8 (torch._scaled_mm, as torchao's Float8Linear) for {', '.join(fp8)}; the other shapes in the "
            "compute dtype: the rate is the point's mix, not a bf16 rate"
        )
    return record


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def _rank_device(raw: RankMeasurements) -> RankDevice:
    seconds = {name: _median(m.seconds) for name, m in raw.matmul.items()}
    flops = {name: m.flops for name, m in raw.matmul.items()}
    total_s = sum(seconds.values())
    return RankDevice(
        rank=raw.rank,
        host=raw.host,
        local_rank=raw.local_rank,
        node=raw.node,
        matmul_s=total_s,
        matmul_best_s=sum(min(m.seconds) for m in raw.matmul.values()),
        matmul_tflops=sum(flops.values()) / total_s / 1e12,
        matmul_tflops_by_shape={name: flops[name] / seconds[name] / 1e12 for name in seconds},
        matmul_dtype_by_shape={name: m.dtype for name, m in raw.matmul.items() if m.dtype},
        memory_gbps=raw.memory_gbps,
    )


def _collective_samples(ranks: list[RankMeasurements]) -> list[CollectiveSample]:
    """One sample per (op, group, size[, node]): per repetition the slowest rank, then the median."""
    runs: dict[tuple, list[list[float]]] = defaultdict(list)
    for rank in ranks:
        for c in rank.collectives:
            key = (c.op, c.group, c.group_size, c.bytes, c.node if c.group == "node" else None)
            runs[key].append(c.seconds)
    samples = []
    for (op, group, n, size, node), per_rank in runs.items():
        slowest = [max(times) for times in zip(*per_rank)]
        seconds = _median(slowest)
        algbw = size / seconds / 1e9
        samples.append(
            CollectiveSample(
                op=op,
                group=group,
                group_size=n,
                bytes=size,
                time_s=seconds,
                best_s=min(slowest),
                algbw_gbps=algbw,
                busbw_gbps=algbw * bus_factor(op, n),
                node=node,
            )  # fmt: skip
        )
    return sorted(samples, key=lambda s: (s.group, s.op, s.node if s.node is not None else -1, s.bytes))


def find_stragglers(record: PreflightResult) -> list[Straggler]:
    """Ranks whose matmuls, and nodes (each on its own host) whose own all-reduce, are slower than
    the median allows."""
    k, floor = record.settings.straggler_k, record.settings.straggler_floor
    by_rank = {r.rank: r for r in record.ranks}
    matmul = {r.rank: r.matmul_best_s for r in record.ranks}
    median = _median(list(matmul.values())) if matmul else 0.0
    found = [
        Straggler(
            measure="matmul",
            rank=rank,
            host=by_rank[rank].host,
            local_rank=by_rank[rank].local_rank,
            node=by_rank[rank].node,
            value_s=matmul[rank],
            median_s=median,
            slower_by=excess,
        )  # fmt: skip
        for rank, excess in sorted(stragglers(matmul, k, floor).items())
    ]
    nodes = _node_all_reduce(record)
    host = {r.node: r.host for r in record.ranks}
    if nodes and len({host.get(node) for node in nodes}) == len(nodes):
        # Only nodes that are machines of their own: "nodes" sharing a host (a local launch's
        # torchrun agents) take turns on the same cores and memory, so a difference between their
        # all-reduces says nothing about a node's links (on the 2-core VM it named a node in 3 of
        # 8 quiet 2x2 runs).
        node_median = _median(list(nodes.values()))
        found += [
            Straggler(
                measure="node all_reduce",
                host=host.get(node, "?"),
                node=node,
                value_s=nodes[node],
                median_s=node_median,
                slower_by=excess,
            )  # fmt: skip
            for node, excess in sorted(stragglers(nodes, k, floor).items())
        ]
    return found


def _node_all_reduce(record: PreflightResult) -> dict[int, float]:
    """Each node's own all-reduce time at the largest size measured (nodes compared with each other)."""
    samples = [s for s in record.collectives if s.group == "node" and s.op == "all_reduce"]
    if not samples:
        return {}
    largest = max(s.bytes for s in samples)
    return {s.node: s.best_s for s in samples if s.bytes == largest}


# Groups whose ranks share a node (NVLink on GPUs); the others cross the network when nodes > 1.
WITHIN_NODE_GROUPS = ("shard", "node")


def crosses_nodes(spec: RunSpec, group: str) -> bool:
    return spec.nodes > 1 and group not in WITHIN_NODE_GROUPS


def nominal_busbw_gbps(spec: RunSpec, group: str) -> float:
    """The preset's bus bandwidth for one rank of a preflight `group`, GB/s, as the planner models
    it (bench/analysis/planner/comm.py): one GPU's NVLink inside a node; across nodes the world
    ring's share of the node's network (`inter_node_gbps` is the whole node's), and one GPU's share
    for the replicate rings of a hybrid strategy. `measured_links` inverts the same share, so
    a measured curve's ratio to this line is the links table's measured / nominal."""
    cluster = spec.cluster
    if not crosses_nodes(spec, group):
        return cluster.intra_node_gbps / 8
    if group == "replicate":
        return replica_ring_gbps(cluster, spec.nodes) / 8
    return spanning_ring_gbps(cluster, spec.nodes, spec.gpus_per_node) / 8


def measured_links(record: PreflightResult) -> dict[str, float]:
    """What the planner can use instead of nominal links, in the units and meaning of the planner's
    own formulas (bench/analysis/planner/comm.py), so that it reproduces the measured times.

    Per collective kind on the world group (the planner's loopback model of a CPU host, the form
    `fsdp-bench calibrate` writes): `<kind>_gbps` and `<kind>_latency_s` of the planner's ring,
    t = passes x (latency + bytes x (n-1)/n / bandwidth), from the smallest and largest size.
    The cluster fields: `intra_node_gbps`, one GPU's link (the node groups' all-reduce bus bandwidth;
    a ring inside a node moves bus-bandwidth bytes over every link), and `inter_node_gbps`, the
    node's network: a ring spanning nodes leaves each node over its NICs, all channels together
    carrying the bus bandwidth, so the node's network is the world ring's bus bandwidth over the
    ring's share of it (`network_share`: scaled to a full node when fewer GPUs per node were
    measured, over the planner's fabric efficiency at the node count measured).
    """
    links: dict[str, float] = {}
    world = [s for s in record.collectives if s.group == "world"]
    for op in RING_PASSES:
        samples = sorted((s for s in world if s.op == op), key=lambda s: s.bytes)
        if len(samples) >= 2:
            links.update({f"{op}_{k}": v for k, v in ring_link(samples[0], samples[-1]).items()})
    spec = record.spec
    intra = _largest_busbw(record, "node") or (_largest_busbw(record, "world") if spec.nodes == 1 else None)
    if intra:
        links["intra_node_gbps"] = intra * 8
    if spec.nodes > 1 and (inter := _largest_busbw(record, "world")):
        links["inter_node_gbps"] = inter * 8 / network_share(spec.cluster, spec.nodes, spec.gpus_per_node)
    return links


def ring_link(small: CollectiveSample, large: CollectiveSample) -> dict[str, float]:
    """{gbps, latency_s} of the planner's ring through two sizes: the smallest message is almost all
    latency, the largest almost all bandwidth (a least-squares fit over noisy small messages can
    come out with a negative slope; two points far apart cannot, while the time grows)."""
    passes, n = RING_PASSES[large.op], large.group_size
    latency = small.time_s / passes
    transfer = max(large.time_s / passes - latency, large.time_s / passes / 2)
    return {"gbps": large.bytes * (n - 1) / n / transfer * 8 / 1e9, "latency_s": latency}


def _largest_busbw(record: PreflightResult, group: str) -> float | None:
    samples = [s for s in record.collectives if s.group == group and s.op == "all_reduce"]
    if not samples:
        return None
    largest = max(s.bytes for s in samples)
    return _median([s.busbw_gbps for s in samples if s.bytes == largest])


def read_preflight(path: Path) -> PreflightResult:
    """One preflight record (a results folder's `_preflight/<shape>/preflight.json`); ValueError in one line."""
    path = Path(path)
    if path.is_dir():
        found = files_named(path, PREFLIGHT_RECORD)
        if len(found) != 1:
            raise ValueError(f"{path}: expected one {PREFLIGHT_RECORD} under it, found {len(found)}")
        path = found[0]
    try:
        return PREFLIGHT.read(path)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def load_preflights(
    root: Path, paths: Iterable[Path | str] | None = None
) -> tuple[list[PreflightResult], list[tuple[str, str]]]:
    """Every preflight record under `root` (a results folder or one sweep's), and (file, reason) of
    those that could not be read; the latest per sweep and world shape is what is on disk. `paths`:
    the preflight records under `root` where a walk of it has found them already (the report's)."""
    root = Path(root)
    if not root.is_dir():
        return [], []
    found, problems = [], []
    for path in files_named(root, PREFLIGHT_RECORD) if paths is None else paths:
        try:
            found.append(read_preflight(path))
        except ValueError as exc:
            problems.append((str(path), str(exc)))
    return found, problems
