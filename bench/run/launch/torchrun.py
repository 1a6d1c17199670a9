"""The torchrun command a cluster launcher starts once per node (Slurm task, Kubeflow pod).

Every node's agent meets the others through c10d rendezvous at the first node's address; the
ranks then run `fsdp_core.worker` on the launch file. An argument list, never a shell string.
"""

from __future__ import annotations


def torchrun_args(
    python: str, nodes: int, gpus_per_node: int, endpoint: str, rdzv_id: str, launch_file: str
) -> list[str]:
    """One node's agent: `python -m torch.distributed.run ... -m fsdp_core.worker LAUNCH.json`."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(nodes),
        "--nproc-per-node",
        str(gpus_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        rdzv_id,
        # A benchmark point that fails must fail: restarting would time a different run.
        "--max-restarts",
        "0",
        "-m",
        "fsdp_core.worker",
        launch_file,
    ]
