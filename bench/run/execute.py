"""Run points through a launcher and turn every outcome into a stored record.

A launch carries all pending points of one world shape. If it dies part-way, the point that
was running gets a failure record (oom, failed, timeout or interrupted, with a one-line
reason from the failing rank) and the points after it are launched again: one failing point
never costs the others their results. With launcher.max_failures = N the launcher itself restarts
the ranks up to N times inside the launch (they resume the point: fsdp_core/job.py), so a failure
record means the restarts were spent; it says how many attempts were made (`metrics.job.attempts`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from bench.analysis.hang import verdict as hang_verdict
from bench.analysis.preflight import collect as collect_preflight
from bench.analysis.records import read_record, write_record
from bench.config.registry import peak_table
from bench.config.version import git_info, harness_version
from bench.run.launch import LaunchOutcome, LaunchRequest
from bench.run.launch.base import Launcher
from bench.run.ownership.storage import STORAGE_ERRNOS
from bench.schema.env import EnvInfo
from bench.schema.job import JobMetrics
from bench.schema.job_accounting import attempts_journaled
from bench.schema.preflight import PreflightResult
from bench.schema.protocol import (
    FLIGHT_RECORDER_DIR,
    JOB_DIR,
    LAUNCH_FILE,
    LAUNCHES_DIR,
    PREFLIGHT_MEASUREMENTS,
    PREFLIGHT_RECORD,
    RESULT_FILE,
    STARTED_MARK,
    TELEMETRY_SIDECARS,
    Conditions,
    LaunchFile,
    LaunchPoint,
    PreflightTask,
    RankError,
    error_files,
    memory_snapshots,
    point_dir,
    read_errors,
    trace_files,
)
from bench.schema.recipes import PRECISIONS
from bench.schema.record import Metrics, RunResult, model_info, recipe_of
from bench.schema.spec import RunSpec

# Messages a rank prints when a *peer* died: never the root cause of a failure.
_SECONDARY = (
    "connection closed by peer",
    "connection reset",
    "broken pipe",
    "socket",
    "timed out",
    "nccl communicator was aborted",
)


class Interrupted(Exception):
    """Raised after the running point was recorded as interrupted (SIGINT, SIGTERM or SIGHUP)."""


def launch_file(
    specs: list[RunSpec],
    dirs: list[Path],
    preflight: PreflightTask | None = None,
    conditions: dict | None = None,
    owner: str | None = None,
    max_failures: int = 0,
) -> LaunchFile:
    """What the ranks read: resolved specs with their recipes, every device's peaks, which harness
    launched them, a preflight to run first, what the parent knows of the measurement's conditions,
    and the sweep lock's token of the parent that owns the launch (fsdp_core/lifeline.py)."""
    points = []
    for spec, directory in zip(specs, dirs):
        recipe = PRECISIONS[spec.precision]
        points.append(
            LaunchPoint(
                point_id=spec.point_id,
                point_dir=str(directory),
                log_dir=str(directory),
                spec=spec,
                recipe=recipe_of(spec),
                mfu_peak_dtype=recipe.mfu_peak_dtype,
                fp8_peak_dtype=recipe.peak_dtype if recipe.peak_dtype != recipe.mfu_peak_dtype else None,
            )
        )
    git = git_info()
    return LaunchFile(
        points=points, peak_table=peak_table(), git=git, harness=harness_version(git), preflight=preflight,
        conditions=Conditions(**(conditions or {})), owner=owner, max_failures=max_failures,
    )  # fmt: skip


def prepare_launch(
    specs: list[RunSpec],
    results_dir: Path,
    preflight: PreflightTask | None = None,
    conditions: dict | None = None,
    owner: str | None = None,
    max_failures: int = 0,
) -> LaunchRequest:
    """Clear stale files of the points (and the preflight), write the launch file, return the request."""
    dirs = [point_dir(results_dir, spec) for spec in specs]
    stale_names = (RESULT_FILE, STARTED_MARK, PREFLIGHT_MEASUREMENTS, PREFLIGHT_RECORD)
    for directory in [*dirs, *([Path(preflight.point_dir)] if preflight else [])]:
        directory.mkdir(parents=True, exist_ok=True)
        stale_files = (*(directory / name for name in (*stale_names, *TELEMETRY_SIDECARS)), *error_files(directory))
        for stale in (*stale_files, *trace_files(directory), *memory_snapshots(directory)):
            stale.unlink(missing_ok=True)
        shutil.rmtree(directory / JOB_DIR, ignore_errors=True)  # an earlier launch's attempts
        shutil.rmtree(directory / FLIGHT_RECORDER_DIR, ignore_errors=True)  # a stale dump gives a wrong verdict
    shape = specs[0] if specs else preflight.spec
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    label = specs[0].point_id if specs else f"preflight-{shape.nodes}x{shape.gpus_per_node}"
    work_dir = Path(results_dir) / shape.sweep.name / LAUNCHES_DIR / f"{stamp}-{label}"
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / LAUNCH_FILE
    launch_file(specs, dirs, preflight, conditions, owner, max_failures).write(path)
    preflight_item = (preflight.spec, Path(preflight.point_dir)) if preflight else None
    return LaunchRequest(points=specs, point_dirs=dirs, launch_file=path, work_dir=work_dir, preflight=preflight_item)


