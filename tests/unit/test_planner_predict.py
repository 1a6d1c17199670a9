"""The planner end to end: monotonicity properties, `fsdp-bench plan` output, bad input."""

from __future__ import annotations

import json

import pytest
from bench_cli import in_process

from bench.analysis.planner import predict, with_scaling_efficiency
from bench.analysis.planner.memory import fits, max_micro_batch, memory_breakdown, peak_memory
from bench.analysis.planner.shapes import llama_shape
from bench.analysis.planner.step import step_time
from bench.analysis.planner.workload import Workload
from bench.config.compose import flavors, load_preset, spec_from_fields

FLAVORS = flavors()
P5 = load_preset("cluster", "p5.48xlarge")


def gpu_workload(model: str = "llama2-7b", **kw) -> Workload:
    fields = {
        "shape": llama_shape(FLAVORS[model]),
        "cluster": P5,
        "nodes": 1,
        "gpus_per_node": 8,
        "strategy": "full_shard",
        "precision": "bf16",
        "seq_len": 4096,
        "micro_batch": 1,
        "activation_checkpointing": "full",
    }
    fields.update(kw)
    return Workload(**fields)


def states(w: Workload) -> int:
    memory = memory_breakdown(w)
    return memory["params"] + memory["grads"] + memory["optimizer"]


@pytest.mark.parametrize("model", ["llama2-7b", "llama2-13b", "llama2-70b", "debug"])
def test_more_nodes_never_increase_state_memory_under_full_shard(model):
    by_nodes = [gpu_workload(model, nodes=n) for n in (1, 2, 3, 4, 6, 8, 16, 32, 64)]
    state = [states(w) for w in by_nodes]
    total = [memory_breakdown(w)["total"] for w in by_nodes]
    assert state == sorted(state, reverse=True) and state[0] > state[-1]
    if model != "debug":  # debug's 32-row matrices pad to 512 rows on 512 ranks: whole buffers grow
        assert total == sorted(total, reverse=True)


@pytest.mark.parametrize("strategy", ["full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard"])
@pytest.mark.parametrize("field", ["inter_node_gbps", "intra_node_gbps"])
def test_more_bandwidth_never_increases_step_time(strategy, field):
    times = []
    for gbps in (25, 100, 400, 1600, 3200, 6400, 12800):
        cluster = P5.model_copy(update={field: gbps})
        times.append(step_time(gpu_workload(nodes=4, strategy=strategy, cluster=cluster))["total"])
    assert times == sorted(times, reverse=True)
    assert times[0] > times[-1]


def test_step_time_split_sums_and_max_micro_batch_is_the_fitting_edge():
    w = gpu_workload("llama2-13b", nodes=2)
    t = step_time(w)
    assert t["compute"] + t["exposed_comm"] + t["other"] == pytest.approx(t["total"])
    largest = max_micro_batch(w)
    assert largest > 1
    assert fits(w.with_micro_batch(largest)) and not fits(w.with_micro_batch(largest + 1))
    assert max_micro_batch(gpu_workload("llama2-70b", nodes=1)) == 0  # 70B states alone exceed 8x80 GiB


def test_cpu_offload_moves_states_to_the_host():
    on_device = memory_breakdown(gpu_workload("llama2-70b", nodes=2))
    offloaded = memory_breakdown(gpu_workload("llama2-70b", nodes=2, cpu_offload=True))
    states_bytes = on_device["params"] + on_device["grads"] + on_device["optimizer"]
    assert offloaded["params"] == offloaded["grads"] == offloaded["optimizer"] == 0
    assert offloaded["host_offloaded"] == states_bytes
    assert on_device["total"] - offloaded["total"] == states_bytes


def test_a_device_file_sets_the_achievable_fraction_and_bandwidths():
    slower = P5.model_copy(update={"device": P5.device.model_copy(update={"relative_efficiency": 0.5})})
    assert step_time(gpu_workload(cluster=slower))["compute"] == pytest.approx(2 * step_time(gpu_workload())["compute"])


