"""The one small interface every launcher implements, and what they share.

A launch runs one or more points that share a world shape (nodes x gpus_per_node) inside a
single job: torchrun agents here, a Slurm job, a PyTorchJob or a Ray job. The worker marks
each point `started` and writes its result.json; `PointWatch` turns those marks into the
per-point deadline every launcher enforces.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from bench.config.paths import output_problem
from bench.schema.files import write_json_atomic
from bench.schema.protocol import JOB_FILE, PREFLIGHT_MEASUREMENTS, RESULT_FILE, STARTED_MARK
from bench.schema.spec import RunSpec

# Time allowed before the first point starts: interpreter, torch import, rendezvous.
STARTUP_GRACE_S = 120.0


@dataclass
class LaunchRequest:
    """What to run: the points (all of one world shape), where their records go, the launch file,
    and a preflight to run before them (its spec, its folder), if any."""

    points: list[RunSpec]
    point_dirs: list[Path]
    launch_file: Path
    work_dir: Path
    preflight: tuple[RunSpec, Path] | None = None

    @property
    def shape(self) -> RunSpec:
        """The spec that stands for the launch's world shape, cluster and launcher options."""
        return self.points[0] if self.points else self.preflight[0]

    @property
    def nodes(self) -> int:
        return self.shape.nodes

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpus_per_node

    @property
    def item_dirs(self) -> list[Path]:
        """Every folder the launch writes into: the preflight's, then the points'."""
        return ([self.preflight[1]] if self.preflight else []) + list(self.point_dirs)

    @property
    def timeouts_s(self) -> list[float]:
        """Each item's timeout, in running order: the preflight first, then the points."""
        items = ([self.preflight[0]] if self.preflight else []) + list(self.points)
        return [spec.sweep.point_timeout_s for spec in items]


@dataclass
class LaunchOutcome:
    returncode: int | None
    timed_out: bool = False
    interrupted: bool = False
    detail: str = ""
    log_files: list[Path] = field(default_factory=list)
    # True when the launcher only wrote its job files (kubeflow with launcher.apply=false): nothing ran,
    # so no record is written; `log_files` then lists the rendered files.
    rendered: bool = False


class Launcher(ABC):
    name: str = ""

    def __init__(self, options: dict | None = None) -> None:
        # The `launcher` config group's fields (partition, image, namespace, ...), `name` included.
        self.options = dict(options or {})

    def check_available(self, spec: RunSpec) -> None:
        """Raise ConfigError (one line, with an install hint) if this launcher cannot work here."""

    def runs_here(self, spec: RunSpec) -> bool:
        """Whether the ranks run on this machine (and so must hold its host lock: bench/run/ownership/locks.py)."""
        return False

    def check_point(self, spec: RunSpec, results_dir: Path | None = None) -> list[str]:
        """Problems of one point that only this host can see before launch: the results folder
        (`results_dir`: every launcher writes its launch folder and the point's folder there; the
        point's default checkpoint folder is there too), then what only this launcher checks
        (`point_problems`). One line each, naming the config key (bench/config/paths.py's wording).

        Kept out of RunSpec validation on purpose: a stored record must stay readable after its
        token file is deleted or when it is read on a machine without GPUs.
        """
        results_dir = Path(results_dir or "results")
        problem = output_problem("results_dir", results_dir, "folder")
        if problem:
            return [problem]
        return restart_problems(spec, self.max_failures) + self.point_problems(spec, results_dir)

    def point_problems(self, spec: RunSpec, results_dir: Path) -> list[str]:
        """What only this launcher can see before launch (files, devices here)."""
        return []

    @property
    def max_failures(self) -> int:
        """launcher.max_failures: restarts after a failure (0 for a launcher without options)."""
        return getattr(getattr(self, "opts", None), "max_failures", 0)

    @abstractmethod
    def launch(self, request: LaunchRequest) -> LaunchOutcome:
        """Run the request's points to completion, failure, timeout or interruption."""

    # A cluster job outlives a parent that dies; the launchers that submit one name it in the launch
    # folder (bench/run/ownership/jobs.py) and answer these two, so a rerun or `fsdp-bench cancel` can stop it.
    def job_running(self, job_id: str) -> bool:
        """Whether a job this launcher submitted (in an earlier process) still runs."""
        return False

    def stop_job(self, job_id: str) -> None:
        """Stop a job this launcher submitted (in an earlier process); returns once it has ended."""


