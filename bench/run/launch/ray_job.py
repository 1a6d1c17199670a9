"""The Ray driver of one launch: `python -m bench.run.launch.ray_job RAY_JOB.json` (started by RayLauncher).

Connects to a Ray cluster (or starts a local one), then runs the launch through Ray Train's
TorchTrainer: nodes x gpus_per_node workers, each calling `fsdp_core.worker.run_launch` on the
launch inside the process group Ray set up. Rank 0 writes each point's result.json exactly as
under torchrun. A separate process so that the bench parent never imports Ray, and so that a
timeout or Ctrl-C can stop the driver and the local Ray cluster it started as one process group.

Checkpoints (train.checkpoint) are also reported through Ray Train's checkpoint API: after each
durable save, rank 0 reports a pointer checkpoint (a small folder naming the DCP step folder, Ray's
recommended form for a checkpoint already in shared storage) and the other workers report none, the
same number of times. When Ray restarts the workers after a failure (launcher.max_failures > 0),
`ray.train.get_checkpoint()` hands the latest pointer back and the point resumes from that step
folder (Ray's restore path); points that had finished keep their records and are not run again.

Exit code 0 when the run finished, 1 when it failed (the failing rank's reason is in its
errors/rank<R>.json; the driver's own reason is its last `error:` line).
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
import tempfile
from pathlib import Path

from bench.schema.protocol import FR_BUFFER_DEFAULT, FR_BUFFER_ENV, RANKS_PER_HOST_ENV, RESULT_FILE

POINTER_FILE = "fsdp_bench_checkpoint.json"  # inside a reported Ray checkpoint: which DCP step folder it is


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
    start_ray(ray, job)
    try:
        print(f"fsdp-bench ray: node ip {ray.util.get_node_ip_address()}, {job['num_workers']} workers", flush=True)
        trainer = TorchTrainer(
            train_loop,
            train_loop_config=absolute_paths(json.loads(Path(job["launch_file"]).read_text())),
            torch_config=TorchConfig(backend=job["backend"], timeout_s=job["timeout_s"]),
            scaling_config=ScalingConfig(
                num_workers=job["num_workers"],
                use_gpu=job["use_gpu"],
                resources_per_worker={"CPU": job["cpus_per_worker"]},
            ),
            # max_failures=0 (the default): a failed point stays failed (a retry would time a different run);
            # above 0, Ray restarts the workers and a checkpointed point resumes from its last checkpoint.
            run_config=RunConfig(
                name=job["name"],
                storage_path=job["storage_path"],
                failure_config=FailureConfig(max_failures=job.get("max_failures", 0)),
            ),
        )
        result = trainer.fit()
        if result.checkpoint is not None:
            print(f"fsdp-bench ray: latest reported checkpoint {result.checkpoint.path}", flush=True)
    except Exception as exc:  # noqa: BLE001 - any failure ends the launch with its one-line reason
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"error: Ray Train run failed: {type(exc).__name__}: {first}", flush=True)
        return 1
    finally:
        ray.shutdown()
    print("fsdp-bench ray: run finished", flush=True)
    return 0


def train_loop(launch: dict) -> None:
    """Each Ray Train worker: report checkpoints to Ray, then run the points that have no record yet."""
    from fsdp_core import checkpoint
    from fsdp_core.worker import run_launch

    checkpoint.set_listener(RayCheckpointReporter())
    # After a restart (max_failures > 0), points that finished before the failure keep their records.
    pending = [p for p in launch["points"] if not (Path(p["point_dir"]) / RESULT_FILE).exists()]
    run_launch({**launch, "points": pending})


class RayCheckpointReporter:
    """fsdp_core.checkpoint's listener under Ray Train: durable checkpoints go to `ray.train.report`."""

    def on_durable(self, step: int, location: str, point_id: str) -> None:
        import ray.train

        # Every worker reports (Ray synchronizes reports across workers); rank 0 attaches the pointer.
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if ray.train.get_context().get_world_rank() == 0:
                pointer = {"point_id": point_id, "step": step, "location": location}
                (Path(folder) / POINTER_FILE).write_text(json.dumps(pointer))
                checkpoint = ray.train.Checkpoint.from_directory(folder)
            ray.train.report(
                {"point_id": point_id, "checkpoint_step": step},
                checkpoint=checkpoint,
                checkpoint_dir_name=f"{point_id}-step-{step:08d}",
            )

    def restore_location(self, point_id: str) -> str | None:
        """The step folder of Ray's latest checkpoint for this point, when Ray restored the run."""
        import ray.train

        checkpoint = ray.train.get_checkpoint()
        if checkpoint is None:
            return None
        with checkpoint.as_directory() as folder:
            pointer = json.loads((Path(folder) / POINTER_FILE).read_text())
        return pointer["location"] if pointer["point_id"] == point_id else None


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
    os.environ.setdefault(FR_BUFFER_ENV, str(FR_BUFFER_DEFAULT))
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
