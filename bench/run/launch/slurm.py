"""`launcher=slurm`: each launch becomes one Slurm job.

`sbatch --parsable` (an argument list) submits a batch script that runs `srun` with one task
per node; each task starts a torchrun agent, and the agents meet through c10d rendezvous at
the first node of the allocation, with the job id as rendezvous id. The job's output goes to
`<work_dir>/slurm-<jobid>.log`; the script writes srun's exit status to `<work_dir>/exit_code`
because without slurmdbd there is no `sacct` to ask afterwards. Waiting uses `squeue`; the
point deadline (PointWatch) starts once the job runs, so time spent queued never counts as
a hang. A timeout or Ctrl-C cancels the job (`scancel`).

Paths (results_dir, the launch file) must be visible at the same path on every node: a
shared filesystem, or `container_mounts` that put it there inside a pyxis container.
"""

from __future__ import annotations

import math
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pydantic import Field

from bench.run.launch.base import STARTUP_GRACE_S, LaunchOutcome, LaunchRequest, PointWatch, forget_job, note_job
from bench.run.launch.cluster_env import communication_env, uses_efa
from bench.run.launch.options import ConfiguredLauncher, LauncherOptions
from bench.run.launch.torchrun import restart_env, torchrun_args
from bench.schema.protocol import FR_BUFFER_DEFAULT, FR_BUFFER_ENV, LAUNCHED_AT_ENV, QUEUED_S_ENV, RANKS_PER_HOST_ENV

# Job states after which nothing of the job runs any more (squeue --states=all shows them
# for MinJobAge seconds, 300 by default; after that the job id is unknown, which means the same).
TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "SPECIAL_EXIT",
    "REVOKED",
}
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESV_DEL_HOLD", "CONFIGURING"}
# Consecutive squeue failures (controller restarting, network blip) tolerated before giving up.
MAX_SQUEUE_ERRORS = 60
_HEAD = "__FSDP_BENCH_HEAD__"
_JOB_ID = "__FSDP_BENCH_JOB_ID__"


class SlurmOptions(LauncherOptions):
    """Fields of sweeps/launcher/slurm.yaml (documented there and in docs/configuration.md)."""

    partition: str | None = None
    account: str | None = None
    time_limit: str | int | None = None
    exclusive: bool = True
    request_gpus: bool = True
    cpus_per_task: int | None = None
    container_image: str | None = None
    container_mounts: list | str | None = None
    extra_sbatch_args: list = Field(default_factory=list)
    extra_srun_args: list = Field(default_factory=list)
    python: str | None = None
    workdir: str | None = None
    env: dict = Field(default_factory=dict)
    ranks_per_host: int = 0
    rdzv_port: int = 29500
    queue_timeout_s: float = 0.0
    startup_grace_s: float = 300.0
    poll_s: float = 2.0
    max_failures: int = 0  # torchrun restarts in each node's agent; > 0 also --requeue (a lost node)


class SlurmLauncher(ConfiguredLauncher):
    name = "slurm"
    options_class = SlurmOptions

    def check_available(self, spec) -> None:
        from bench.config.problems import ConfigError

        for tool in ("sbatch", "squeue", "scancel", "scontrol"):
            if shutil.which(tool) is None:
                raise ConfigError(
                    [
                        f"launcher: slurm needs {tool} on PATH (install the Slurm client, e.g. "
                        "`apt-get install slurm-client`, and run where the cluster's slurm.conf is reachable; "
                        "scripts/slurm_local.sh starts a one-host test cluster)"
                    ]
                )
        reason = controller_unreachable()
        if reason:
            raise ConfigError(
                [f"launcher: slurm cannot reach a Slurm controller ({reason}); set SLURM_CONF or run on a login node"]
            )

    def launch(self, request: LaunchRequest) -> LaunchOutcome:
        script = request.work_dir / "job.sbatch"
        script.write_text(batch_script(request, self.opts, submitted_at=time.time()))  # sbatch follows at once
        submitted = subprocess.run(sbatch_command(request, self.opts, script), capture_output=True, text=True)
        if submitted.returncode != 0:
            log = request.work_dir / "sbatch.log"
            log.write_text(submitted.stdout + submitted.stderr)
            return LaunchOutcome(returncode=submitted.returncode, detail="sbatch failed", log_files=[log])
        job_id = submitted.stdout.strip().split(";")[0]  # --parsable: "<id>" or "<id>;<cluster>"
        log = request.work_dir / f"slurm-{job_id}.log"
        try:
            note_job(request.work_dir, self.name, job_id, self.options)  # found again if this process dies
            (request.work_dir / "job_id").write_text(job_id + "\n")
            outcome = self._wait(job_id, request, log)
        except KeyboardInterrupt:
            cancel(job_id)
            outcome = LaunchOutcome(returncode=None, interrupted=True, detail="interrupted", log_files=[log])
        except BaseException:  # e.g. a full results disk: never leave the job running
            cancel(job_id)
            raise
        forget_job(request.work_dir)
        return outcome

    def job_running(self, job_id: str) -> bool:
        state, _ = job_state(job_id, None)
        return state is not None and state not in TERMINAL

    def stop_job(self, job_id: str) -> None:
        cancel(job_id)

    def _wait(self, job_id: str, request: LaunchRequest, log: Path) -> LaunchOutcome:
        """Poll squeue until the job ends, enforcing the queue and per-point deadlines."""
        watch, submitted, errors, state = None, time.time(), 0, None
        while True:
            state, error = job_state(job_id, state)
            errors = errors + 1 if error else 0
            if errors > MAX_SQUEUE_ERRORS:
                cancel(job_id)
                return LaunchOutcome(returncode=None, detail=f"squeue failed: {error}", log_files=[log])
            if state is None or state in TERMINAL:
                return finished(job_id, state, request, log)
            if watch is None and state not in QUEUED:
                watch = PointWatch(request, self.opts.startup_grace_s)  # the job runs: the clock starts
            if watch is not None and watch.expired():
                cancel(job_id)
                return LaunchOutcome(returncode=None, timed_out=True, detail=watch.describe_timeout(), log_files=[log])
            waited = time.time() - submitted
            if watch is None and self.opts.queue_timeout_s and waited > self.opts.queue_timeout_s:
                cancel(job_id)
                detail = (
                    f"slurm job {job_id} still queued after launcher.queue_timeout_s={self.opts.queue_timeout_s:g} s"
                )
                return LaunchOutcome(returncode=None, timed_out=True, detail=detail, log_files=[log])
            time.sleep(self.opts.poll_s)