def restart_problems(spec: RunSpec, max_failures: int) -> list[str]:
    """launcher.max_failures against the point's kills: a negative count, or kills the restarts cannot
    outlast (the point could never finish)."""
    if max_failures < 0:
        return [f"launcher.max_failures: must be >= 0, got {max_failures}"]
    kills = len(spec.debug.kill_steps or [])
    if kills > max_failures:
        return [f"debug.kill_steps: {kills} kill(s) need launcher.max_failures >= {kills} restarts, got {max_failures}"]
    if spec.debug.kill_mtbf_s is not None and max_failures == 0:
        return ["debug.kill_mtbf_s: kills need restarts; allowed: launcher.max_failures >= 1"]
    return []


class PointWatch:
    """Deadline of the point currently running inside a launch, from the worker's marks."""

    def __init__(self, request: LaunchRequest, startup_grace_s: float = STARTUP_GRACE_S) -> None:
        self.request = request
        self.launched_at = time.time()
        self.startup_grace_s = startup_grace_s

    def _items(self) -> list[tuple[RunSpec, Path, str]]:
        """(spec, folder, the file that marks it done) of the preflight, if any, then every point."""
        items = [(spec, d, RESULT_FILE) for spec, d in zip(self.request.points, self.request.point_dirs)]
        if self.request.preflight:
            spec, directory = self.request.preflight
            items.insert(0, (spec, directory, PREFLIGHT_MEASUREMENTS))
        return items

    def current(self) -> tuple[RunSpec, Path] | None:
        for spec, point_dir, done in self._items():
            if not (point_dir / done).exists():
                return spec, point_dir
        return None

    def deadline(self) -> float:
        """Wall-clock time by which the running point must finish."""
        current = self.current()
        previous = [d / done for _, d, done in self._items() if (d / done).exists()]
        since = max((p.stat().st_mtime for p in previous), default=self.launched_at)
        if current is None:
            # Every point is done: the ranks shut down (process groups, the job's end) within the
            # start-up grace of the last result, not of the launch: a launch longer than the grace
            # must not be cancelled as it ends.
            return since + self.startup_grace_s
        spec, point_dir = current
        mark = point_dir / STARTED_MARK
        if mark.exists():
            return mark.stat().st_mtime + spec.sweep.point_timeout_s
        # Not started yet: the previous item's finish (or the launch) plus start-up and the timeout.
        return since + self.startup_grace_s + spec.sweep.point_timeout_s

    def expired(self) -> bool:
        return time.time() > self.deadline()

    def describe_timeout(self) -> str:
        current = self.current()
        limit = current[0].sweep.point_timeout_s if current else self.startup_grace_s
        return f"no result within sweep.point_timeout_s={limit:g} s (the point hung or ran too slowly)"


def kill_process_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the process's whole group (it was started in a new session), then SIGKILL stragglers."""
    if proc.poll() is not None and not _group_alive(proc.pid):
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline and _group_alive(proc.pid):
            proc.poll()
            time.sleep(0.1)
        if not _group_alive(proc.pid):
            break
    proc.poll()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# A cluster launcher names the job it started in its launch folder (JOB_FILE) the moment the job
# exists and removes the file once it has seen the job end, so that the next holder of the sweep
# folder finds a job a dead fsdp-bench left running (bench/run/ownership/jobs.py settles them).
def note_job(work_dir: Path, launcher: str, job_id: str, options: dict) -> None:
    """Name the cluster job a launch just started, in its launch folder."""
    write_json_atomic(Path(work_dir) / JOB_FILE, {"launcher": launcher, "job_id": job_id, "options": options})


def forget_job(work_dir: Path) -> None:
    """The launch's job has ended (or was stopped): nothing is left to find."""
    with contextlib.suppress(FileNotFoundError):
        (Path(work_dir) / JOB_FILE).unlink()
