"""`fsdp-bench preflight` on real gloo ranks: what it measures, stragglers named (and none when
quiet), the record, the planner and calibrate reading it, `sweep.preflight=true`, bad input."""

from __future__ import annotations

import json

import pytest

from bench.analysis.preflight import read_preflight
from reports.preflight import table_lines

# Small messages and few repetitions: a CPU preflight in seconds.
FAST = ["model=debug", "train.seq_len=32", "preflight.max_bytes=65536", "preflight.iters=3", "preflight.matmul_iters=7"]


@pytest.fixture(scope="module")
def two_shapes(tmp_path_factory, fsdp_bench):
    """A sweep with `sweep.preflight=true` over two world shapes (1x1 and 2x1), two points each: one
    launch per shape, its preflight first. Its 2x1 preflight is the quiet two-node one below.

    Another test worker shares these two cores: tiny matmuls then differ by up to ~10 % between
    healthy ranks (seen in CI), so "quiet" is judged with a 30 % floor; the slow rank below, three
    times as slow, stands 50 % over the two-rank median and is judged with the default 10 % (`slow_rank`)."""
    results = tmp_path_factory.mktemp("preflight_sweep")
    run = fsdp_bench(
        "sweep", *FAST, "nodes=1,2", "strategy=full_shard,no_shard", "train.steps=3", "train.warmup_steps=1",
        "sweep.preflight=true", "preflight.straggler_floor=0.3", "sweep.name=pre", f"results_dir={results}",
        results=results, timeout=300,
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    return run, results


@pytest.fixture(scope="module")
def two_nodes(two_shapes):
    """The sweep's 2x1 preflight: (its folder, its record)."""
    folder = two_shapes[1] / "pre" / "_preflight" / "2x1"
    return folder, read_preflight(folder)


@pytest.fixture(scope="module")
def slow_rank(tmp_path_factory, fsdp_bench):
    """One launch of 2 nodes with debug.slow_rank=1: its preflight, then one point (a sweep without
    a grid of its own runs cpu_smoke's: every key of it pinned), both with rank 1 sleeping twice its
    own time (debug.slow_fraction=2: slowed by half, the Slurm preflight's straggler was once hidden
    by the other tests' load on rank 0). (The sweep, its results folder, its preflight record.)"""
    results = tmp_path_factory.mktemp("preflight_slow")
    run = fsdp_bench(
        "sweep", *FAST, "nodes=2", "strategy=full_shard", "precision=fp32", "train.micro_batch=1", "train.steps=4",
        "train.warmup_steps=2", "debug.slow_rank=1", "debug.slow_fraction=2", "sweep.preflight=true", "sweep.name=adhoc",
        "report=false", f"results_dir={results}", results=results, timeout=240,
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    return run, results, read_preflight(results / "adhoc" / "_preflight")


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory, fsdp_bench):
    results = tmp_path_factory.mktemp("preflight_hybrid")
    return run_preflight(fsdp_bench, results, "nodes=2", "gpus_per_node=2", "strategy=hybrid_shard")


def run_preflight(fsdp_bench, results, *overrides):
    """`fsdp-bench preflight` as a user runs it; (its output, the record it stored)."""
    run = fsdp_bench("preflight", *FAST, *overrides, f"results_dir={results}", timeout=240)
    assert run.rc == 0, run.stdout + run.stderr
    return run, read_preflight(results / "adhoc" / "_preflight")


@pytest.mark.ranks
def test_two_nodes_record_and_table(two_nodes):
    _, record = two_nodes
    assert record.status == "ok" and (record.spec.nodes, record.spec.gpus_per_node) == (2, 1)
    assert [r.rank for r in record.ranks] == [0, 1] and all(r.matmul_tflops > 0 for r in record.ranks)
    assert set(record.ranks[0].matmul_tflops_by_shape) == {"attn_qo", "attn_kv", "mlp_up", "mlp_down", "output"}
    assert all(r.memory_gbps and r.memory_gbps > 0 for r in record.ranks)
    world = [s for s in record.collectives if s.group == "world"]
    assert {s.op for s in world} == {"all_gather", "reduce_scatter", "all_reduce"}
    assert sorted({s.bytes for s in world if s.op == "all_reduce"}) == [2**k for k in range(10, 17)]  # 1 KiB .. 64 KiB
    for s in world:  # nccl-tests' conventions on 2 ranks: (n-1)/n = 1/2, all-reduce 2(n-1)/n = 1
        assert s.algbw_gbps == pytest.approx(s.bytes / s.time_s / 1e9)
        assert s.busbw_gbps == pytest.approx(s.algbw_gbps * (1.0 if s.op == "all_reduce" else 0.5))
        assert s.best_s <= s.time_s
    assert record.stragglers == []  # quiet: nobody named
    table = "\n".join(table_lines(record))  # what `fsdp-bench preflight` prints (test_hybrid_...)
    assert "stragglers: none" in table and "busbw GB/s" in table
    assert {"all_reduce_gbps", "all_reduce_latency_s", "inter_node_gbps"} <= set(record.measured_links)
    assert "intra_node_gbps" not in record.measured_links  # one rank per node: no link inside a node to time
    assert all(v > 0 for k, v in record.measured_links.items() if k.endswith("_gbps"))


@pytest.mark.ranks
def test_a_slow_rank_is_named_with_its_host_and_local_rank(slow_rank):
    _, _, record = slow_rank
    (straggler,) = record.stragglers
    assert (straggler.measure, straggler.rank, straggler.local_rank, straggler.node) == ("matmul", 1, 0, 1)
    assert straggler.host == record.ranks[1].host and straggler.slower_by > 0.1
    assert "straggler: rank 1 (host " in "\n".join(table_lines(record))


@pytest.mark.ranks
def test_hybrid_measures_every_group_the_strategy_uses(hybrid):
    run, record = hybrid
    assert "\n".join(table_lines(record)) in run.stdout  # the command prints the record's table
    groups = {(s.group, s.group_size) for s in record.collectives}
    assert groups == {("world", 4), ("shard", 2), ("replicate", 2), ("node", 2)}
    nodes = {s.node for s in record.collectives if s.group == "node"}
    assert nodes == {0, 1}  # each node's own ranks, compared with each other
    assert [r.node for r in record.ranks] == [0, 0, 1, 1] and [r.local_rank for r in record.ranks] == [0, 1, 0, 1]


@pytest.mark.ranks
def test_the_planner_and_calibrate_read_a_preflight(two_nodes, fsdp_bench, tmp_path):
    results, record = two_nodes
    plan = fsdp_bench("plan", "--json", "--preflight", results, "model=debug", "nodes=1,2,4")
    assert plan.rc == 0, plan.stderr
    predictions = json.loads(plan.stdout)
    links = predictions[0]["assumptions"]["collective_links"]
    assert links["all_reduce_gbps"] == pytest.approx(record.measured_links["all_reduce_gbps"])
    assert predictions[0]["assumptions"]["preflight"].startswith("2x1 ")
    other = fsdp_bench("plan", "--preflight", results, "model=debug", "nodes=2", "gpus_per_node=2")
    assert other.rc == 2 and other.stderr.count("\n") == 1
    assert "--preflight: measured on local-cpu with 1 rank(s) per node (2x1); this point is" in other.stderr
    cluster_file = tmp_path / "configs" / "cluster" / "measured.yaml"
    written = fsdp_bench("calibrate", "--from-preflight", results, "-o", cluster_file)
    assert written.rc == 0, written.stderr
    again = fsdp_bench("plan", "--json", "--config-dir", tmp_path / "configs", "model=debug", "cluster=measured")
    assert again.rc == 0, again.stderr
    cluster = json.loads(again.stdout)[0]["spec"]["cluster"]
    assert cluster["inter_node_gbps"] == pytest.approx(record.measured_links["inter_node_gbps"], rel=1e-5)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("preflight.collectives=[all_to_all]", "preflight.collectives.0: got 'all_to_all'; allowed: 'all_gather',"),
        ("preflight.groups=[pipeline]", "preflight.groups.0: got 'pipeline'; allowed: 'world', 'shard',"),
        ("preflight.min_bytes=0", "preflight.min_bytes: Input should be greater than or equal to 1"),
        ("preflight.max_bytes=8589934592", "preflight.max_bytes: 8,589,934,592 bytes needs about twice that"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_launches(fsdp_bench, tmp_path, override, message):
    run = fsdp_bench("preflight", "model=debug", override, f"results_dir={tmp_path}", separate=False)  # refused here
    assert run.rc == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"error: {message}"), run.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_sweep_preflight_measures_each_world_shape_once_and_attaches_it(two_shapes):
    run, results = two_shapes
    assert len(run.records) == 4
    preflights = sorted(p.parent.name for p in (results / "pre" / "_preflight").rglob("preflight.json"))
    assert preflights == ["1x1", "2x1"]
    for record in run.records:
        shape = f"{record.spec.nodes}x{record.spec.gpus_per_node}"
        assert record.preflight is not None and record.preflight.path.endswith(f"{shape}/preflight.json")
        assert record.preflight.matmul_tflops_median > 0
    two = next(r for r in run.records if r.spec.nodes == 2)
    assert "all_reduce/world" in two.preflight.busbw_gbps
    html = (results / "pre" / "report" / "report.html").read_text()
    assert "Cluster health" in html


@pytest.mark.ranks
def test_every_record_keeps_each_ranks_step_time_and_the_host_load(slow_rank, fsdp_bench, tmp_path):
    run, results, _ = slow_rank
    (record,) = run.records
    medians = record.metrics.rank_step_time_medians_s
    assert len(medians) == 2 and record.metrics.slowest_rank == 1 and medians[1] > medians[0]
    (host,) = record.metrics.host_load
    assert host.ranks_cores >= 2 and host.before >= 0 and host.after >= 0
    assert record.env.exclusive_host is False  # the tests run with FSDP_BENCH_ALLOW_CONCURRENT=1
    assert record.env.rank_hosts == [host.host, host.host]
    report = fsdp_bench("report", results, "-o", tmp_path / "report")
    assert report.rc == 0, report.stderr
    health = (tmp_path / "report" / "report.html").read_text().split('id="cluster-health"')[1].split("</section>")[0]
    # rank 1 sleeps twice its step: 3 / 2 of the two ranks' median, beyond the 10 % floor
    assert f"<td>point adhoc/{record.point_id}</td><td>step time</td><td>1</td><td>{host.host}</td><td>0</td>" in health


@pytest.mark.ranks
def test_the_report_draws_a_preflight_and_highlights_its_straggler(slow_rank):
    from matplotlib.colors import to_hex

    from reports.report.cluster_health import cluster_health, matmul_figure

    _, _, record = slow_rank
    bars = matmul_figure(record).axes[0].patches
    assert [to_hex(bar.get_facecolor()) for bar in bars] == ["#0072b2", "#d55e00"]  # rank 1 in red
    health = cluster_health([record], [])
    names = [f.name for f in health.figures]
    assert names == ["preflight_busbw_adhoc_2x1", "preflight_matmul_adhoc_2x1"]
    (row,) = health.stragglers.rows
    assert row[:5] == ["preflight adhoc 2x1", "matmul", "1", f"{record.ranks[1].host} (node 1)", "0"]
    measures = [r[3] for r in health.links.rows]
    assert measures == ["matmul TFLOP/s (fp32, median rank)", "inter-node network, Gbit/s per node",
                        "all-reduce latency per ring hop, µs"]  # fmt: skip
    assert health.links.rows[1][4] == f"{record.measured_links['inter_node_gbps']:,.4g}"
