"""The links a preflight hands the planner reproduce the times it measured, at the shape measured:
a ring of GPUs spanning nodes (the world) and a ring inside one node, on a 2x8 p5.48xlarge record
built by scripts/p5_anchor_from_preflight.py through the preflight's own record code. The report's
nominal lines, its links table and the planner read `inter_node_gbps` (the whole node's network)
the same way."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench.analysis.planner.calibration import network_efficiency
from bench.analysis.planner.comm import replica_group_link, ring_time, shard_group_link
from bench.analysis.planner.from_preflight import measured_cluster
from bench.analysis.planner.workload import workload_from_spec
from bench.analysis.preflight import find_stragglers, nominal_busbw_gbps
from bench.config.compose import spec_from_fields
from reports.report.cluster_health import busbw_figure, cluster_health

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "p5_anchor_from_preflight.py"


@pytest.fixture(scope="module")
def anchor():
    spec = importlib.util.spec_from_file_location("p5_anchor", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("busbw", [300.0, 175.0, 60.0])  # below the node's NVLink ring, as on a real p5
def test_the_planner_reproduces_the_world_ring_a_p5_preflight_measured(anchor, busbw):
    record = anchor.preflight_record(busbw)
    measured = next(s for s in record.collectives if (s.op, s.group, s.bytes) == ("all_gather", "world", anchor.LARGE))
    assert measured.busbw_gbps == pytest.approx(busbw)
    two_nodes = workload_from_spec(anchor.setup(2), measured_cluster(record.spec.cluster, record))
    link = shard_group_link(two_nodes, "all_gather")
    assert transfer_time(anchor.LARGE, 16, link) == pytest.approx(measured.time_s, rel=1e-6)


def test_inside_a_node_the_link_is_the_node_groups_bus_bandwidth(anchor):
    record = anchor.preflight_record(200.0)
    assert record.measured_links["intra_node_gbps"] == pytest.approx(anchor.NVLINK_BUSBW_GBPS * 8)
    one_node = workload_from_spec(anchor.setup(1), measured_cluster(record.spec.cluster, record))
    node = next(s for s in record.collectives if (s.group, s.bytes, s.node) == ("node", anchor.LARGE, 0))
    link = shard_group_link(one_node, "all_reduce")
    assert transfer_time(anchor.LARGE, 8, link, passes=2) == pytest.approx(node.time_s, rel=1e-6)


def transfer_time(nbytes: int, ranks: int, link, passes: int = 1) -> float:
    """The planner's ring time without its fixed latencies (the synthetic 1 GiB times have none)."""
    return ring_time(nbytes, ranks, link, passes) - ring_time(1, ranks, link, passes)


@pytest.mark.parametrize(("hosts", "named"), [(("p5-0", "p5-1"), [1]), (("vm", "vm"), [])])
def test_a_slow_node_is_named_only_when_nodes_are_machines_of_their_own(anchor, hosts, named):
    """Node 1's own all-reduce 30 % slower: named on two hosts; not when both "nodes" are
    processes of one host (a local launch), where their rings share the same cores."""
    record = anchor.preflight_record(200.0)
    slow = [s.model_copy(update={"best_s": s.best_s * 1.3}) if s.node == 1 else s for s in record.collectives]
    ranks = [r.model_copy(update={"host": hosts[r.node]}) for r in record.ranks]
    record = record.model_copy(update={"collectives": slow, "ranks": ranks})
    found = [s for s in find_stragglers(record) if s.measure == "node all_reduce"]
    assert [s.node for s in found] == named
    assert all(s.host == hosts[1] and s.slower_by == pytest.approx(1.3 / 1.15 - 1) for s in found)


def test_the_figure_the_links_table_and_the_planner_read_the_node_network_alike(anchor):
    """2x8 p5.48xlarge (3,200 Gbit/s per node): the world ring's dashed line is the node's network
    at the fabric efficiency of 2 nodes, 383 GB/s (not one GPU's 1/8 share, 50 GB/s), the planner's
    link for that ring; so the measured 300 GB/s over the line is the table's measured / nominal."""
    record = anchor.preflight_record(300.0)
    figure = busbw_figure(record)
    lines = {line.get_gid(): line.get_ydata()[0] for ax in figure.axes for line in ax.get_lines()}
    world = lines["nominal:all_gather:world"]
    assert world == pytest.approx(3200 / 8 * network_efficiency(2)) == pytest.approx(383.05, abs=0.01)
    planner = shard_group_link(workload_from_spec(anchor.setup(2)), "all_gather")
    assert world * 1e9 == pytest.approx(planner.bytes_per_s)
    assert lines["nominal:all_reduce:node"] == pytest.approx(3600 / 8)  # one GPU's NVLink
    (inter,) = [row for row in cluster_health([record], []).links.rows if row[3].startswith("inter-node")]
    assert inter[4:] == ["2,506", "3,200", f"{300 / world:.2f}"] == ["2,506", "3,200", "0.78"]
    assert "the node's network" in figure.axes[0].get_ylabel()


def test_the_replicate_rings_line_is_the_planners_hybrid_all_reduce_link():
    """Hybrid sharding's replicate rings (one rank per node, all at once) get one GPU's share."""
    spec = spec_from_fields(model="llama2-7b", nodes=4, gpus_per_node=8, strategy="hybrid_shard",
                            cluster="p5.48xlarge", launcher="kubeflow")  # fmt: skip
    link = replica_group_link(workload_from_spec(spec))
    assert nominal_busbw_gbps(spec, "replicate") * 1e9 == pytest.approx(link.bytes_per_s)
    assert nominal_busbw_gbps(spec, "replicate") == pytest.approx(3200 / 8 / 8 * network_efficiency(4))
    assert nominal_busbw_gbps(spec, "shard") == pytest.approx(3600 / 8)  # inside a node