def test_predict_keys_and_scaling_groups():
    specs = [spec_from_fields(model="debug", nodes=n, strategy=s) for s in ("full_shard", "no_shard") for n in (1, 2)]
    out = with_scaling_efficiency([predict(spec) for spec in specs])
    assert {
        "spec",
        "model_info",
        "memory_bytes_per_device",
        "fits",
        "max_micro_batch",
        "step_time_s",
        "tokens_per_s_per_device",
        "mfu",
        "scaling_efficiency",
        "comm_bytes_per_step",
    } <= set(out[0])
    assert [p["scaling_efficiency"] is None for p in out] == [True, False, True, False]
    assert out[1]["scaling_baseline_nodes"] == 1
    assert out[1]["scaling_efficiency"] == pytest.approx(
        out[1]["tokens_per_s_per_device"] / out[0]["tokens_per_s_per_device"]
    )
    assert out[0]["mfu"] is None  # CPU: no datasheet peak
    json.dumps(out)  # plain data


def run_plan(*argv: str) -> tuple[int, str, str]:
    code, out, err, _ = in_process("plan", *argv)
    return code, out, err


def test_plan_json_over_a_grid():
    code, out, _ = run_plan("model=debug", "nodes=1,2", "--json")
    assert code == 0
    points = json.loads(out)
    assert [p["spec"]["nodes"] for p in points] == [1, 2]
    assert points[0]["model_info"]["params"] == 156_480
    assert points[0]["scaling_efficiency"] is None and 0 < points[1]["scaling_efficiency"] <= 1
    assert points[1]["comm_bytes_per_step"] == {"all_gather": 989_440, "reduce_scatter": 625_920, "all_reduce": 0}
    assert points[0]["memory_bytes_per_device"]["total"] == sum(
        v for k, v in points[0]["memory_bytes_per_device"].items() if k not in ("total", "host_offloaded")
    )


def test_plan_experiment_table():
    code, out, _ = run_plan("experiment=eks_llama2", "cluster=p5.48xlarge", "model=llama2-70b", "strategy=full_shard")
    assert code == 0
    assert "llama2-70b 16x8 full_shard bf16 mb=1 s=4096 ac=full" in out
    assert "memory per device (GiB)" in out and "vs 1n" in out


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("cluster.inter_node_gbps=0", "cluster.inter_node_gbps: must be positive, got 0"),
        ("cluster.intra_node_gbps=-5", "cluster.intra_node_gbps: must be positive, got -5"),
        ("cluster.device_memory_gib=0", "cluster.device_memory_gib: must be positive"),
        ("cluster.peak_tflops.bf16=-1", "cluster.peak_tflops.bf16: must be positive, got -1"),
        ("cluster=dgx-9000", "cluster: unknown cluster 'dgx-9000'; allowed: "),
    ],
)
def test_plan_refuses_meaningless_hardware(override, message):
    code, out, err = run_plan("cluster=p5.48xlarge", "model=llama2-7b", override)
    assert code == 2
    assert message in err and out == ""


def test_sweep_plan_skips_points_predicted_not_to_fit():
    from bench.analysis.planner.skip import skip_if_not_fitting

    assert skip_if_not_fitting(spec_from_fields(model="debug")) is None
    tight = spec_from_fields(model="debug", nodes=2, cluster={"device_memory_gib": 0.25})
    record = skip_if_not_fitting(tight)
    assert record.status == "skipped" and record.point_id == tight.point_id
    assert record.prediction["fits"] is False and record.prediction["max_micro_batch"] == 0
    assert record.error.startswith("planner: predicted not to fit (") and "no micro-batch fits" in record.error


def assert_cache_key(key, value, clear, w: Workload, outside: list[Workload], inside: list[Workload]) -> None:
    """A planner cache's key is right: every workload in `outside` has `w`'s key and, computed
    afresh (`clear` first), `w`'s value; every one in `inside` has a key of its own; and with all of
    them cached at once, `value` gives each what it gives computed afresh."""

    def afresh(workload: Workload):
        clear()
        return value(workload)

    expected = afresh(w)
    for other in outside:
        assert key(other) == key(w)
        assert afresh(other) == expected
    assert len({key(v) for v in [w, *inside]}) == len(inside) + 1
    fresh = [afresh(v) for v in [w, *outside, *inside]]
    clear()
    assert [value(v) for v in [w, *outside, *inside]] == fresh