def controller_unreachable() -> str | None:
    """None when `scontrol ping` reaches a controller, else its last error line."""
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scontrol ping: {exc}"
    if out.returncode == 0:
        return None
    lines = (out.stderr + out.stdout).strip().splitlines() or [f"exit code {out.returncode}"]
    return f"scontrol ping: {lines[-1].strip()}"


def job_state(job_id: str, last: str | None) -> tuple[str | None, str | None]:
    """(state, error): the job's state from squeue, None once Slurm has forgotten it.

    On a transient squeue failure the last known state comes back with the error message.
    """
    try:
        out = subprocess.run(
            ["squeue", "--noheader", "--jobs", job_id, "--states", "all", "--format", "%T"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return last or "UNKNOWN", str(exc)
    if out.returncode == 0:
        lines = out.stdout.split()
        return (lines[0] if lines else None), None
    if "invalid job id" in out.stderr.lower():
        return None, None
    return last or "UNKNOWN", (out.stderr.strip().splitlines() or ["squeue failed"])[-1]


def finished(job_id: str, state: str | None, request: LaunchRequest, log: Path) -> LaunchOutcome:
    """Outcome of an ended job: srun's exit status as written by the batch script, else the job state."""
    code_file = request.work_dir / "exit_code"
    code = code_file.read_text().strip() if code_file.exists() else ""
    returncode = int(code) if code.lstrip("-").isdigit() else (0 if state == "COMPLETED" else 1)
    timed_out = state in ("TIMEOUT", "DEADLINE")
    detail = "" if state in (None, "COMPLETED") else f"slurm job {job_id} ended in state {state}"
    if timed_out:
        detail = f"slurm job {job_id} hit its time limit (launcher.time_limit)"
    return LaunchOutcome(returncode=returncode, timed_out=timed_out, detail=detail, log_files=[log])


def cancel(job_id: str, wait_s: float = 60.0) -> None:
    """scancel the job and wait (bounded) until none of its processes run any more."""
    subprocess.run(["scancel", job_id], capture_output=True, timeout=60)
    deadline, state = time.time() + wait_s, None
    while time.time() < deadline:
        state, _ = job_state(job_id, state)
        if state is None or state in TERMINAL:
            return
        time.sleep(0.5)


def sbatch_command(request: LaunchRequest, opts: SlurmOptions, script: Path) -> list[str]:
    """`sbatch --parsable ...` as an argument list; the batch script comes last."""
    spec = request.shape
    cmd = ["sbatch", "--parsable", "--job-name", f"fsdp-bench-{spec.point_id}"]
    cmd += ["--nodes", str(request.nodes), "--ntasks-per-node", "1"]
    cmd += ["--output", str(request.work_dir.resolve() / "slurm-%j.log")]
    cmd += ["--chdir", opts.workdir or str(Path.cwd())]
    cmd += ["--time", str(time_limit(request, opts))]
    if opts.partition:
        cmd += ["--partition", opts.partition]
    if opts.account:
        cmd += ["--account", opts.account]
    if opts.exclusive:
        cmd.append("--exclusive")
    if opts.request_gpus and spec.device_type == "cuda":
        cmd += ["--gpus-per-node", str(request.gpus_per_node)]
    if opts.cpus_per_task:
        cmd += ["--cpus-per-task", str(opts.cpus_per_task)]
    # Said either way, never left to the cluster's JobRequeue default: with restarts, a job that lost a
    # node is requeued and its ranks resume the interrupted point from its checkpoint; without, a
    # failed point stays failed rather than running the whole launch file again behind our back.
    cmd.append("--requeue" if opts.max_failures > 0 else "--no-requeue")
    return cmd + [str(a) for a in opts.extra_sbatch_args] + [str(script.resolve())]


def time_limit(request: LaunchRequest, opts: SlurmOptions) -> str | int:
    """launcher.time_limit, else minutes enough for start-up plus every point's timeout, once per attempt
    (1 + launcher.max_failures)."""
    if opts.time_limit is not None:
        return opts.time_limit
    seconds = (sum(t + STARTUP_GRACE_S for t in request.timeouts_s) + opts.startup_grace_s) * (1 + opts.max_failures)
    return math.ceil(seconds / 60)


def batch_script(request: LaunchRequest, opts: SlurmOptions, submitted_at: float | None = None) -> str:
    """The job's script: thread sizing, environment, then one srun step of torchrun agents.

    `submitted_at` (epoch seconds, written just before sbatch): the job's queueing, from it to the
    script's start, is exported to the ranks as the record's `metrics.job.queued_s`."""
    ranks_per_host = opts.ranks_per_host or request.gpus_per_node
    threads = request.shape.train.threads_per_rank
    # The same NCCL/EFA settings as the Kubeflow pods (bench/run/launch/cluster_env.py), then launcher.env.
    env = {
        **communication_env(request.shape, efa=uses_efa(request.shape)),
        **restart_env(opts.max_failures),
        **opts.env,
    }
    exports = "".join(f"export {key}={shlex.quote(str(value))}\n" for key, value in env.items())
    exit_file = shlex.quote(str(request.work_dir.resolve() / "exit_code"))
    return f"""#!/bin/bash
# Written by fsdp-bench (bench/run/launch/slurm.py): one torchrun agent per node, c10d rendezvous at the first node.
set -uo pipefail
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
# Ranks sharing one host (several slurmd may run on one machine): each rank's CPU thread share.
ranks_per_host={ranks_per_host}
threads={threads}
[ "$threads" -gt 0 ] || threads=$(( $(nproc) / ranks_per_host ))
[ "$threads" -ge 1 ] || threads=1
export {RANKS_PER_HOST_ENV}=$ranks_per_host OMP_NUM_THREADS=$threads PYTHONUNBUFFERED=1
export {FR_BUFFER_ENV}=${{{FR_BUFFER_ENV}:-{FR_BUFFER_DEFAULT}}}
# The whole job's wall starts here, as the job runs (its queueing is not in it).
export {LAUNCHED_AT_ENV}=$(date +%s.%N)
{_queued_line(submitted_at)}{exports}{srun_line(request, opts)}
rc=$?
echo "$rc" > {exit_file}
exit "$rc"
"""


def _queued_line(submitted_at: float | None) -> str:
    """The export of the time queued: from the submission to the job running (after a requeue: from the
    first submission), not in the wall."""
    if submitted_at is None:
        return ""
    since = f'awk -v now="${LAUNCHED_AT_ENV}" \'BEGIN {{ printf "%.3f", now - {submitted_at!r} }}\''
    return f"export {QUEUED_S_ENV}=$({since})\n"


def srun_line(request: LaunchRequest, opts: SlurmOptions) -> str:
    """`srun ... torchrun ...`, shell-quoted, with the head node and job id expanded by the script."""
    srun = ["srun", "--nodes", str(request.nodes), "--ntasks-per-node", "1", "--kill-on-bad-exit=1"]
    srun += ["--cpus-per-task", str(opts.cpus_per_task) if opts.cpus_per_task else "__CPUS__"]
    if opts.container_image:
        srun += ["--container-image", opts.container_image, "--container-workdir", opts.workdir or str(Path.cwd())]
        mounts = opts.container_mounts
        if mounts:
            srun += ["--container-mounts", mounts if isinstance(mounts, str) else ",".join(map(str, mounts))]
    srun += [str(a) for a in opts.extra_srun_args]
    python = opts.python or sys.executable
    agent = torchrun_args(
        python,
        request.nodes,
        request.gpus_per_node,
        _HEAD,
        _JOB_ID,
        str(request.launch_file.resolve()),
        opts.max_failures,
    )
    line = " ".join(shlex.quote(word) for word in srun + agent)
    # Expanded per job: the allocation's first node, the job id, and the CPUs each node gave the job.
    line = line.replace(_HEAD, f'"$head_node":{opts.rdzv_port}').replace(_JOB_ID, '"$SLURM_JOB_ID"')
    return line.replace("__CPUS__", '"$SLURM_CPUS_ON_NODE"')
