"""Launches that stop writing once abandoned, cluster jobs a dead parent left, and the one line of a full disk (fsdp_core/lifeline.py, bench/run/ownership/jobs.py, bench/run/ownership/storage.py).

The tests that start processes (a child dying with its parent, a rank with its agent) are in
tests/e2e/test_lifeline_processes.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from bench.run.execute import raise_storage_error
from bench.run.launch.base import note_job
from bench.run.ownership import jobs
from bench.run.ownership import locks as locks_module
from bench.run.ownership.locks import MeasurementLocks
from bench.run.ownership.storage import storage_error_line
from bench.schema import protocol
from bench.schema.protocol import LAUNCH_FILE, OWNER_SILENT_S, SWEEP_LOCK, LaunchFile, RankError, sweep_dir_of
from fsdp_core.lifeline import abandoned

HOST = socket.gethostname()


def dead_pid() -> int:
    """A pid no process can have: above Linux's largest pid_max (2**22), so kill(pid, 0) finds none."""
    return 2**22 + 1


def write_holder(lock: Path, **holder) -> Path:
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps(holder))
    return lock


@pytest.mark.parametrize(
    ("holder", "reason"),
    [
        ({"pid": os.getpid(), "host": HOST, "token": "mine"}, None),
        ({"pid": os.getpid(), "host": HOST, "token": "rerun", "adopted": ["mine"]}, None),  # waited for
        ({"pid": "dead", "host": "elsewhere", "token": "mine"}, None),  # another host: the token decides
        ({}, None),  # released, or being written: no evidence
        ({"pid": os.getpid(), "host": HOST, "token": "rerun"}, "another fsdp-bench (pid {me} on {host}) owns"),
        (
            {"pid": "dead", "host": HOST, "token": "mine"},
            "the fsdp-bench that launched it (pid {dead} on {host}) is gone",
        ),
    ],
)
def test_a_launch_is_abandoned_only_on_evidence(tmp_path, holder, reason):
    gone = dead_pid()
    holder = {k: (gone if v == "dead" else v) for k, v in holder.items()}
    lock = write_holder(tmp_path / SWEEP_LOCK, **holder)
    got = abandoned("mine", lock)
    if reason is None:
        assert got is None
    else:
        assert got.startswith(reason.format(me=os.getpid(), host=HOST, dead=gone)), got
    assert abandoned("mine", tmp_path / "missing.lock") is None


def test_a_holder_on_another_host_is_gone_once_it_stops_touching_its_lock(tmp_path, monkeypatch):
    lock = write_holder(tmp_path / SWEEP_LOCK, pid=1, host="login1", token="mine")
    assert abandoned("mine", lock) is None
    stale = time.time() - OWNER_SILENT_S - 5
    os.utime(lock, (stale, stale))
    assert abandoned("mine", lock).startswith(
        f"the fsdp-bench that launched it (pid 1 on login1) has not touched {lock} for "
    )
    # The holder touches it while it holds it.
    monkeypatch.setattr(locks_module, "OWNER_HEARTBEAT_S", 0.01)
    with MeasurementLocks(tmp_path, runs_here=False, wait=False, concurrent=True):
        os.utime(lock, (stale, stale))
        deadline = time.monotonic() + 30
        while lock.stat().st_mtime == stale and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lock.stat().st_mtime > stale


@pytest.fixture
def owned_by_mine(tmp_path):
    """This process's writes bound to the launch owner `mine` of tmp_path/sweep (as run_launch binds
    a rank's); the binding is undone afterwards."""
    from fsdp_core import lifeline

    sweep = tmp_path / "sweep"
    lifeline.hold("mine", sweep / SWEEP_LOCK)
    yield sweep
    lifeline.hold(None, None)


def test_an_abandoned_rank_writes_no_telemetry_sidecar(owned_by_mine):
    from fsdp_core.lifeline import LaunchAbandoned
    from fsdp_core.telemetry import write_sidecar

    point = owned_by_mine / "abc123"
    series = [{"rank": 0, "host": HOST, "columns": {"t_s": [0.0, 0.1], "proc_rss_bytes": [1.0, 2.0]}}]
    write_holder(owned_by_mine / SWEEP_LOCK, pid=os.getpid(), host=HOST, token="mine")
    assert write_sidecar(point, series, parquet=False) == protocol.TELEMETRY_CSV  # owned: written
    (point / protocol.TELEMETRY_CSV).unlink()
    write_holder(owned_by_mine / SWEEP_LOCK, pid=os.getpid(), host=HOST, token="rerun")
    with pytest.raises(LaunchAbandoned, match="another fsdp-bench .* owns the sweep folder now"):
        write_sidecar(point, series, parquet=False)
    assert list(point.iterdir()) == []  # nothing beside the rerun's record, not even a temporary file


def test_an_abandoned_rank_leaves_the_checkpoint_marker_alone(owned_by_mine):
    from fsdp_core.checkpoint import remove_marker, write_marker
    from fsdp_core.lifeline import LaunchAbandoned

    folder = owned_by_mine / "abc123" / protocol.CHECKPOINT_SUBDIR
    (folder / "step-00000003").mkdir(parents=True)
    write_holder(owned_by_mine / SWEEP_LOCK, pid=os.getpid(), host=HOST, token="mine")
    write_marker(str(folder), protocol.CheckpointMarker(3, "step-00000003", 2, "abc123"))  # owned: written
    write_holder(owned_by_mine / SWEEP_LOCK, pid=os.getpid(), host=HOST, token="rerun")
    with pytest.raises(LaunchAbandoned):
        write_marker(str(folder), protocol.CheckpointMarker(5, "step-00000005", 2, "abc123"))
    with pytest.raises(LaunchAbandoned):
        remove_marker(str(folder))
    # The marker still names the step the owned launch saved (the rerun's to replace), and no temporary file.
    marker = protocol.CheckpointMarker.from_json((folder / protocol.CHECKPOINT_MARKER).read_text())
    assert (marker.step, marker.folder) == (3, "step-00000003")
    assert sorted(p.name for p in folder.iterdir()) == [protocol.CHECKPOINT_MARKER, "step-00000003"]


