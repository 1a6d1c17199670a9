"""`launcher=local`: torchrun agents on this host.

`nodes=N` starts N torchrun agents (each with gpus_per_node ranks) that meet through c10d
rendezvous on 127.0.0.1 at a free port: multi-node in miniature, for real. Each agent runs
in its own session so a timeout or Ctrl-C kills every rank it started, and gets SIGTERM when
this process dies, however it dies (fsdp_core/lifeline.py): torchrun then stops its ranks, which
also die with their agent. Nothing a local launch starts outlives fsdp-bench.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.config.paths import input_problem
from bench.run.launch.base import LaunchOutcome, LaunchRequest, PointWatch, kill_process_group
from bench.run.launch.checkpoint_dir import checkpoint_problems
from bench.run.launch.options import ConfiguredLauncher, LauncherOptions
from bench.run.launch.ports import free_port
from bench.run.launch.torchrun import restart_env, torchrun_args
from bench.schema.protocol import FR_BUFFER_DEFAULT, FR_BUFFER_ENV, LAUNCHED_AT_ENV, RANKS_PER_HOST_ENV
from bench.schema.spec import RunSpec
from fsdp_core.lifeline import dies_with_this_process

POLL_S = 0.25


def token_file_problems(spec: RunSpec) -> list[str]:
    data, seq_len = spec.train.data, spec.train.seq_len
    path = Path(data)
    hint = "allowed: synthetic, or the path of a token file"
    if problem := input_problem("train.data", path, "file", what="token file", hint=hint):
        return [problem]
    itemsize = 4 if data.endswith(".u32") else 2  # the worker's memmap dtype (fsdp_core/data.py)
    if path.stat().st_size // itemsize <= seq_len:
        return [f"train.data: {data} holds fewer than train.seq_len + 1 = {seq_len + 1} tokens"]
    return []


def visible_gpus() -> list[str]:
    """The CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries (indices or UUIDs)."""
    import torch  # lazily: only CUDA points on the local launcher pay for it

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def cuda_problems(spec: RunSpec, available: int) -> list[str]:
    """Every "node" of a local launch runs on this host, so the whole world needs a GPU each."""
    if available == 0:
        return [f"cluster: {spec.cluster.name} needs CUDA GPUs and this host has none; allowed here: cluster=local-cpu"]
    if spec.world_size > available:
        return [
            f"nodes x gpus_per_node: {spec.nodes} x {spec.gpus_per_node} = {spec.world_size} ranks need a GPU each "
            f"and this host has {available}; allowed here: nodes x gpus_per_node <= {available}"
        ]
    return []


def agent_gpus(nodes: int, gpus_per_node: int, visible: list[str]) -> list[str]:
    """CUDA_VISIBLE_DEVICES of each local torchrun agent: agent i gets GPUs i*g .. (i+1)*g - 1.

    Every agent numbers its local ranks from 0 and each rank takes GPU LOCAL_RANK: without its
    own slice, agent 1's ranks would land on agent 0's GPUs (two ranks per GPU).
    """
    return [",".join(visible[i * gpus_per_node : (i + 1) * gpus_per_node]) for i in range(nodes)]


def torchrun_command(request: LaunchRequest, port: int, rdzv_id: str, max_restarts: int = 0) -> list[str]:
    """One agent's argument list (never a shell string: values cannot inject commands)."""
    args = torchrun_args(
        sys.executable,
        request.nodes,
        request.gpus_per_node,
        f"127.0.0.1:{port}",
        rdzv_id,
        str(request.launch_file),
        max_restarts,
    )
    at = args.index("-m", 3)  # before the worker module: local-only agent options
    # Advertise loopback: a host without a routable interface must still rendezvous; poll agents often.
    return [*args[:at], "--local-addr", "127.0.0.1", "--monitor-interval", "0.5", *args[at:]]


