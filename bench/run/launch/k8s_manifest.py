"""Kubeflow PyTorchJob manifests for a launch (EKS first), and strict validation against the CRD.

One launch becomes a PyTorchJob (kubeflow.org/v1, training-operator release-1.9) plus a
ConfigMap holding the pod-side launch file. Worker replicas = nodes; each pod runs one torchrun
agent with nprocPerNode = gpus_per_node ranks and asks for the node's GPUs and EFA devices
(the cluster file's efa_devices: 32 on p5, 4 on p4d/p4de). Agents meet through c10d rendezvous at
`<job>-worker-0` (the operator creates a headless Service per replica from the container port
named `pytorchjob-port`); elasticPolicy says the same (min = max = nodes, no restarts), so the
operator's PET_* environment agrees with the explicit torchrun arguments.

Torch-free and cluster-free: rendering needs only the request; validation needs jsonschema
(a dev dependency) and the CRD file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path, PurePosixPath

from pydantic import Field

from bench.run.launch.base import STARTUP_GRACE_S, LaunchRequest
from bench.run.launch.cluster_env import communication_env, uses_efa
from bench.run.launch.options import LauncherOptions
from bench.run.launch.torchrun import restart_env, torchrun_args
from bench.schema.protocol import (
    FR_BUFFER_DEFAULT,
    FR_BUFFER_ENV,
    FR_DEADLINE_LEAD_S,
    FR_LEAD_ENV,
    NODE_NAME_ENV,
    RANKS_PER_HOST_ENV,
    results_relative,
)

API_VERSION = "kubeflow.org/v1"
CONTAINER = "pytorch"  # the training operator requires this container name
PORT_NAME = "pytorchjob-port"  # the operator builds each replica's Service from this port
LAUNCH_MOUNT = "/etc/fsdp-bench"
SCRATCH = "/tmp/fsdp-bench-results"  # pod-local point dirs when results go to an fsspec URL
# DNS-1035 label: what the operator's webhook requires of a PyTorchJob name.
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class KubeflowOptions(LauncherOptions):
    """Fields of sweeps/launcher/kubeflow.yaml (documented there and in docs/configuration.md)."""

    apply: bool = False
    kubectl: str = "kubectl"
    context: str | None = None
    namespace: str = "default"
    image: str = "fsdp-bench:latest"
    image_pull_policy: str = "IfNotPresent"
    service_account: str | None = None
    instance_type_label: str = "node.kubernetes.io/instance-type"
    node_selector: dict = Field(default_factory=dict)
    tolerations: list = Field(default_factory=list)
    efa: bool = True
    shm_size: str | None = "64Gi"
    extra_resources: dict = Field(default_factory=dict)
    env: dict = Field(default_factory=dict)
    results_pvc: str | None = None
    results_mount: str = "/results"
    results_url: str | None = None
    sync_interval_s: float = 30.0
    python: str = "python"
    workdir: str | None = None
    rdzv_port: int = 29400
    ttl_seconds_after_finished: int | None = None
    keep_finished: bool = False
    queue_timeout_s: float = 0.0
    startup_grace_s: float = 900.0
    poll_s: float = 10.0
    max_failures: int = 0  # torchrun restarts (elasticPolicy.maxRestarts) and pod restarts (backoffLimit)


def job_name(request: LaunchRequest) -> str:
    """A DNS-1035 name, unique per launch, short enough for `<name>-worker-<i>` pod names."""
    suffix = hashlib.sha256(str(request.work_dir).encode()).hexdigest()[:6]
    return f"fsdp-{request.shape.point_id}-{suffix}"


def pod_point_dir(local_dir: Path, opts: KubeflowOptions) -> str:
    """Where a point's (or preflight's) directory is inside the pods, under the results mount."""
    relative = PurePosixPath(*results_relative(local_dir))
    root = SCRATCH if opts.results_url else opts.results_mount
    return str(PurePosixPath(root) / relative)


def pod_launch(request: LaunchRequest, opts: KubeflowOptions) -> dict:
    """The launch file as the pods see it: point directories mapped into the pod's filesystem."""
    launch = json.loads(request.launch_file.read_text())
    for point, local_dir in zip(launch["points"], request.point_dirs):
        point["point_dir"] = point["log_dir"] = pod_point_dir(local_dir, opts)
    if launch.get("preflight"):
        launch["preflight"]["point_dir"] = pod_point_dir(Path(launch["preflight"]["point_dir"]), opts)
    return launch


