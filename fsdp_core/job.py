"""A point's whole-job clock on one rank: its phases, its steps and saves, its attempts, and the kills.

The worker marks the phases of a point (its start, the end of initialization, the end of the
restore); the loop tells the clock when each step starts and ends and when the step's hook (the
checkpointer) is done. A step's time runs from the end of the previous step's hook to the end of the
step, so the marks are contiguous and the whole job adds up (bench/schema/job_accounting.py).

Attempts. When the launcher may restart the ranks (launcher.max_failures > 0), every rank journals
its attempt in the point's job folder at every save (its marks, its steps' times, its own losses),
and the restarted ranks read the journals: the point's attempt number (rank 0 counts the attempts
journaled before, broadcast), the losses of the steps that survived (the record holds every step
once), and rank 0 the earlier attempts' time. Without restarts nothing is written.

Kills (debug.kill_steps, debug.kill_mtbf_s) are SIGKILL of the rank's own process at the start of a
step, before its forward: no error file, no clean shutdown, as when a node is lost. The killing rank
first notes when and where (kill<A>.json) so that the accounting can split the lost time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from dataclasses import asdict
from pathlib import Path

import psutil
import torch
import torch.distributed as dist

from bench.schema.files import write_json_atomic
from bench.schema.job import JobMetrics
from bench.schema.job_accounting import (
    INIT_DONE,
    LOOP_END,
    POINT_START,
    PROCESS_START,
    PROFILE_END,
    PROFILE_START,
    RESTORE_DONE,
    AttemptLog,
    KillNote,
    account,
    attempt_file,
    attempts_journaled,
    kill_file,
    surviving_losses,
)
from bench.schema.protocol import JOB_DIR, LAUNCHED_AT_ENV, QUEUED_S_ENV
from bench.schema.spec import RunSpec
from fsdp_core.lifeline import check_owned

# When this process's first point started, against the launch's start: the launch's start-up, which
# the first point's record holds and every later point's record repeats (docs/reliability.md).
_LAUNCH: dict[str, float] = {}


def process_started_at() -> float:
    """When this process started, on `time.time()`'s clock (the clock of every other mark and of the
    kills). psutil's create_time adds the start's ticks to the boot time, a whole second that drifts
    from the wall clock as NTP steers it (a restart could then seem to begin before the kill that
    caused it: docs/reliability.md); the process's age subtracted from now does not drift. Linux's /proc gives the age;
    elsewhere psutil's time stands."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        started_ticks = int(fields[19])  # starttime, field 22 of proc(5): ticks after boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return psutil.Process().create_time()
    return time.time() - age


