"""Predictions from measurement: a preflight record (bench/analysis/preflight.py) instead of nominal links.

`fsdp-bench plan ... --preflight RESULTS` plans with what the cluster measured: on GPUs the node
groups' all-reduce bus bandwidth as `intra_node_gbps` and a multi-node ring's as
`inter_node_gbps` (the cluster fields' meanings, bench.schema.spec.ClusterSpec); on a CPU host the
per-collective links fitted on the world group (the form `fsdp-bench calibrate` measures), and,
without a calibration file, the preflight's matmul rate at the model's shapes as the compute rate
(times the default share a training step gets of it). `fsdp-bench calibrate --from-preflight`
writes the same as a cluster file to keep in a config folder.
"""

from __future__ import annotations

import dataclasses
import os

from bench.analysis.planner.calibration import CPU_DEFAULTS, CpuCalibration, calibration_path, load_cpu_calibration
from bench.schema.preflight import PreflightResult
from bench.schema.spec import ClusterSpec, RunSpec

CLUSTER_FIELDS = ("intra_node_gbps", "inter_node_gbps")


def compatibility_problem(spec: RunSpec, record: PreflightResult) -> str | None:
    """Why a preflight cannot stand for this point's cluster (None when it can).

    The node count may differ (links are properties of a node and its network); the cluster and
    the ranks per node must be the ones measured.
    """
    measured = record.spec
    if record.status != "ok":
        return f"--preflight: the preflight did not measure anything (status {record.status}: {record.error})"
    if (measured.cluster.name, measured.gpus_per_node) != (spec.cluster.name, spec.gpus_per_node):
        return (
            f"--preflight: measured on {measured.cluster.name} with {measured.gpus_per_node} rank(s) per node "
            f"({measured.nodes}x{measured.gpus_per_node}); this point is {spec.cluster.name} with "
            f"{spec.gpus_per_node} per node ({spec.nodes}x{spec.gpus_per_node}); allowed: a preflight of the same "
            "cluster and gpus_per_node"
        )
    return None


def measured_cluster(cluster: ClusterSpec, record: PreflightResult) -> ClusterSpec:
    """The cluster with the links the preflight measured (GPU clusters; a CPU host keeps its own)."""
    if cluster.device_type == "cpu":
        return cluster
    update = {name: record.measured_links[name] for name in CLUSTER_FIELDS if name in record.measured_links}
    return cluster.model_copy(update=update)


def measured_links(record: PreflightResult) -> dict[str, float]:
    """Per-collective loopback links of a CPU host (what the planner's CPU model reads)."""
    if record.spec.device_type != "cpu":
        return {}
    return {k: v for k, v in record.measured_links.items() if k not in CLUSTER_FIELDS}


def cpu_calibration(record: PreflightResult) -> CpuCalibration | None:
    """A CPU host's compute rate from the preflight when no `fsdp-bench calibrate` file exists.

    The preflight timed one rank at a time with the threads a rank gets (cores // ranks): that
    is the (1, threads) pattern's matmul rate; a training step gets CPU_DEFAULTS["efficiency"] of it.
    """
    if record.spec.device_type != "cpu" or calibration_path().exists() or not record.ranks:
        return None
    cores = os.cpu_count() or 1
    threads = max(1, cores // record.spec.world_size)
    gflops = record.matmul_tflops_median * 1e3
    base = load_cpu_calibration()
    return dataclasses.replace(
        base,
        path=f"preflight ({record.spec.nodes}x{record.spec.gpus_per_node})",
        step_gflops={(1, threads): gflops * CPU_DEFAULTS["efficiency"]},
    )


def cluster_yaml(record: PreflightResult, name: str) -> str:
    """A cluster file with the measured links, to keep in a config folder (`--config-dir`)."""
    cluster, links = record.spec.cluster, record.measured_links
    lines = [
        f"# Measured by fsdp-bench preflight on {record.spec.nodes}x{record.spec.gpus_per_node} of {cluster.name}"
        f" ({record.finished_at}).",
        "defaults:",
        "  - _base",
        f"  - /device@device: {cluster.device.name}",
        "  - _self_",
        f"name: {name}",
        f"device_type: {cluster.device_type}",
        f"gpus_per_node: {cluster.gpus_per_node}",
    ]
    for field in CLUSTER_FIELDS:
        value = links.get(field, getattr(cluster, field))
        note = "measured" if field in links else f"as {cluster.name}"
        lines.append(f"{field}: {value:.6g}  # {note}")
    latency = links.get("all_reduce_latency_s")
    lines.append(f"efa_devices: {cluster.efa_devices}")
    lines.append(f"link_latency_s: {latency if latency is not None else cluster.link_latency_s:.3g}")
    lines.append(f'source: "fsdp-bench preflight of {cluster.name}"')
    return "\n".join(lines) + "\n"
