"""Kubeflow PyTorchJob manifests: every eks_llama2 point renders a job the CRD accepts, strictly.

The CRD (kubeflow/training-operator, branch release-1.9,
manifests/base/crds/kubeflow.org_pytorchjobs.yaml, Apache-2.0) is kept in tests/fixtures/kubeflow/,
so the strict validation runs on any clone, offline.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from bench.config.compose import load_grid
from bench.run.execute import prepare_launch
from bench.run.launch.k8s_manifest import (
    KubeflowOptions,
    crd_schema,
    render_configmap,
    render_pytorchjob,
    validate_pytorchjob,
)

CRD = Path(__file__).resolve().parents[1] / "fixtures" / "kubeflow" / "kubeflow.org_pytorchjobs.yaml"
EFA_PER_NODE = {"p5.48xlarge": 32, "p4de.24xlarge": 4}


@pytest.fixture(scope="module")
def schema() -> dict:
    # libyaml's loader where PyYAML has it: the CRD is large, the pure-Python parser takes seconds.
    return crd_schema(yaml.load(CRD.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


@pytest.fixture(scope="module", params=sorted(EFA_PER_NODE))
def eks_points(request):
    return request.param, [p.spec for p in load_grid(["experiment=eks_llama2", f"cluster={request.param}"])]


def container_of(job: dict) -> dict:
    (box,) = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return box


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_every_eks_llama2_point_renders_a_valid_job(schema, eks_points, tmp_path):
    cluster, specs = eks_points
    assert len(specs) == 30  # 3 models x 5 node counts x 2 strategies
    for spec in specs:
        request = prepare_launch([spec], tmp_path)
        job = render_pytorchjob(request, KubeflowOptions())
        assert validate_pytorchjob(job, schema) == []
        worker, box = job["spec"]["pytorchReplicaSpecs"]["Worker"], container_of(job)
        assert worker["replicas"] == spec.nodes
        assert job["spec"]["nprocPerNode"] == "8" == str(spec.gpus_per_node)
        assert job["spec"]["elasticPolicy"]["minReplicas"] == job["spec"]["elasticPolicy"]["maxReplicas"] == spec.nodes
        limits = {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": EFA_PER_NODE[cluster]}
        assert box["resources"] == {"limits": limits, "requests": limits}
        assert worker["template"]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": cluster}
        assert flag(box["command"], "--nnodes") == str(spec.nodes)
        assert flag(box["command"], "--rdzv-endpoint") == f"{job['metadata']['name']}-worker-0:29400"
        env = {e["name"]: e.get("value") for e in box["env"]}
        assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"


def test_grouped_launch_carries_every_point_with_pod_paths(schema, eks_points, tmp_path):
    """One PyTorchJob per world shape: its ConfigMap holds all points, mapped under the results mount."""
    _, specs = eks_points
    groups = defaultdict(list)
    for spec in specs:
        groups[(spec.nodes, spec.gpus_per_node)].append(spec)
    assert sorted(n for n, _ in groups) == [1, 2, 4, 8, 16]
    for (nodes, _), group in groups.items():
        request = prepare_launch(group, tmp_path)
        opts = KubeflowOptions(results_pvc="fsx-results")
        job = render_pytorchjob(request, opts)
        assert validate_pytorchjob(job, schema) == []
        assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == nodes
        launch = json.loads(render_configmap(request, opts)["data"]["launch.json"])
        assert [p["point_id"] for p in launch["points"]] == [s.point_id for s in group]
        assert {p["point_dir"] for p in launch["points"]} == {f"/results/eks_llama2/{s.point_id}" for s in group}
        volumes = {v["name"]: v for v in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"]}
        assert volumes["results"]["persistentVolumeClaim"] == {"claimName": "fsx-results"}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}


@pytest.fixture()
def p5_job(tmp_path) -> dict:
    (point,) = load_grid(["experiment=eks_llama2", "model=llama2-7b", "nodes=2", "strategy=full_shard"])
    return render_pytorchjob(prepare_launch([point.spec], tmp_path), KubeflowOptions())


@pytest.mark.parametrize(
    ("path", "field", "value", "expected"),
    [
        (("spec",), "suspendd", True, "spec: Additional properties are not allowed ('suspendd' was unexpected)"),
        (("spec", "elasticPolicy"), "rdzvHostt", "x", "spec.elasticPolicy: Additional properties are not allowed"),
        (("spec", "pytorchReplicaSpecs", "Worker", "template", "spec"), "gpus", 8, "template.spec: Additional"),
        (("spec", "pytorchReplicaSpecs", "Worker"), "replicas", "2", "Worker.replicas: '2' is not of type 'integer'"),
        (("metadata",), "name", "FSDP_Job", "metadata.name: 'FSDP_Job' is not a DNS-1035 label"),
    ],
)
def test_validation_is_strict(schema, p5_job, path, field, value, expected):
    assert validate_pytorchjob(p5_job, schema) == []
    target = p5_job
    for key in path:
        target = target[key]
    target[field] = value
    problems = validate_pytorchjob(p5_job, schema)
    assert len(problems) == 1 and expected in problems[0], problems


def test_unknown_container_field_is_an_error(schema, p5_job):
    container_of(p5_job)["gpuCount"] = 8
    (problem,) = validate_pytorchjob(p5_job, schema)
    assert problem.startswith("spec.pytorchReplicaSpecs.Worker.template.spec.containers.0: Additional properties")


def test_results_url_mode_wraps_the_agent_in_the_sync_and_uses_scratch(schema, tmp_path):
    (point,) = load_grid(["experiment=eks_llama2", "model=llama2-7b", "nodes=4", "strategy=hybrid_shard"])
    request = prepare_launch([point.spec], tmp_path)
    opts = KubeflowOptions(results_url="s3://bench-bucket/runs", service_account="bench-writer")
    job = render_pytorchjob(request, opts)
    assert validate_pytorchjob(job, schema) == []
    command = container_of(job)["command"]
    assert command[:9] == [
        "python",
        "-m",
        "bench.run.launch.results_sync",
        "push",
        "/tmp/fsdp-bench-results",
        "s3://bench-bucket/runs",
        "--every",
        "30",
        "--",
    ]
    assert command[9:12] == ["python", "-m", "torch.distributed.run"]
    # The ranks dump their Flight Recorder at the deadline less the push interval and a margin, so the
    # dump reaches the bucket before the launcher's last pull; the buffer size is named for the record.
    env = {e["name"]: e.get("value") for e in container_of(job)["env"]}
    assert (env["FSDP_BENCH_FR_LEAD_S"], env["TORCH_FR_BUFFER_SIZE"]) == ("35", "2000")
    pod = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["serviceAccountName"] == "bench-writer"
    assert {v["name"]: v for v in pod["volumes"]}["results"] == {"name": "results", "emptyDir": {}}
    launch = json.loads(render_configmap(request, opts)["data"]["launch.json"])
    assert launch["points"][0]["point_dir"] == f"/tmp/fsdp-bench-results/eks_llama2/{point.spec.point_id}"


def test_cpu_point_asks_for_no_gpus_or_efa(schema, tmp_path):
    (point,) = load_grid(["model=debug", "nodes=2", "launcher=kubeflow"])
    job = render_pytorchjob(prepare_launch([point.spec], tmp_path), KubeflowOptions(env={"NCCL_DEBUG": "INFO"}))
    assert validate_pytorchjob(job, schema) == []
    box = container_of(job)
    assert "resources" not in box or box["resources"] == {}
    env = {e["name"] for e in box["env"]}
    assert not any(name.startswith("FI_") for name in env)
    assert "nodeSelector" not in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert {e["name"]: e.get("value") for e in box["env"]}["NCCL_DEBUG"] == "INFO"  # launcher.env is applied
    assert "FSDP_BENCH_FR_LEAD_S" not in env  # on the results volume: the dumps are there as written
