"""The Ray driver of one launch: `python -m bench.launch.ray_job RAY_JOB.json` (started by RayLauncher).

Connects to a Ray cluster (or starts a local one), then runs the launch through Ray Train's
TorchTrainer: nodes x gpus_per_node workers, each calling `fsdp_core.worker.run_launch` on the
launch inside the process group Ray set up. Rank 0 writes each point's result.json exactly as
under torchrun. A separate process so that the bench parent never imports Ray, and so that a
timeout or Ctrl-C can stop the driver and the local Ray cluster it started as one process group.

Exit code 0 when the run finished, 1 when it failed (the failing rank's reason is in its
errors/rank<R>.json; the driver's own reason is its last `error:` line).
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from pathlib import Path

from fsdp_core.protocol import RANKS_PER_HOST_ENV


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    if job["address"] is None:
        local_cluster_env(job)
    try:
        import ray
        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer
    except ImportError as exc:
        print(f"error: Ray Train is not installed ({exc}); pip install 'fsdp-bench[ray]'", flush=True)
        return 1
    from fsdp_core.worker import run_launch

    start_ray(ray, job)
    try:
        print(f"fsdp-bench ray: node ip {ray.util.get_node_ip_address()}, {job['num_workers']} workers", flush=True)
        trainer = TorchTrainer(
            run_launch,
            train_loop_config=absolute_paths(json.loads(Path(job["launch_file"]).read_text())),
            torch_config=TorchConfig(backend=job["backend"], timeout_s=job["timeout_s"]),
            scaling_config=ScalingConfig(
                num_workers=job["num_workers"],
                use_gpu=job["use_gpu"],
                resources_per_worker={"CPU": job["cpus_per_worker"]},
            ),
            # max_failures=0: a failed point must stay failed (a retry would time a different run).
            run_config=RunConfig(
                name=job["name"], storage_path=job["storage_path"], failure_config=FailureConfig(max_failures=0)
            ),
        )
        trainer.fit()
    except Exception as exc:  # noqa: BLE001 - any failure ends the launch with its one-line reason
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"error: Ray Train run failed: {type(exc).__name__}: {first}", flush=True)
        return 1
    finally:
        ray.shutdown()
    print("fsdp-bench ray: run finished", flush=True)
    return 0


def local_cluster_env(job: dict) -> None:
    """Environment of a local Ray cluster, set before `import ray` (its processes inherit it).

    Ray replaces a loopback `_node_ip_address` with the address of the primary interface
    (ray._private.services.resolve_ip_for_localhost), and that address becomes the
    MASTER_ADDR of the torch rendezvous (ray.train._internal.utils.get_address_and_port). On
    a host without a routable interface that address may be unusable. With
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, Ray's single-machine mode, the node address stays
    loopback (ray._private.services.get_node_ip_address). Every worker shares this host, so
    the CPU thread share is set as under the local launcher.
    """
    if is_loopback(job["node_ip_address"]):
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    workers = job["num_workers"]
    os.environ[RANKS_PER_HOST_ENV] = str(workers)
    threads = job["threads_per_rank"] or max(1, (os.cpu_count() or 1) // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)


def is_loopback(address: str | None) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address or "").is_loopback
    except ValueError:
        return False


def start_ray(ray, job: dict) -> None:
    """Connect to `address`, or start a local Ray without the dashboard (nothing to serve here)."""
    kwargs = {"runtime_env": job["runtime_env"] or None, "log_to_driver": True}
    if job["address"] is not None:
        ray.init(address=job["address"], **kwargs)
        return
    ray.init(
        num_cpus=job["num_cpus"],
        include_dashboard=False,
        _node_ip_address=job["node_ip_address"],
        **kwargs,
    )


def absolute_paths(launch: dict) -> dict:
    """The launch with point directories made absolute: Ray workers need not share the driver's cwd."""
    for point in launch["points"]:
        for key in ("point_dir", "log_dir"):
            if point.get(key):
                point[key] = str(Path(point[key]).resolve())
    return launch


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