def render_configmap(request: LaunchRequest, opts: KubeflowOptions) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{job_name(request)}-launch", "namespace": opts.namespace, "labels": labels(request)},
        "data": {"launch.json": json.dumps(pod_launch(request, opts), indent=1)},
    }


def labels(request: LaunchRequest) -> dict:
    return {"app.kubernetes.io/name": "fsdp-bench", "fsdp-bench/run/launch": job_name(request)}


def render_pytorchjob(request: LaunchRequest, opts: KubeflowOptions) -> dict:
    """The PyTorchJob of a launch (all its points share nodes x gpus_per_node)."""
    name, nodes = job_name(request), request.nodes
    spec = {
        "nprocPerNode": str(request.gpus_per_node),  # a string in the CRD ("auto", "gpu", "8")
        "elasticPolicy": {
            "rdzvBackend": "c10d",
            "rdzvPort": opts.rdzv_port,
            "rdzvId": name,
            "minReplicas": nodes,
            "maxReplicas": nodes,
            "maxRestarts": opts.max_failures,
        },
        "runPolicy": run_policy(request, opts),
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": nodes,
                # With restarts a pod that died (a lost node) is started again and its ranks resume.
                "restartPolicy": "OnFailure" if opts.max_failures > 0 else "Never",
                "template": {"metadata": {"labels": labels(request)}, "spec": pod_spec(request, opts)},
            }
        },
    }
    metadata = {"name": name, "namespace": opts.namespace, "labels": labels(request)}
    return {"apiVersion": API_VERSION, "kind": "PyTorchJob", "metadata": metadata, "spec": spec}


def run_policy(request: LaunchRequest, opts: KubeflowOptions) -> dict:
    """launcher.max_failures retries (0: a failed point stays failed); a deadline covering start-up and
    every point, once per attempt."""
    attempts = 1 + opts.max_failures
    deadline = attempts * (opts.startup_grace_s + sum(t + STARTUP_GRACE_S for t in request.timeouts_s))
    policy = {"backoffLimit": opts.max_failures, "cleanPodPolicy": "Running", "activeDeadlineSeconds": int(deadline)}
    if opts.ttl_seconds_after_finished is not None:
        policy["ttlSecondsAfterFinished"] = opts.ttl_seconds_after_finished
    return policy


def pod_spec(request: LaunchRequest, opts: KubeflowOptions) -> dict:
    spec = request.shape
    selector = {}
    if "." in spec.cluster.name:  # an EC2 instance type preset (p5.48xlarge): pin pods to that node type
        selector[opts.instance_type_label] = spec.cluster.name
    selector.update(opts.node_selector)
    pod = {"containers": [container(request, opts)], "volumes": volumes(request, opts)}
    if selector:
        pod["nodeSelector"] = selector
    if opts.tolerations:
        pod["tolerations"] = copy.deepcopy(opts.tolerations)
    if opts.service_account:
        pod["serviceAccountName"] = opts.service_account
    return pod


def container(request: LaunchRequest, opts: KubeflowOptions) -> dict:
    name = job_name(request)
    launch_file = f"{LAUNCH_MOUNT}/launch.json"
    endpoint = f"{name}-worker-0:{opts.rdzv_port}"
    command = torchrun_args(
        opts.python, request.nodes, request.gpus_per_node, endpoint, name, launch_file, opts.max_failures
    )
    if opts.results_url:  # mirror the pod's point dirs to the URL while the ranks run, and at the end
        sync = [opts.python, "-m", "bench.run.launch.results_sync", "push", SCRATCH, opts.results_url]
        command = [*sync, "--every", f"{opts.sync_interval_s:g}", "--", *command]
    box = {
        "name": CONTAINER,
        "image": opts.image,
        "imagePullPolicy": opts.image_pull_policy,
        "command": command,
        "env": environment(request, opts),
        "ports": [{"name": PORT_NAME, "containerPort": opts.rdzv_port, "protocol": "TCP"}],
        "resources": resources(request, opts),
        "volumeMounts": volume_mounts(opts),
    }
    if opts.workdir:
        box["workingDir"] = opts.workdir
    return box


def efa_devices(request: LaunchRequest, opts: KubeflowOptions) -> int:
    spec = request.shape
    return spec.cluster.efa_devices if opts.efa and uses_efa(spec) else 0