def test_memory_never_reads_what_its_cache_key_leaves_out():
    """bench/analysis/planner/memory.py caches per `memory_key`: every input outside the key must
    leave memory unchanged (computed afresh), and every input in it must change the key."""
    from dataclasses import replace

    from bench.analysis.planner.memory import clear_caches, memory_key

    def memory(workload: Workload) -> tuple:
        return memory_breakdown(workload), peak_memory(workload), max_micro_batch(workload)

    w = gpu_workload("llama2-13b", nodes=2, strategy="hybrid_shard", micro_batch=2)
    faster = P5.model_copy(update={"inter_node_gbps": 100.0, "intra_node_gbps": 50.0, "link_latency_s": 1e-3})
    outside = [
        replace(w, grad_accum=8),
        replace(w, compile=True),
        replace(w, threads_per_rank=3),
        replace(w, links={"all_gather_gbps": 1.0}),
        replace(w, cluster=faster),
    ]
    inside = [
        replace(w, micro_batch=3),
        replace(w, nodes=4),
        replace(w, strategy="full_shard"),
        replace(w, precision="bf16_pure"),
        replace(w, seq_len=2048),
        replace(w, activation_checkpointing="none"),
        replace(w, cpu_offload=True),
        replace(w, cluster=P5.model_copy(update={"device_memory_gib": 40.0})),
    ]
    assert_cache_key(memory_key, memory, clear_caches, w, outside, inside)


def test_collective_times_never_read_what_their_cache_key_leaves_out():
    """bench/analysis/planner/comm.py caches collective times per `comm_key`: every input outside the
    key must give the same times computed afresh, every input in it must change the key and the
    times, and a cached time is the time computed afresh."""
    from dataclasses import replace

    from bench.analysis.planner.comm import clear_caches, collective_times, comm_key

    w = gpu_workload("llama2-13b", nodes=2, strategy="hybrid_shard", micro_batch=2)
    outside = [
        replace(w, micro_batch=3),
        replace(w, grad_accum=8),
        replace(w, activation_checkpointing="none"),
        replace(w, compile=True),
        replace(w, threads_per_rank=3),
        replace(w, cpu_offload=True),
        replace(w, seq_len=2048),
        replace(w, cluster=P5.model_copy(update={"device_memory_gib": 40.0})),
    ]
    inside = [
        replace(w, nodes=4),
        replace(w, gpus_per_node=4),
        replace(w, strategy="full_shard"),
        replace(w, precision="fp8"),
        replace(w, shape=llama_shape(FLAVORS["llama2-7b"])),
        replace(w, links={"all_gather_gbps": 1.0}),
        replace(w, cluster=P5.model_copy(update={"inter_node_gbps": 100.0})),
        replace(w, cluster=P5.model_copy(update={"intra_node_gbps": 50.0})),
        replace(w, cluster=P5.model_copy(update={"link_latency_s": 1e-3})),
    ]
    assert_cache_key(comm_key, collective_times, clear_caches, w, outside, inside)
    assert all(collective_times(other) != collective_times(w) for other in inside)


def test_a_grids_accumulations_share_what_reads_no_grad_accum():
    """predict_grid's AccumulationMemo: each grad_accum of a workload predicted with the memo is the
    prediction without it (computed afresh), the memo computing once per workload; a workload that
    differs in anything else (a field, another cluster object, other links) is its own entry."""
    from dataclasses import replace

    from bench.analysis.planner.predict import AccumulationMemo, predict_workload

    w = gpu_workload("llama2-13b", nodes=2, strategy="hybrid_shard", micro_batch=2, cpu_offload=True)
    memo = AccumulationMemo()
    for accumulation in (1, 8, 2, 1):
        point = replace(w, grad_accum=accumulation)
        assert predict_workload(point, memo) == predict_workload(point)
    assert len(memo._parts) == 1
    others = [
        replace(w, micro_batch=3),
        replace(w, compile=True),
        replace(w, cluster=P5.model_copy()),
        replace(w, links={"all_gather_gbps": 1.0}),
    ]
    for other in others:
        assert predict_workload(other, memo) == predict_workload(other)
    assert len(memo._parts) == 1 + len(others)
    # The dicts a prediction returns are its own: changing one changes no other accumulation's.
    first = predict_workload(w, memo)
    first["memory_bytes_per_device"]["total"] = -1
    first["assumptions"]["cluster"] = "changed"
    assert predict_workload(replace(w, grad_accum=4), memo) == predict_workload(replace(w, grad_accum=4))