def run_group(
    specs: list[RunSpec],
    launcher: Launcher,
    results_dir: Path,
    on_record: Callable[[RunResult], None] | None = None,
    on_rendered: Callable[[list[Path]], None] | None = None,
    preflight: PreflightTask | None = None,
    on_preflight: Callable[[PreflightResult], None] | None = None,
    conditions: dict | None = None,
    owner: str | None = None,
) -> list[RunResult]:
    """Run points of one world shape, relaunching after a failed point; one record per point.

    A `preflight` runs first, inside the first launch; its record goes to `on_preflight`. If it
    fails, the points run anyway, in a launch of their own. A launcher that only renders job files
    (kubeflow, launcher.apply=false) yields no records: `on_rendered` gets the files and the points
    stay unrun (nothing fake is stored). `owner` is the sweep lock's token (bench/run/ownership/locks.py): ranks
    write only while the lock names it. A results disk that is full or read-only raises its OSError
    (bench/run/ownership/storage.py): the point stays unrecorded, for a rerun once there is room.
    """
    records: dict[str, RunResult] = {}
    pending = list(specs)
    while pending or preflight:
        request = prepare_launch(pending, results_dir, preflight, conditions, owner, launcher.max_failures)
        started = dt.datetime.now(dt.timezone.utc)
        outcome = launcher.launch(request)
        if outcome.rendered:
            if on_rendered:
                on_rendered(outcome.log_files)
            break
        preflight_ok = True
        if preflight:
            raise_storage_error(Path(preflight.point_dir))
            status, reason = classify(Path(preflight.point_dir), outcome)
            result = collect_preflight(preflight, status, reason)
            preflight_ok, preflight = result.status == "ok", None
            if on_preflight:
                on_preflight(result)
        if preflight_ok:  # a failed preflight ended the launch before any point started
            for record in launch_records(request, outcome, started):
                records[record.point_id] = record
                if on_record:
                    on_record(record)
        if outcome.interrupted:
            raise Interrupted(next(reversed(records), ""))
        pending = [s for s in pending if s.point_id not in records]
    return [records[s.point_id] for s in specs if s.point_id in records]


def collect_launch(request: LaunchRequest, outcome: LaunchOutcome, started: dt.datetime) -> list[RunResult]:
    """Records of a finished launch: every point with a result, plus the first point without one.

    The first unfinished point is the one the launch died on (or before): it gets the failure
    record. Points after it never ran; they stay pending for the next launch, so every launch
    settles at least one point and the loop always ends.
    """
    return list(launch_records(request, outcome, started))


def launch_records(request: LaunchRequest, outcome: LaunchOutcome, started: dt.datetime) -> Iterator[RunResult]:
    """collect_launch's records one by one: those found before a storage error are still reported."""
    env = launched_by(request)
    for spec, directory in zip(request.points, request.point_dirs):
        result_path = directory / RESULT_FILE
        if result_path.exists():
            try:
                yield read_record(result_path)
                continue
            except ValueError as exc:
                yield _failure(spec, directory, "failed", f"invalid record written: {exc}", started, outcome, env)
                continue
        raise_storage_error(directory)
        status, reason = classify(directory, outcome)
        yield _failure(spec, directory, status, reason, started, outcome, env)
        break


def raise_storage_error(directory: Path) -> None:
    """A rank that could not write for want of disk (full, read-only, over quota) failed for the
    storage, not the point: raise its error rather than record the point as failed."""
    for error in read_errors(directory):
        if error.errno in STORAGE_ERRNOS:
            raise OSError(error.errno, os.strerror(error.errno), error.filename or str(directory))