def test_sweep_folder_of_a_point_and_of_a_preflight():
    assert sweep_dir_of(Path("/r/sweep/abc123")) == Path("/r/sweep")
    assert sweep_dir_of(Path("/r/sweep/_preflight/2x4")) == Path("/r/sweep")


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "No space left on device (ENOSPC)"),
        (errno.EROFS, "Read-only file system (EROFS)"),
        (errno.EDQUOT, "Disk quota exceeded (EDQUOT)"),
    ],
)
def test_storage_error_is_one_line_with_path_reason_and_space(tmp_path, code, words):
    line = storage_error_line(OSError(code, os.strerror(code), str(tmp_path / "x" / "result.json")))
    assert line.startswith(f"cannot write {tmp_path / 'x' / 'result.json'}: {words}; ")
    assert " free of " in line and "\n" not in line


def test_a_rank_out_of_disk_stops_the_parent_instead_of_a_failed_record(tmp_path):
    RankError(1, "RuntimeError", "RuntimeError: connection closed by peer").write(tmp_path)
    raise_storage_error(tmp_path)  # an ordinary failure: recorded as such
    RankError(0, "OSError", "OSError: [Errno 28] No space left on device", errno=28, filename="/r/x.json").write(
        tmp_path
    )
    with pytest.raises(OSError) as caught:
        raise_storage_error(tmp_path)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, "/r/x.json")


class FakeCluster:
    """A cluster's view of its jobs (the part bench/run/ownership/jobs.py asks a launcher about)."""

    def __init__(self, running: set[str], ends_after_polls: int = 0) -> None:
        self.running, self.stopped, self.polls, self.ends_after = set(running), [], 0, ends_after_polls

    def job_running(self, job_id: str) -> bool:
        self.polls += 1
        if self.ends_after and self.polls > self.ends_after:
            self.running.discard(job_id)
        return job_id in self.running

    def stop_job(self, job_id: str) -> None:
        self.stopped.append(job_id)
        self.running.discard(job_id)


def left_launch(sweep_dir: Path, name: str, job_id: str, owner: str) -> Path:
    work = sweep_dir / protocol.LAUNCHES_DIR / name
    work.mkdir(parents=True)
    LaunchFile(points=[], owner=owner).write(work / LAUNCH_FILE)
    note_job(work, "slurm", job_id, {"name": "slurm", "partition": "gpu"})
    return work


def test_jobs_a_dead_holder_left_are_cancelled_by_default(tmp_path, monkeypatch):
    cluster = FakeCluster(running={"11"})
    monkeypatch.setattr(jobs.ClusterJob, "handler", lambda self: cluster)
    running = left_launch(tmp_path, "a", "11", "t1")
    ended = left_launch(tmp_path, "b", "12", "t2")
    assert [(j.job_id, j.owner, j.options["partition"]) for j in jobs.left_jobs(tmp_path)] == [
        ("11", "t1", "gpu"),
        ("12", "t2", "gpu"),
    ]
    said = []
    jobs.settle_left_jobs(tmp_path, "cancel", {"pid": 4242, "host": "login1"}, said.append)
    assert cluster.stopped == ["11"]
    assert said == [
        f"cancelled slurm job 11 ({running}), left running by an fsdp-bench that is gone (pid 4242 on login1); "
        "sweep.orphans=wait waits instead"
    ]
    assert not (running / protocol.JOB_FILE).exists() and not (ended / protocol.JOB_FILE).exists()


def test_a_holder_that_waits_adopts_the_left_jobs_tokens_until_they_end(tmp_path, monkeypatch):
    cluster = FakeCluster(running={"21"}, ends_after_polls=3)
    monkeypatch.setattr(jobs.ClusterJob, "handler", lambda self: cluster)
    monkeypatch.setattr(jobs, "WAIT_POLL_S", 0.01)
    left_launch(tmp_path, "a", "21", "old-token")
    seen = []
    original = jobs.settle_left_jobs

    def settle(*args):  # what a rank of the left job finds while the new holder waits
        seen.append((json.loads((tmp_path / SWEEP_LOCK).read_text()), abandoned("old-token", tmp_path / SWEEP_LOCK)))
        original(*args)

    monkeypatch.setattr(locks_module, "settle_left_jobs", settle)
    with MeasurementLocks(tmp_path, runs_here=False, wait=False, concurrent=True, orphans="wait") as locks:
        holder = json.loads((tmp_path / SWEEP_LOCK).read_text())
    ((while_waiting, reason),) = seen
    assert while_waiting["adopted"] == ["old-token"] and while_waiting["token"] == locks.token
    assert reason is None  # its ranks may write: their records count
    assert holder["adopted"] == [] and cluster.stopped == []  # waited for, never cancelled
    assert jobs.left_jobs(tmp_path) == []


def test_hangup_and_terminate_interrupt_unless_ignored_as_under_nohup():
    from bench.run.ownership.signals import stop_signals_as_interrupt

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does
    try:
        with stop_signals_as_interrupt():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)  # the handler runs at the next bytecode boundary
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with stop_signals_as_interrupt(), pytest.raises(KeyboardInterrupt, match="SIGHUP"):
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(1)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, before)
