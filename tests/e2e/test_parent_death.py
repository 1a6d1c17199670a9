"""When the parent dies: no orphan ranks, no contaminated reruns, one line on a full disk.

Real `fsdp-bench` processes, real torchrun agents and gloo ranks, real signals (fsdp_core/lifeline.py,
bench/run/ownership/storage.py).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from pathlib import Path

import pytest
from bench_cli import finish, start
from disks import fill, remount_read_only, small_tmpfs

from bench.analysis.records import load_records
from bench.run.execute import prepare_launch
from bench.run.launch.local import LocalLauncher
from bench.schema.protocol import RESULT_FILE, STARTED_MARK, SWEEP_LOCK, sweep_dir_of

pytestmark = pytest.mark.ranks  # every test here starts ranks

POINT = ["model=debug", "train.seq_len=32", "train.warmup_steps=1", "report=false"]
# Two points in one launch, each long enough to be in flight when the parent is killed; two ranks
# under one torchrun agent (the agent's parent-death signal and its ranks' are what is tested, not
# how many agents a launch has).
LONG = [*POINT, "gpus_per_node=2", "strategy=full_shard,no_shard", "train.steps=25", "sweep.name=orphans"]


def wait_for(condition, what: str, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.01)
    pytest.fail(f"never happened within {timeout} s: {what}")


def started_after(results: Path, since: float) -> list[Path]:
    """`started` marks a rank wrote after `since` (the point is in flight)."""
    return [p for p in results.rglob(STARTED_MARK) if p.stat().st_mtime > since]


def no_workers_left(leftover_workers, results: Path, timeout: float = 30.0) -> list[str]:
    """Agents and ranks of `results` still alive after up to `timeout` s (empty once all are gone)."""
    deadline = time.monotonic() + timeout
    while (alive := leftover_workers(results)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_killed_or_hung_up_parent_leaves_no_rank_and_the_rerun_measures_every_point(tmp_path, worker_processes):
    results = tmp_path / "results"
    # SIGKILL, as the out-of-memory killer or a scheduler does: no handler runs in the parent.
    since = time.time()
    killed = start("sweep", *LONG, f"results_dir={results}")
    wait_for(lambda: started_after(results, since), "the point started")
    killed.send_signal(signal.SIGKILL)
    finish(killed)
    assert no_workers_left(worker_processes, results) == []
    assert list(results.rglob(RESULT_FILE)) == []  # the dead run wrote nothing
    # The agent got SIGTERM from its parent-death signal (nobody else was left to send one).
    (launch,) = (results / "orphans" / "_launches").iterdir()
    (log,) = launch.glob("agent*.log")
    assert "got signal: 15" in log.read_text(), log.read_text()[-2000:]

    # SIGHUP, as a closing terminal or SSH session sends: an interrupt, like Ctrl-C.
    since = time.time()
    hung_up = start("sweep", *LONG, f"results_dir={results}", signals=[signal.SIGHUP])
    wait_for(lambda: started_after(results, since), "the point started again")
    hung_up.send_signal(signal.SIGHUP)
    rc, out, err = finish(hung_up)
    assert rc == 1, out + err
    assert "interrupted: 1 point(s) recorded in this run; run the same command to continue" in out
    (record,) = [r for r in load_records(results)[0] if r.status != "ok"]  # the point in flight
    assert record.status == "interrupted"
    assert record.error == "interrupted by a signal (SIGINT, SIGTERM or SIGHUP); rerun the sweep to continue"
    assert no_workers_left(worker_processes, results) == []

    # An immediate rerun measures the point itself; nothing of the dead runs counts.
    time.sleep(1.0)  # records time their start in whole seconds
    rerun_at = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    rc, out, err = finish(start("sweep", *LONG, f"results_dir={results}"))
    assert rc == 0, out + err
    records = load_records(results)[0]
    assert sorted(r.spec.strategy for r in records) == ["full_shard", "no_shard"]
    for record in records:
        assert record.status == "ok" and len(record.metrics.step_times_s) == 24
        assert record.started_at >= rerun_at  # measured by the rerun's ranks, not by a survivor
    assert no_workers_left(worker_processes, results, timeout=0) == []


def test_ranks_of_an_abandoned_launch_write_nothing(tmp_path):
    """The ownership guard on its own: a launch whose lock now names another run's token (as after a
    rerun took the folder) starts its ranks, which stop before writing a mark, a record or an error."""
    from bench.config.compose import spec_from_fields

    spec = spec_from_fields(model="debug", nodes=1, seq_len=32, steps=3, warmup_steps=1, **{"sweep.name": "gone"})
    request = prepare_launch([spec], tmp_path, owner="token-of-the-dead-run")
    lock = sweep_dir_of(request.point_dirs[0]) / SWEEP_LOCK
    lock.write_text(json.dumps({"pid": os.getpid(), "host": "elsewhere", "token": "token-of-the-rerun"}))
    outcome = LocalLauncher().launch(request)
    assert outcome.returncode == 1
    point_dir = request.point_dirs[0]
    assert sorted(p.name for p in point_dir.iterdir()) == []  # no started, result.json or errors/
    log = outcome.log_files[0].read_text()
    assert (
        "fsdp-bench rank: stopping without writing: another fsdp-bench (pid "
        f"{os.getpid()} on elsewhere) owns the sweep folder now ({lock})" in log
    ), log[-2000:]


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (mounting needs root: CI runs as root); skipped with the reason elsewhere."""
    with small_tmpfs(tmp_path / "disk") as disk:
        yield disk


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_full_then_read_only_results_disk_stops_the_sweep_with_one_line(small_disk, worker_processes):
    # Three points in one launch: the first is stored; the second hangs (debug knobs) until its
    # timeout, and the disk fills meanwhile; the third would run after it.
    grid = [*POINT, "train.steps=3", "debug.hang=true", "debug.fail_rank=0", "debug.fail_step=null,1,2",
            "sweep.point_timeout_s=5", "sweep.name=full", f"results_dir={small_disk}"]  # fmt: skip
    sweep = start("sweep", *grid)
    wait_for(lambda: len(list(small_disk.glob("full/*/started"))) >= 2, "the second point started")
    first = list(small_disk.rglob(RESULT_FILE))
    stored = {p: p.read_bytes() for p in first}
    fill(small_disk)
    rc, out, err = finish(sweep)
    assert rc == 1, out + err
    line = one_line(err)
    assert line.startswith(f"error: cannot write {small_disk / 'full'}/"), line
    assert ": No space left on device (ENOSPC); " in line and " free of 16.0 MiB there; " in line, line
    assert line.endswith("make room and run the same command again"), line
    assert len(first) == 1 and {p: p.read_bytes() for p in first} == stored  # earlier records untouched
    assert [r.spec.debug.fail_step for r in load_records(small_disk)[0]] == [None]
    assert list(small_disk.rglob("*.tmp")) == []  # no partial record
    assert len(list(small_disk.glob("full/*/started"))) == 2  # the sweep stopped: the third never ran
    assert worker_processes(small_disk) == []

    remount_read_only(small_disk)
    rc, out, err = finish(start("sweep", *grid))
    assert rc == 1, out + err
    line = one_line(err)
    # Refused at the test write into results_dir that every sweep makes before its lock (bench/config/paths.py).
    assert line.startswith(f"error: cannot write {small_disk}: Read-only file system (EROFS); "), line
    assert {p: p.read_bytes() for p in first} == stored
