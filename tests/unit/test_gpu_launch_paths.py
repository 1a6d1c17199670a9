"""GPU-path rules that need no GPU to check: which GPUs each local agent gets, the world the local
launcher refuses, the fp8 MFU convention, compile's warm-up rule, and the communication settings and
collective timeouts every cluster launcher gives its ranks."""

from __future__ import annotations

import pytest

from bench.config.compose import flavors, load_point, spec_from_fields
from bench.config.problems import ConfigError
from bench.config.registry import match_device, peak_table
from bench.run.execute import prepare_launch
from bench.run.launch.cluster_env import EFA_ENV, NCCL_ENV
from bench.run.launch.local import agent_gpus, cuda_problems
from bench.run.launch.ray import RayOptions, ray_job
from bench.run.launch.slurm import SlurmOptions, batch_script
from bench.schema.flops import flops_per_token
from bench.schema.protocol import PG_TIMEOUT_MARGIN_S, LaunchPoint
from bench.schema.recipes import PRECISIONS
from bench.schema.record import recipe_of
from fsdp_core.worker import throughput_metrics

FLAVORS = flavors()


def test_each_local_agent_gets_its_own_gpus():
    assert agent_gpus(2, 4, [str(i) for i in range(8)]) == ["0,1,2,3", "4,5,6,7"]
    assert agent_gpus(4, 1, ["3", "5", "6", "7"]) == ["3", "5", "6", "7"]  # an inherited CUDA_VISIBLE_DEVICES
    assert agent_gpus(1, 2, ["GPU-a", "GPU-b"]) == ["GPU-a,GPU-b"]


def test_a_local_world_larger_than_the_hosts_gpus_is_refused_in_one_line():
    spec = spec_from_fields(model="debug", cluster="h100-8x", nodes=2, gpus_per_node=4)
    assert cuda_problems(spec, available=8) == []
    (problem,) = cuda_problems(spec, available=4)
    assert problem.startswith("nodes x gpus_per_node: 2 x 4 = 8 ranks need a GPU each and this host has 4")
    (none_here,) = cuda_problems(spec, available=0)
    assert "needs CUDA GPUs and this host has none" in none_here


@pytest.mark.parametrize(
    ("runtime_name", "device"),
    [
        ("NVIDIA GH200 480GB", "gh200-96gb"),
        ("NVIDIA GH200 144G HBM3e", "gh200-144gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
    ],
)
def test_new_devices_have_their_peaks(runtime_name, device):
    facts = match_device(runtime_name)
    assert facts.device == device and facts.peak_tflops["bf16"] in (312, 989.4)


def _metrics(precision: str, device_name: str):
    spec = spec_from_fields(model="debug", cluster="h100-8x", precision=precision, seq_len=64)
    recipe = PRECISIONS[precision]
    fp8 = recipe.peak_dtype if recipe.peak_dtype != recipe.mfu_peak_dtype else None
    point = LaunchPoint(
        point_id="p", point_dir="/tmp", spec=spec, recipe=recipe_of(spec), mfu_peak_dtype=recipe.mfu_peak_dtype,
        fp8_peak_dtype=fp8,
    )  # fmt: skip
    return throughput_metrics(spec, [0.5, 0.5, 0.5], device_name, point, peak_table())


def test_fp8_mfu_divides_by_the_bf16_peak_and_also_reports_the_fp8_one():
    metrics, notes = _metrics("fp8", "NVIDIA H100 80GB HBM3")
    bf16_metrics, _ = _metrics("bf16", "NVIDIA H100 80GB HBM3")
    assert metrics.tokens_per_step == 64 and metrics.tokens_per_s == 128
    assert metrics.flops_per_token == flops_per_token(FLAVORS["debug"], 64)
    assert metrics.mfu == pytest.approx(bf16_metrics.mfu)
    assert metrics.peak_flops_per_device == 989.4e12
    assert metrics.mfu_fp8_peak == pytest.approx(metrics.mfu * 989.4 / 1978.9)
    assert "bf16 peak" in notes["mfu"]
    # Left unset: a bf16 record has no such key (bench.schema.record.rank_record_json writes what is set).
    assert "mfu_fp8_peak" not in bf16_metrics.model_fields_set


def test_compile_needs_two_warm_up_steps():
    with pytest.raises(ConfigError) as error:
        load_point(["model=debug", "train.compile=true", "train.warmup_steps=1"])
    assert error.value.lines == ["train.warmup_steps: train.compile=true needs at least 2 warm-up steps, got 1"]
    assert load_point(["model=debug", "train.compile=true", "train.warmup_steps=2"]).spec.train.compile


def _request(tmp_path, *overrides):
    spec = load_point(["model=llama2-7b", "gpus_per_node=8", "sweep.point_timeout_s=900", *overrides]).spec
    return prepare_launch([spec], tmp_path)


def test_slurm_jobs_on_an_efa_cluster_set_the_same_nccl_and_efa_variables_as_kubeflow(tmp_path):
    script = batch_script(
        _request(tmp_path, "cluster=p5.48xlarge", "launcher=slurm"), SlurmOptions(env={"NCCL_DEBUG": "INFO"})
    )
    for key, value in {**EFA_ENV, **NCCL_ENV, "NCCL_DEBUG": "INFO"}.items():
        assert f"export {key}={value}" in script.replace("'", ""), key
    assert "export NCCL_DEBUG=WARN" not in script.replace("'", "")  # launcher.env wins
    no_efa = batch_script(_request(tmp_path, "cluster=h100-8x", "launcher=slurm"), SlurmOptions())
    assert "FI_PROVIDER" not in no_efa and "NCCL_SOCKET_IFNAME" in no_efa


def test_ray_gives_its_process_group_the_same_margin_over_the_point_timeout(tmp_path):
    job = ray_job(_request(tmp_path, "cluster=h100-8x", "launcher=ray"), RayOptions())
    assert job["timeout_s"] == 900 + PG_TIMEOUT_MARGIN_S


def test_the_planner_compares_memory_with_peak_reserved_on_gpu_and_resident_set_on_cpu():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
    from record_factory import make_record

    from bench.analysis.plan_accuracy import measured_memory

    cpu = make_record(peak_mem_bytes=3 * 2**30)
    assert measured_memory(cpu) == (3 * 2**30, "resident")
    gpu = make_record(model="llama2-7b", cluster="h100-8x", gpus_per_node=8)
    gpu.metrics.peak_mem_bytes = gpu.metrics.peak_mem_bytes.model_copy(update={"reserved_max": 70 * 2**30})
    assert measured_memory(gpu) == (70 * 2**30, "reserved")
