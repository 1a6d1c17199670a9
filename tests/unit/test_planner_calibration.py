"""The local-cpu calibration: the link fit, loading the file, and how the planner uses it."""

from __future__ import annotations

import json

import pytest

from bench.analysis.planner.calibration import calibrated_cluster, load_cpu_calibration
from bench.analysis.planner.comm import ring_time, shard_group_link
from bench.analysis.planner.compute import cpu_rate
from bench.analysis.planner.shapes import llama_shape
from bench.analysis.planner.workload import Workload
from bench.config.compose import flavors, load_preset, spec_from_fields
from bench.run.calibrate import MESSAGE_SIZES, fit_link, step_patterns

FLAVORS = flavors()
LOCAL_CPU = load_preset("cluster", "local-cpu")

CALIBRATION = {
    "schema_version": 1,
    "cores": 2,
    "memory_gib": 8.0,
    "matmul_gflops": {"fp32": {"1": 80.0, "2": 150.0}, "bf16": {"1": 160.0, "2": 300.0}},
    "model_step": {
        "model": "tiny",
        "patterns": [
            {"processes": 1, "threads": 1, "gflops_per_process": 40.0},
            {"processes": 1, "threads": 2, "gflops_per_process": 70.0},
            {"processes": 2, "threads": 1, "gflops_per_process": 36.0},
            {"processes": 4, "threads": 1, "gflops_per_process": 17.0},
        ],
    },
    "optimizer_gbps": 10.0,
    "collectives": {
        "all_gather": {"gbps": 8.0, "latency_s": 1e-4},
        "reduce_scatter": {"gbps": 4.0, "latency_s": 2e-4},
        "all_reduce": {"gbps": 8.0, "latency_s": 1e-4},
    },
}


@pytest.fixture
def calibration_file(tmp_path, monkeypatch):
    path = tmp_path / "local-cpu.json"
    path.write_text(json.dumps(CALIBRATION))
    monkeypatch.setenv("FSDP_BENCH_CALIBRATION", str(path))
    return path


def cpu_workload(cluster, **kw) -> Workload:
    fields = {
        "shape": llama_shape(FLAVORS["tiny"]),
        "cluster": cluster,
        "nodes": 1,
        "gpus_per_node": 1,
        "strategy": "full_shard",
        "precision": "fp32",
        "seq_len": 128,
        "micro_batch": 2,
    }
    fields.update(kw)
    return Workload(**fields)


def test_fit_link_recovers_the_ring_model():
    # 2 ranks: an all-gather moves half the buffer per rank; an all-reduce twice that.
    bandwidth, latency = 1e9, 5e-5  # bytes/s, s
    gather = [latency + size / 2 / bandwidth for size in MESSAGE_SIZES]
    reduce = [2 * (latency + size / 2 / bandwidth) for size in MESSAGE_SIZES]
    assert fit_link(MESSAGE_SIZES, gather, passes=1) == pytest.approx({"gbps": 8.0, "latency_s": latency})
    assert fit_link(MESSAGE_SIZES, reduce, passes=2) == pytest.approx({"gbps": 8.0, "latency_s": latency})


def test_step_patterns_follow_the_worker_thread_rule():
    assert step_patterns(2) == [(1, 1), (1, 2), (2, 1), (4, 1)]
    assert step_patterns(16) == [(1, 1), (1, 16), (2, 8), (4, 4), (8, 2), (16, 1), (32, 1)]


def test_calibrated_cluster_uses_the_measured_links_and_memory(calibration_file):
    cluster, links = calibrated_cluster(LOCAL_CPU)
    assert cluster.device_memory_gib == 8.0
    assert links["reduce_scatter_gbps"] == 4.0
    link = shard_group_link(cpu_workload(cluster, nodes=2, links=links), "reduce_scatter")
    # 2 ranks, 1e6 bytes: latency + half the buffer at 0.5 GB/s.
    assert ring_time(1e6, 2, link) == pytest.approx(2e-4 + 0.5e6 / 0.5e9)
    overridden, _ = calibrated_cluster(spec_from_fields(model="debug", cluster={"device_memory_gib": 4}).cluster)
    assert overridden.device_memory_gib == 4  # an explicit override wins over the measurement


def test_cpu_rate_uses_the_measured_pattern(calibration_file):
    cal = load_cpu_calibration()
    cluster, _ = calibrated_cluster(LOCAL_CPU)
    assert cpu_rate(cpu_workload(cluster), cal) == pytest.approx(70e9)  # 1 rank, 2 threads
    assert cpu_rate(cpu_workload(cluster, nodes=2), cal) == pytest.approx(36e9)  # 2 ranks, 1 thread
    assert cpu_rate(cpu_workload(cluster, nodes=2, gpus_per_node=2), cal) == pytest.approx(17e9)
    # 8 ranks on 2 cores: the 4x1 aggregate (68 GFLOP/s) shared by 8.
    assert cpu_rate(cpu_workload(cluster, nodes=8), cal) == pytest.approx(68e9 / 8)
    # bf16: the measured matmul ratio at the rank's thread count.
    assert cpu_rate(cpu_workload(cluster, precision="bf16"), cal) == pytest.approx(140e9)


def test_missing_calibration_falls_back_to_documented_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_BENCH_CALIBRATION", str(tmp_path / "absent.json"))
    cal = load_cpu_calibration()
    assert cal.path is None and cal.optimizer_gbps == 5.0
    assert calibrated_cluster(LOCAL_CPU) == (LOCAL_CPU, {})


def test_a_calibration_of_a_newer_version_is_refused_in_one_line_naming_the_file(calibration_file):
    calibration_file.write_text(json.dumps({**CALIBRATION, "schema_version": 2}))
    for load in (load_cpu_calibration, lambda: calibrated_cluster(LOCAL_CPU)):
        with pytest.raises(ValueError) as caught:
            load()
        assert str(caught.value) == (
            f"calibration {calibration_file}: schema_version 2 is unknown to this fsdp-bench (it reads versions "
            "up to 1); upgrade fsdp-bench to read this calibration"
        )


def test_efficiency_flag_names_the_likely_cause():
    from bench.analysis.plan_accuracy import efficiency_flag

    comm_heavy = {"scaling_efficiency": 0.95, "step_time_s": 1.0, "comm_time_s": {"exposed": 0.1, "overlapped": 0.3}}
    compute_heavy = {**comm_heavy, "comm_time_s": {"exposed": 0.0, "overlapped": 0.05}}
    assert efficiency_flag(comm_heavy, 0.90) is None  # 5 points: within tolerance
    assert efficiency_flag(comm_heavy, 0.80) == (
        "scaling efficiency 15 points below prediction; likely cause: exposed communication: "
        "check the network (EFA/InfiniBand) and NCCL settings (predicted: communication 40 % of the planner's step)"
    )
    assert "likely cause: compute" in efficiency_flag(compute_heavy, 0.70)
    assert efficiency_flag({**comm_heavy, "scaling_efficiency": None}, 0.5) is None
