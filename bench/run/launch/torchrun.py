"""The torchrun command a cluster launcher starts once per node (Slurm task, Kubeflow pod).

Every node's agent meets the others through c10d rendezvous at the first node's address; the
ranks then run `fsdp_core.worker` on the launch file. An argument list, never a shell string.
"""

from __future__ import annotations

# With restarts, each attempt's ranks get a store of their own (rank 0 serves it): by default they share
# the agent's rendezvous store, whose keys outlive an attempt, and a restarted rank can read a dead
# peer's address from it (the process group's connect is then refused).
RESTART_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def restart_env(max_restarts: int) -> dict[str, str]:
    """The agents' environment for `max_restarts` restarts (empty without)."""
    return dict(RESTART_ENV) if max_restarts > 0 else {}


def torchrun_args(
    python: str,
    nodes: int,
    gpus_per_node: int,
    endpoint: str,
    rdzv_id: str,
    launch_file: str,
    max_restarts: int = 0,
) -> list[str]:
    """One node's agent: `python -m torch.distributed.run ... -m fsdp_core.worker LAUNCH.json`.

    `max_restarts` is launcher.max_failures: after a rank fails, the agent stops the others and starts
    the ranks again (TORCHELASTIC_RESTART_COUNT tells them), up to that many times; the restarted ranks
    skip the launch's points that have a record and resume the interrupted one from its latest
    checkpoint (fsdp_core/job.py). 0: a point that fails stays failed."""
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
        "--max-restarts",
        str(max_restarts),
        "-m",
        "fsdp_core.worker",
        launch_file,
    ]