class JobClock:
    """One rank's clock of one attempt at a point (see the module docstring)."""

    def __init__(self, spec: RunSpec, point_dir: Path, max_failures: int, started: float) -> None:
        now = started  # the point's start in the worker (before its process group, on the first point)
        self.spec, self.rank, self.world = spec, dist.get_rank(), dist.get_world_size()
        self.job_dir = Path(point_dir) / JOB_DIR
        self.max_failures = max_failures
        self.journal = max_failures > 0
        self.attempt = self._agreed_attempt() if self.journal else 0
        launched_at = _float_env(LAUNCHED_AT_ENV)
        process_start = process_started_at()
        first_in_process = "started" not in _LAUNCH
        _LAUNCH["started"] = now
        wall_start = None
        if self.attempt == 0:
            # The launch's first point holds the launch's start-up; a later point starts at its own start.
            wall_start = (launched_at if launched_at is not None else process_start) if first_in_process else now
            if first_in_process:
                _LAUNCH["startup_s"] = now - wall_start
        elif first_in_process:
            # A restarted process: the launch's start-up is what its first attempt journaled.
            first = self._earlier_logs(self.rank)[:1]
            if first and first[0].launch_startup_s is not None:
                _LAUNCH["startup_s"] = first[0].launch_startup_s
        self.log = AttemptLog(self.attempt, self.rank, 0, wall_start=wall_start)
        self.log.launch_startup_s = _LAUNCH.get("startup_s")
        self.log.marks.update({PROCESS_START: process_start, POINT_START: now})
        self._last = now
        self._pending: list[tuple[int, torch.Tensor]] = []  # losses not yet journaled
        kill = spec.debug
        self.kill_rank = kill.kill_rank if kill.kill_rank is not None else self.world - 1
        self._kill_after_s = self._mtbf_draw() if kill.kill_mtbf_s is not None else None
        self._first_step_at: float | None = None
        if self.journal:
            self.job_dir.mkdir(parents=True, exist_ok=True)
            self._write()  # the attempt counts from its start, even if it dies before its first save

    def _agreed_attempt(self) -> int:
        """This attempt's number at the point: the attempts rank 0 journaled before, on every rank."""
        box = [attempts_journaled(self.job_dir.parent) if self.rank == 0 else 0]
        dist.broadcast_object_list(box, src=0)
        return int(box[0])

    def _mtbf_draw(self) -> float | None:
        """Seconds after this attempt's first step at which kill_rank dies: the attempt-th draw of the seed's
        exponential sequence, while restarts are left (more kills than restarts would never finish)."""
        if self.attempt >= self.max_failures:
            return None
        draws = random.Random(self.spec.debug.kill_seed)
        values = [draws.expovariate(1.0 / self.spec.debug.kill_mtbf_s) for _ in range(self.attempt + 1)]
        return values[-1]

    # -- the worker's marks --

    def initialized(self) -> None:
        self._mark(INIT_DONE)

    def restored(self, start_step: int) -> None:
        self.log.start_step = start_step
        self._mark(RESTORE_DONE)

    def _mark(self, name: str) -> None:
        self._last = self.log.marks[name] = time.time()
        if self.journal:  # an attempt may die before its first save: its phases are journaled as they end
            self._write()

    # -- the loop's --

    def before_step(self, step: int) -> None:
        """At the start of a step, before its forward: an injected kill fires here."""
        if self._first_step_at is None:
            self._first_step_at = time.time()
        if self.rank != self.kill_rank:
            return
        steps = self.spec.debug.kill_steps or []
        due = self.attempt < len(steps) and steps[self.attempt] == step
        if self._kill_after_s is not None and time.time() - self._first_step_at >= self._kill_after_s:
            due = True
        if due:
            self._kill(step)

    def _kill(self, step: int) -> None:
        note = KillNote(self.attempt, step, self.rank, time.time())
        self.job_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(kill_file(self.job_dir, self.attempt), asdict(note))
        os.kill(os.getpid(), signal.SIGKILL)

    def step_done(self, step: int, loss: torch.Tensor) -> None:
        now = time.time()
        self.log.steps.append((step, now - self._last))
        self._last = now
        if self.journal:
            self._pending.append((step, loss))

    def hook_done(self, step: int) -> None:
        """After the step's hook: a save's time is its own; at a save, the journal is written (its time
        counted with the save's; in an earlier attempt's journal, the write itself falls after
        `journaled_at`, with the lost progress)."""
        now = time.time()
        if not self.spec.train.saves_after(step):
            # No save: the hook's few microseconds belong to the step.
            if self.log.steps:
                last_step, seconds = self.log.steps[-1]
                self.log.steps[-1] = (last_step, seconds + now - self._last)
            self._last = now
            return
        if self.journal:
            # The losses since the last save, read now: the save has synchronised the device already.
            self.log.losses.update({s: float(t) for s, t in self._pending})
            self._pending.clear()
            self.log.saves[step] = time.time() - self._last
            self.log.journaled_at = self._last + self.log.saves[step]
            self._write()
            now = time.time()
        self.log.saves[step] = now - self._last
        self._last = now

    def profiled(self, started: float, ended: float) -> None:
        """The profiled steps ran from `started` to `ended` (time.time()): their own bucket, after the loop."""
        self.log.marks[PROFILE_START], self.log.marks[PROFILE_END] = started, ended

    def loop_ended(self) -> None:
        """The steps are over: what follows the last step's hook (the window's close included) is finalization."""
        self.log.marks[LOOP_END] = self._last

    def _write(self) -> None:
        check_owned()  # as every rank's write: never for a launch another fsdp-bench owns now
        write_json_atomic(attempt_file(self.job_dir, self.attempt, self.rank), self.log.to_json())

    # -- after the loop --

    def full_losses(self, losses: list[float]) -> list[float]:
        """This rank's losses of every step: the earlier attempts' surviving ones, then this attempt's."""
        if self.log.start_step == 0 or not self.journal:
            return losses
        earlier = surviving_losses(self._earlier_logs(self.rank), self.log.start_step)
        return losses if earlier is None else earlier + losses

    def _earlier_logs(self, rank: int) -> list[AttemptLog]:
        logs = []
        for attempt in range(self.attempt):
            path = attempt_file(self.job_dir, attempt, rank)
            if path.exists():
                logs.append(AttemptLog.from_json(json.loads(path.read_text())))
        return logs

    def section(self) -> JobMetrics:
        """metrics.job as of now (rank 0 calls it just before writing the record)."""
        kills = {}
        for attempt in range(self.attempt):
            path = kill_file(self.job_dir, attempt)
            if path.exists():
                kills[attempt] = KillNote(**json.loads(path.read_text()))
        logs = [*self._earlier_logs(0), self.log] if self.journal else [self.log]
        return account(
            logs,
            kills,
            time.time(),
            self.spec.train.warmup_steps,
            queued_s=_float_env(QUEUED_S_ENV),
            launch_startup_s=self.log.launch_startup_s,
        )


def _float_env(name: str) -> float | None:
    value = os.environ.get(name)
    try:
        return float(value) if value else None
    except ValueError:
        return None
