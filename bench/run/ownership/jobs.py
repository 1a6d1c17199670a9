"""Cluster jobs a launch started, named in its launch folder, so a dead parent's job is found again.

A Slurm job or a PyTorchJob runs on the cluster, not under fsdp-bench: when the fsdp-bench that
submitted it dies (SIGKILL, a lost login node), the job runs on. Each cluster launcher therefore
writes `<launch folder>/job.json` (JOB_FILE: launcher, job id, the launcher's options, the launch's
owner token) the moment the job exists and removes it once it has seen the job end. Whoever takes
the sweep folder's lock next (`sweep`, `run`, `preflight`: bench/run/ownership/locks.py) finds the job files
left behind and, by `sweep.orphans`, cancels those jobs (`cancel`, the default) or waits for them
(`wait`: their ranks keep writing, because the new holder adopts their token); `fsdp-bench cancel
RESULTS` cancels them too. Each launcher knows how to ask about and stop its own jobs
(`Launcher.job_running`, `Launcher.stop_job`).

Ray launches need no job file: the Ray driver is a process on this machine that dies with
fsdp-bench (bench/run/launch/ray.py), and Ray ends a job's workers when its driver exits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.run.launch.base import forget_job
from bench.schema.protocol import JOB_FILE, LAUNCH_FILE, LAUNCHES_DIR, LaunchFile

WAIT_POLL_S = 5.0


class JobWontStop(RuntimeError):
    """A job an earlier holder left that still runs after it was cancelled (one line naming it)."""


@dataclass(frozen=True)
class ClusterJob:
    launcher: str
    job_id: str
    options: dict
    launch_dir: Path
    owner: str | None = None  # the owner token in the job's launch file

    def __str__(self) -> str:
        return f"{self.launcher} job {self.job_id} ({self.launch_dir})"

    def handler(self):
        """The launcher that knows how to ask about and stop this job."""
        from bench.run.launch import get_launcher

        return get_launcher(self.launcher, self.options)

    def running(self) -> bool:
        return self.handler().job_running(self.job_id)

    def stop(self) -> bool:
        """Stop the job; True once it no longer runs (its job file is then removed)."""
        self.handler().stop_job(self.job_id)
        if self.running():
            return False
        forget_job(self.launch_dir)
        return True


def left_jobs(sweep_dir: Path) -> list[ClusterJob]:
    """Jobs named in the sweep folder's launch folders (files only: nobody asks the cluster yet)."""
    jobs = []
    for path in sorted(Path(sweep_dir).glob(f"{LAUNCHES_DIR}/*/{JOB_FILE}")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        try:
            owner = LaunchFile.read(path.parent / LAUNCH_FILE).owner
        except (OSError, ValueError, KeyError, TypeError):
            owner = None
        jobs.append(
            ClusterJob(
                data.get("launcher", ""), str(data.get("job_id", "")), data.get("options") or {}, path.parent, owner
            )
        )
    return jobs


def adoptable_tokens(sweep_dir: Path) -> list[str]:
    """Owner tokens of the jobs left in a sweep folder: the ones a holder that waits for them adopts."""
    return sorted({job.owner for job in left_jobs(sweep_dir) if job.owner})


def settle_left_jobs(sweep_dir: Path, policy: str, previous: dict, say: Callable[[str], None]) -> None:
    """Cancel (or wait for) the cluster jobs an earlier holder of the sweep folder left running.

    Called while holding the folder's lock, so no live fsdp-bench owns these jobs any more.
    """
    who = f"pid {previous.get('pid')} on {previous.get('host')}" if previous.get("pid") else "an earlier fsdp-bench"
    for job in left_jobs(sweep_dir):
        if not job.running():
            forget_job(job.launch_dir)
            continue
        if policy == "wait":
            say(f"waiting for {job}, left running by an fsdp-bench that is gone ({who}); sweep.orphans=wait")
            while job.running():
                time.sleep(WAIT_POLL_S)
            forget_job(job.launch_dir)
            say(f"{job} ended; its records count")
        elif job.stop():
            say(
                f"cancelled {job}, left running by an fsdp-bench that is gone ({who}); sweep.orphans=wait waits instead"
            )
        else:
            raise JobWontStop(f"{job} still runs after cancelling it; stop it by hand, then rerun")