def rank_env(request: LaunchRequest) -> dict[str, str]:
    """Environment of every rank: how many ranks share this host (for thread sizing)."""
    env = dict(os.environ)
    ranks_here = request.nodes * request.gpus_per_node
    env[RANKS_PER_HOST_ENV] = str(ranks_here)
    env.setdefault(FR_BUFFER_ENV, str(FR_BUFFER_DEFAULT))  # named, so the record's env.env_vars shows it
    threads = request.shape.train.threads_per_rank or max(1, (os.cpu_count() or 1) // ranks_here)
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class LocalOptions(LauncherOptions):
    """Fields of sweeps/launcher/local.yaml."""

    max_failures: int = 0  # torchrun --max-restarts


class LocalLauncher(ConfiguredLauncher):
    name = "local"
    options_class = LocalOptions

    def runs_here(self, spec: RunSpec) -> bool:
        return True

    def point_problems(self, spec: RunSpec, results_dir: Path) -> list[str]:
        """The token file exists and is long enough; a CUDA point has CUDA GPUs on this host; the
        checkpoint folder is writable and, to resume, holds a complete checkpoint."""
        problems = []
        if spec.train.data != "synthetic":
            problems.extend(token_file_problems(spec))
        problems.extend(checkpoint_problems(spec, results_dir))
        if spec.device_type == "cuda":
            problems.extend(cuda_problems(spec, len(visible_gpus())))
        return problems

    def launch(self, request: LaunchRequest) -> LaunchOutcome:
        port, env = free_port(), rank_env(request)
        env.update(restart_env(self.max_failures))
        env[LAUNCHED_AT_ENV] = repr(time.time())  # the whole job's wall starts as the agents do
        rdzv_id = f"{request.launch_file.parent.name}-{port}"
        logs = [request.work_dir / f"agent{i}.log" for i in range(request.nodes)]
        gpus = agent_gpus(request.nodes, request.gpus_per_node, visible_gpus()) if self._cuda(request) else None
        procs = []
        try:
            for i, log in enumerate(logs):
                agent_env = env if gpus is None else {**env, "CUDA_VISIBLE_DEVICES": gpus[i]}
                with open(log, "wb") as handle:
                    procs.append(
                        subprocess.Popen(
                            torchrun_command(request, port, rdzv_id, self.max_failures),
                            stdout=handle,
                            stderr=subprocess.STDOUT,
                            env=agent_env,
                            start_new_session=True,
                            # SIGTERM, not SIGKILL: torchrun's handler then stops the ranks it started.
                            preexec_fn=dies_with_this_process(signal.SIGTERM),
                        )
                    )
            return self._wait(procs, PointWatch(request), logs)
        except KeyboardInterrupt:
            for proc in procs:
                kill_process_group(proc)
            return LaunchOutcome(returncode=None, interrupted=True, detail="interrupted", log_files=logs)
        except BaseException:  # anything else ends the launch too: stop what it started, then say why
            for proc in procs:
                kill_process_group(proc)
            raise

    @staticmethod
    def _cuda(request: LaunchRequest) -> bool:
        return request.shape.device_type == "cuda"

    def _wait(self, procs: list[subprocess.Popen], watch: PointWatch, logs) -> LaunchOutcome:
        while True:
            codes = [proc.poll() for proc in procs]
            if all(code is not None for code in codes):
                for proc in procs:  # ranks left behind by an agent that died
                    kill_process_group(proc, grace_s=1.0)
                worst = max(codes, key=lambda c: c != 0)
                return LaunchOutcome(returncode=worst, log_files=logs)
            if any(code not in (None, 0) for code in codes):
                # One agent failed: give the others a moment to notice, then stop them.
                deadline = time.time() + 15
                while time.time() < deadline and any(proc.poll() is None for proc in procs):
                    time.sleep(POLL_S)
                for proc in procs:
                    kill_process_group(proc, grace_s=2.0)
                return LaunchOutcome(returncode=next(c for c in codes if c not in (None, 0)), log_files=logs)
            if watch.expired():
                for proc in procs:
                    kill_process_group(proc)
                return LaunchOutcome(returncode=None, timed_out=True, detail=watch.describe_timeout(), log_files=logs)
            time.sleep(POLL_S)