def resources(request: LaunchRequest, opts: KubeflowOptions) -> dict:
    """GPUs and EFA devices per pod (one pod per node), plus any extra resources; requests = limits."""
    amounts: dict = {}
    if request.shape.device_type == "cuda":
        amounts["nvidia.com/gpu"] = request.gpus_per_node
    if efa_devices(request, opts):
        amounts["vpc.amazonaws.com/efa"] = efa_devices(request, opts)
    amounts.update(opts.extra_resources)
    return {"limits": dict(amounts), "requests": dict(amounts)} if amounts else {}


def environment(request: LaunchRequest, opts: KubeflowOptions) -> list[dict]:
    """FI_* (with EFA), NCCL_* (on GPUs), the node name for the record, then launcher.env."""
    values: dict = {"PYTHONUNBUFFERED": "1", RANKS_PER_HOST_ENV: str(request.gpus_per_node)}
    values[FR_BUFFER_ENV] = str(FR_BUFFER_DEFAULT)  # launcher.env may set another size
    if opts.results_url:  # the deadline's dumps must be pushed before the launcher's last pull
        values[FR_LEAD_ENV] = f"{opts.sync_interval_s + FR_DEADLINE_LEAD_S:g}"
    values.update(communication_env(request.shape, efa=efa_devices(request, opts) > 0))
    values.update(restart_env(opts.max_failures))
    values.update({str(k): str(v) for k, v in opts.env.items()})
    env = [{"name": key, "value": value} for key, value in values.items()]
    # The Kubernetes node each rank ran on, for the record's env.hostnames (fsdp_core.metrics.node_name).
    env.append({"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    return env


def volume_mounts(opts: KubeflowOptions) -> list[dict]:
    mounts = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "launch", "mountPath": LAUNCH_MOUNT, "readOnly": True},
    ]
    if opts.results_url:
        return [*mounts, {"name": "results", "mountPath": SCRATCH}]
    return [*mounts, {"name": "results", "mountPath": opts.results_mount}]


def volumes(request: LaunchRequest, opts: KubeflowOptions) -> list[dict]:
    """/dev/shm in memory (NCCL and data loaders need more than the container default of 64 MiB)."""
    shm = {"medium": "Memory", **({"sizeLimit": opts.shm_size} if opts.shm_size else {})}
    results = (
        {"persistentVolumeClaim": {"claimName": opts.results_pvc}}
        if opts.results_pvc and not opts.results_url
        else {"emptyDir": {}}
    )
    return [
        {"name": "dshm", "emptyDir": shm},
        {"name": "launch", "configMap": {"name": f"{job_name(request)}-launch"}},
        {"name": "results", **results},
    ]


def crd_schema(crd: dict, version: str = "v1") -> dict:
    """The CRD's openAPIV3Schema made strict: unknown fields are errors, as `kubectl --validate=strict` says."""
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return _strict(copy.deepcopy(entry["schema"]["openAPIV3Schema"]))


def _strict(schema: dict) -> dict:
    """additionalProperties: false on every object schema that lists properties, unless it
    preserves unknown fields; int-or-string fields accept both (their anyOf says so)."""
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in schema:
        schema.pop("type", None)
        schema["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    for child in schema.get("properties", {}).values():
        _strict(child)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            _strict(schema[key])
    for key in ("anyOf", "allOf", "oneOf"):
        for child in schema.get(key, []):
            _strict(child)
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        schema.setdefault("additionalProperties", False)
    return schema


def validate_pytorchjob(manifest: dict, schema: dict) -> list[str]:
    """Every problem of a rendered PyTorchJob: CRD schema errors (strict) plus the operator's rules."""
    import jsonschema

    validator = jsonschema.Draft7Validator(schema)
    problems = [
        f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.absolute_path)))
    ]
    return problems + operator_rules(manifest)


def operator_rules(manifest: dict) -> list[str]:
    """What the training operator's webhook checks beyond the schema (release-1.9)."""
    problems = []
    name = manifest.get("metadata", {}).get("name", "")
    if not _DNS1035.match(name) or len(name) > 63:
        problems.append(f"metadata.name: '{name}' is not a DNS-1035 label")
    for rtype, replica in manifest.get("spec", {}).get("pytorchReplicaSpecs", {}).items():
        containers = replica.get("template", {}).get("spec", {}).get("containers", [])
        if not any(c.get("name") == CONTAINER for c in containers):
            problems.append(f"spec.pytorchReplicaSpecs.{rtype}: no container named '{CONTAINER}'")
        if rtype not in ("Master", "Worker"):
            problems.append(f"spec.pytorchReplicaSpecs.{rtype}: replica type must be Master or Worker")
    return problems
