"""The NCCL and EFA environment every cluster launcher gives its ranks (one table, so records from
Slurm and from Kubeflow were measured under the same communication settings).

Values follow AWS's EKS and Slurm distributed-training samples (aws-samples/awsome-distributed-training).
A launcher's `env` option overrides any of them.
"""

from __future__ import annotations

from bench.schema.spec import RunSpec

EFA_ENV = {
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",  # GPUDirect RDMA: p4d/p4de/p5 support it
    "FI_EFA_FORK_SAFE": "1",  # torch data loaders fork after libfabric initialised
}
NCCL_ENV = {
    "NCCL_DEBUG": "WARN",
    "NCCL_SOCKET_IFNAME": "^lo,docker",  # bootstrap over the node's network, never loopback
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",  # a dead peer fails the job instead of hanging it
}


def uses_efa(spec: RunSpec) -> bool:
    """A CUDA point on a cluster preset whose nodes have EFA devices."""
    return spec.device_type == "cuda" and spec.cluster.efa_devices > 0


def communication_env(spec: RunSpec, efa: bool) -> dict[str, str]:
    """FI_* where EFA is used, NCCL_* on GPUs; empty on CPU (gloo needs none of them)."""
    values: dict[str, str] = {}
    if efa:
        values.update(EFA_ENV)
    if spec.device_type == "cuda":
        values.update(NCCL_ENV)
    return values
