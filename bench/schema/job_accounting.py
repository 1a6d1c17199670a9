"""A point's whole-job accounting from its attempts' journals: pure, torch-free (the ranks call it; tests too).

Each attempt at a point leaves, per rank, an `AttemptLog` (fsdp_core/job.py writes it at every save
when the launcher may restart the ranks, and keeps the last attempt's in memory): the wall-clock marks
of its phases, the duration of every step it ran (from the end of the previous step's hook to the end
of the step: a step's own share of the loop), the time each save held the loop, and the rank's own
losses. An attempt a failure ended may leave a `KillNote` (an injected kill says when and at which
step it fired; a real node loss says nothing).

The timeline of a point is contiguous, so the buckets and `unattributed_s` add up to the wall:

    wall start -> [program start-up] -> point start -> [initialization] -> [restore] -> steps and saves
    -> (a failure: [wasted progress] from the journal's last save to the failure, [recovery] from the
    failure to the next attempt's process start, [program start-up] to its point start, ...)
    -> the last step -> [finalization] -> the record
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from bench.schema.job import BUCKETS, JobMetrics
from bench.schema.protocol_names import JOB_DIR

# Marks of an attempt (seconds since the epoch, rank 0's clock). The profiled steps (profile.enabled)
# run after the loop's end, so their span is carved out of finalization.
PROCESS_START, POINT_START, INIT_DONE, RESTORE_DONE, LOOP_END, PROFILE_START, PROFILE_END = (
    "process_start", "point_start", "init_done", "restore_done", "loop_end", "profile_start", "profile_end",
)  # fmt: skip


def attempt_file(job_dir: Path, attempt: int, rank: int) -> Path:
    return Path(job_dir) / f"attempt{attempt}.rank{rank}.json"


def kill_file(job_dir: Path, attempt: int) -> Path:
    return Path(job_dir) / f"kill{attempt}.json"


def attempts_journaled(point_dir: Path) -> int:
    """How many attempts at a point rank 0 journaled (each journals its start: launcher.max_failures > 0)."""
    return len(list((Path(point_dir) / JOB_DIR).glob("attempt*.rank0.json")))


@dataclass
class AttemptLog:
    """What one rank journals of one attempt (the JSON of attempt<A>.rank<R>.json)."""

    attempt: int
    rank: int
    start_step: int
    marks: dict[str, float] = field(default_factory=dict)
    steps: list[tuple[int, float]] = field(default_factory=list)  # (step, seconds), in running order
    saves: dict[int, float] = field(default_factory=dict)  # step -> seconds the save after it held the loop
    losses: dict[int, float] = field(default_factory=dict)  # step -> this rank's loss
    journaled_at: float | None = None  # when the journal was last written (the end of a save)
    wall_start: float | None = None  # attempt 0: when the whole job's wall starts for this point
    launch_startup_s: float | None = None  # the launch's start-up, as this attempt's process knew it

    def to_json(self) -> dict:
        return {
            "attempt": self.attempt, "rank": self.rank, "start_step": self.start_step, "marks": self.marks,
            "steps": [list(s) for s in self.steps], "saves": {str(k): v for k, v in self.saves.items()},
            "losses": {str(k): v for k, v in self.losses.items()}, "journaled_at": self.journaled_at,
            "wall_start": self.wall_start, "launch_startup_s": self.launch_startup_s,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> AttemptLog:
        return cls(
            attempt=int(data["attempt"]),
            rank=int(data["rank"]),
            start_step=int(data["start_step"]),
            marks={k: float(v) for k, v in (data.get("marks") or {}).items()},
            steps=[(int(s), float(d)) for s, d in data.get("steps") or []],
            saves={int(k): float(v) for k, v in (data.get("saves") or {}).items()},
            losses={int(k): float(v) for k, v in (data.get("losses") or {}).items()},
            journaled_at=data.get("journaled_at"),
            wall_start=data.get("wall_start"),
            launch_startup_s=data.get("launch_startup_s"),
        )


@dataclass
class KillNote:
    """An injected kill (kill<A>.json): when it fired and before which step."""

    attempt: int
    step: int
    rank: int
    at: float


def surviving_losses(logs: list[AttemptLog], start_step: int) -> list[float] | None:
    """The losses of steps 0 .. start_step - 1 as the attempts that ran them last left them (a later
    attempt redoes what an earlier one lost); None when some step is in no journal (a run resumed
    from another run's checkpoint: its record holds its own steps only)."""
    losses: dict[int, float] = {}
    for log in sorted(logs, key=lambda entry: entry.attempt):
        losses.update(log.losses)
    if any(step not in losses for step in range(start_step)):
        return None
    return [losses[step] for step in range(start_step)]


def account(
    logs: list[AttemptLog],
    kills: dict[int, KillNote],
    end: float,
    warmup_steps: int,
    queued_s: float | None = None,
    launch_startup_s: float | None = None,
) -> JobMetrics:
    """metrics.job from rank 0's journals of every attempt (the last one complete, in running order)
    and the injected kills, with the record made at `end`."""
    logs = sorted(logs, key=lambda entry: entry.attempt)
    first, last = logs[0], logs[-1]
    wall_start = first.wall_start if first.wall_start is not None else first.marks[POINT_START]
    buckets = dict.fromkeys(BUCKETS, 0.0)
    surviving: list[tuple[float, bool]] = []  # (seconds, one of its attempt's first steps)
    redone = 0
    startup_count = max(1, warmup_steps)
    for index, log in enumerate(logs):
        marks = log.marks
        if index == 0:
            buckets["program_startup_s"] += marks[POINT_START] - wall_start
        else:
            previous = logs[index - 1]
            failed_at = failure_time(previous, kills.get(previous.attempt))
            buckets["recovery_s"] += marks[PROCESS_START] - failed_at
            buckets["program_startup_s"] += marks[POINT_START] - marks[PROCESS_START]
        # An attempt that failed before a phase ended has no mark for it: the phase ends at the failure.
        init_done = marks.get(INIT_DONE, last_mark(log))
        buckets["initialization_s"] += init_done - marks[POINT_START]
        buckets["restore_s"] += marks.get(RESTORE_DONE, init_done) - init_done
        # The steps whose result survived: all of the last attempt's, those before the step the next
        # attempt resumed at for the others.
        kept_below = logs[index + 1].start_step if log is not last else None
        for position, (step, seconds) in enumerate(log.steps):
            kept = kept_below is None or step < kept_below
            if kept:
                surviving.append((seconds, position < startup_count))
            else:
                buckets["wasted_progress_s"] += seconds
        for step, seconds in log.saves.items():
            kept = kept_below is None or step < kept_below
            buckets["checkpoint_save_s" if kept else "wasted_progress_s"] += seconds
        if log is not last:
            kill = kills.get(log.attempt)
            buckets["wasted_progress_s"] += failure_time(log, kill) - last_mark(log)
            ran_to = kill.step if kill is not None else max((s for s, _ in log.steps), default=-1) + 1
            redone += max(0, ran_to - kept_below)
    steady = [seconds for seconds, early in surviving if not early] or [seconds for seconds, _ in surviving]
    median = statistics.median(steady) if steady else 0.0
    for seconds, early in surviving:
        excess = max(0.0, seconds - median) if early else 0.0
        buckets["step_startup_s"] += excess
        buckets["productive_s"] += seconds - excess
    profiled = PROFILE_START in last.marks and PROFILE_END in last.marks
    buckets["profiling_s"] = last.marks[PROFILE_END] - last.marks[PROFILE_START] if profiled else None
    buckets["finalization_s"] = end - last.marks[LOOP_END] - (buckets["profiling_s"] or 0.0)
    wall = end - wall_start
    job = JobMetrics(
        wall_s=wall,
        queued_s=queued_s,
        attempts=len(logs),
        steps_redone=redone,
        launch_startup_s=launch_startup_s,
        **buckets,
    )
    job.unattributed_s = wall - job.bucket_sum()
    job.startup_s = job.program_startup_s + job.initialization_s + job.step_startup_s
    job.lost_s = job.wasted_progress_s + job.recovery_s
    job.job_goodput = job.productive_s / wall if wall > 0 else None
    return job


def last_mark(log: AttemptLog) -> float:
    """The last moment an attempt's journal accounts for: its last save, else its last phase's end."""
    if log.journaled_at is not None:
        return log.journaled_at
    return max(log.marks[name] for name in (POINT_START, INIT_DONE, RESTORE_DONE) if name in log.marks)


def failure_time(log: AttemptLog, kill: KillNote | None) -> float:
    """When an attempt ended: its injected kill, else (a real loss says nothing) its last journal."""
    return kill.at if kill is not None else last_mark(log)
