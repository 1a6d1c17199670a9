"""`launcher=ray`: a launch runs through Ray Train's TorchTrainer on a Ray cluster.

Workers = nodes x gpus_per_node (one GPU each on CUDA points). `launcher.address` names an
existing cluster; without it the driver starts a local Ray on this host, with loopback as the
node address so the torch rendezvous works on a host without a routable interface. The driver
is a subprocess (bench/run/launch/ray_job.py) in its own session: a timeout or Ctrl-C stops it and
the local cluster it started, and it gets SIGTERM when this process dies, however it dies
(fsdp_core/lifeline.py): Ray then ends the job's workers, and a local cluster goes with its driver. On a multi-node Ray cluster, results_dir must be a filesystem
every node mounts at the same path (rank 0 writes result.json there).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pydantic import Field

from bench.run.launch.base import LaunchOutcome, LaunchRequest, PointWatch, kill_process_group
from bench.run.launch.checkpoint_dir import checkpoint_problems
from bench.run.launch.options import ConfiguredLauncher, LauncherOptions
from bench.schema.protocol import collective_timeout_s
from bench.schema.spec import RunSpec
from fsdp_core.lifeline import dies_with_this_process

POLL_S = 0.5
# Seconds a stopped driver gets to shut Ray down (its SIGTERM handler) before SIGKILL.
SHUTDOWN_GRACE_S = 15.0


class RayOptions(LauncherOptions):
    """Fields of sweeps/launcher/ray.yaml (documented there and in docs/configuration.md)."""

    address: str | None = None
    node_ip_address: str = "127.0.0.1"
    num_cpus: int | None = None
    cpus_per_worker: float = 1.0
    runtime_env: dict = Field(default_factory=dict)
    storage_path: str | None = None
    startup_grace_s: float = 300.0
    max_failures: int = 0  # Ray Train's FailureConfig(max_failures)


class RayLauncher(ConfiguredLauncher):
    name = "ray"
    options_class = RayOptions

    def runs_here(self, spec: RunSpec) -> bool:
        """A local Ray (no address) runs its workers on this machine."""
        return self.opts.address is None

    def check_available(self, spec) -> None:
        from bench.config.problems import ConfigError

        if importlib.util.find_spec("ray") is None:
            raise ConfigError(["launcher: ray needs Ray Train, which is not installed: pip install 'fsdp-bench[ray]'"])
        if self.opts.max_failures < 0:  # Ray reads -1 as "retry forever"
            raise ConfigError([f"launcher.max_failures: must be >= 0, got {self.opts.max_failures}"])

    def point_problems(self, spec, results_dir: Path) -> list[str]:
        """The checkpoint folder, as the driver's host sees it (a multi-node cluster shares it)."""
        return checkpoint_problems(spec, results_dir)

    def launch(self, request: LaunchRequest) -> LaunchOutcome:
        job_file = request.work_dir / "ray_job.json"
        job_file.write_text(json.dumps(ray_job(request, self.opts), indent=2))
        log = request.work_dir / "ray_driver.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(log, "wb") as handle:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.run.launch.ray_job", str(job_file)],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=dies_with_this_process(signal.SIGTERM),
            )
        try:
            return wait_driver(proc, PointWatch(request, self.opts.startup_grace_s), log)
        except KeyboardInterrupt:
            stop_session(proc)
            return LaunchOutcome(returncode=None, interrupted=True, detail="interrupted", log_files=[log])
        except BaseException:  # anything else ends the launch too: stop the driver, then say why
            stop_session(proc)
            raise


def wait_driver(proc: subprocess.Popen, watch: PointWatch, log: Path) -> LaunchOutcome:
    """Wait for the driver to exit, stopping it (and its local cluster) at the point deadline."""
    while proc.poll() is None:
        if watch.expired():
            stop_session(proc)
            return LaunchOutcome(returncode=None, timed_out=True, detail=watch.describe_timeout(), log_files=[log])
        time.sleep(POLL_S)
    stop_session(proc)  # Ray processes the driver left behind
    return LaunchOutcome(returncode=proc.returncode, log_files=[log])


def stop_session(proc: subprocess.Popen) -> None:
    """Stop the driver, then every process of its session.

    A local Ray puts each worker in a process group of its own, but all of them stay in the
    driver's session (it was started with start_new_session): SIGTERM them, then SIGKILL.
    """
    kill_process_group(proc, grace_s=SHUTDOWN_GRACE_S)
    for sig, wait_s in ((signal.SIGTERM, SHUTDOWN_GRACE_S), (signal.SIGKILL, 2.0)):
        members = session_members(proc.pid)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.time() + wait_s
        while members and time.time() < deadline:
            time.sleep(0.2)
            members = session_members(proc.pid)
        if not members:
            return


def session_members(sid: int) -> list[int]:
    """Pids of the live processes in session `sid` (Linux /proc; elsewhere none are found)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After "pid (comm)": state, ppid, pgrp, session, ...
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # Zombies (state Z) are dead already: only their parent can reap them.
        if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def ray_job(request: LaunchRequest, opts: RayOptions) -> dict:
    """What the driver needs: where to run, how many workers, which process-group backend."""
    spec = request.shape
    workers = request.nodes * request.gpus_per_node
    backend = "gloo"
    if spec.device_type == "cuda":
        # As fsdp_core.worker.init_distributed: CPU offload keeps some collectives on the host.
        backend = "cpu:gloo,cuda:nccl" if spec.train.cpu_offload else "nccl"
    num_cpus = opts.num_cpus or max(os.cpu_count() or 1, math.ceil(workers * opts.cpus_per_worker) + 1)
    return {
        "launch_file": str(request.launch_file.resolve()),
        "address": opts.address,
        "node_ip_address": opts.node_ip_address,
        "num_cpus": num_cpus,
        "num_workers": workers,
        "use_gpu": spec.device_type == "cuda",
        "cpus_per_worker": opts.cpus_per_worker,
        "threads_per_rank": spec.train.threads_per_rank,
        "backend": backend,
        # The process group's timeout: the slowest point's timeout plus the same margin as the other
        # launchers, so the launcher's watch ends a hang first and records it as `timeout`.
        "timeout_s": int(collective_timeout_s(max(request.timeouts_s))),
        "runtime_env": opts.runtime_env,
        "storage_path": str(Path(opts.storage_path or request.work_dir / "ray").resolve()),
        "max_failures": opts.max_failures,
        "name": request.work_dir.name,
    }