def launched_by(request: LaunchRequest) -> EnvInfo:
    """A failure record's environment: the harness and commit that launched it (from its launch file)."""
    try:
        launch = LaunchFile.read(request.launch_file)
    except (OSError, ValueError, KeyError, TypeError):
        return EnvInfo()
    return EnvInfo(harness=launch.harness, git_sha=launch.git.sha, git_dirty=launch.git.dirty)


def classify(directory: Path, outcome: LaunchOutcome) -> tuple[str, str]:
    """(status, one-line reason) of a point that started but left no result."""
    errors = [asdict(e) for e in read_errors(directory)]
    if outcome.interrupted:
        return "interrupted", "interrupted by a signal (SIGINT, SIGTERM or SIGHUP); rerun the sweep to continue"
    if outcome.returncode == 0 and not errors:
        return "failed", "the launch ended without writing this point's result"
    if outcome.timed_out and not errors:
        return "timeout", outcome.detail or "no result within the point timeout"
    if any(e.get("oom") for e in errors):
        first = next(e for e in errors if e.get("oom"))
        return "oom", RankError(**first).oom_reason()
    primary = [e for e in errors if not any(s in e["message"].lower() for s in _SECONDARY)]
    killed = killed_ranks(outcome.log_files)
    if not primary and killed:
        rank, name = killed[0]
        hint = " (the host's out-of-memory killer, or an external kill)" if name == "SIGKILL" else ""
        status = "timeout" if outcome.timed_out else "failed"
        return status, f"rank {rank}: killed by {name}{hint}; its peers then lost their connection"
    primary = primary or errors
    if primary:
        return ("timeout" if outcome.timed_out else "failed"), f"rank {primary[0]['rank']}: {primary[0]['message']}"
    return ("timeout" if outcome.timed_out else "failed"), _launch_reason(outcome)


# torchrun's failure summary: "rank : 1 (local_rank: 0)" then "exitcode : -9 (pid: 1234)".
_TORCHRUN_EXIT = re.compile(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-\d+)")


def killed_ranks(log_files: list[Path]) -> list[tuple[int, str]]:
    """(rank, signal name) of every rank torchrun reports as killed by a signal, from the agents' logs."""
    killed = []
    for log in log_files:
        if log.exists():
            for rank, code in _TORCHRUN_EXIT.findall(log.read_text(errors="replace")):
                try:
                    killed.append((int(rank), signal.Signals(-int(code)).name))
                except ValueError:
                    continue
    return sorted(set(killed))


def _launch_reason(outcome: LaunchOutcome) -> str:
    """A one-line reason from the launch's logs when no rank left one."""
    for log in outcome.log_files:
        if log.exists():
            lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
            errors = [ln for ln in lines if "Error" in ln or "error:" in ln]
            if errors:
                return errors[-1][:300]
    if outcome.timed_out:
        return "launch timed out before the point started"
    return outcome.detail or f"launch exited with code {outcome.returncode} and left no reason"


def _failure(
    spec: RunSpec,
    directory: Path,
    status: str,
    reason: str,
    started: dt.datetime,
    outcome: LaunchOutcome,
    env: EnvInfo,
) -> RunResult:
    finished = dt.datetime.now(dt.timezone.utc)
    wall = (finished - started).total_seconds()
    attempts = attempts_journaled(directory)
    hang = hang_verdict(directory) if status == "timeout" else None
    if hang is not None and hang.summary:  # the culprit first: the line `run` prints and the report shows
        reason = f"{hang.summary}; {reason}"
    # Restarts journal each attempt: the failure record says how many were made (no bucket is known).
    job = JobMetrics(wall_s=wall, attempts=attempts, unattributed_s=wall) if attempts else None
    record = RunResult(
        point_id=spec.point_id,
        sweep=spec.sweep.name,
        status=status,
        error=reason.splitlines()[0][:500],
        started_at=started.isoformat(timespec="seconds"),
        finished_at=finished.isoformat(timespec="seconds"),
        wall_s=wall,
        spec=spec,
        recipe=recipe_of(spec),
        model_info=model_info(spec),
        metrics=Metrics(job=job),
        env=env,
        hang=hang,
        log_dir=str(outcome.log_files[0].parent) if outcome.log_files else str(directory),
    )
    write_record(record, directory / RESULT_FILE)
    return record
