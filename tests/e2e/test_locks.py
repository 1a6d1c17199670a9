"""Clean measurements: two sweeps into one folder never run a point twice or at once, and two local
benchmarks never share this host's cores unless told to (bench/run/ownership/locks.py), with real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from bench_cli import CliRun, finish, in_process, run_separately
from bench_cli import start as start_cli

from bench.analysis.records import load_records
from bench.run.ledger import LEDGER_FILE
from bench.run.ownership.locks import HOST_LOCK, FileLock

pytestmark = pytest.mark.ranks  # every test here starts ranks

POINTS = ["model=debug", "train.seq_len=32", "train.steps=3", "train.warmup_steps=1", "report=false"]


def enforced(lock_dir: Path) -> dict[str, str]:
    """This environment with the host lock enforced, in this test's own folder."""
    return {**os.environ, "FSDP_BENCH_ALLOW_CONCURRENT": "0", "FSDP_BENCH_LOCK_DIR": str(lock_dir)}


def start(results: Path, lock_dir: Path, *overrides: str, command: str = "sweep") -> subprocess.Popen:
    """`fsdp-bench sweep` (or `run`) in the background, with this test's own host lock, enforced."""
    return start_cli(command, *POINTS, *overrides, f"results_dir={results}", env=enforced(lock_dir))


def refuse(results: Path, *overrides: str, command: str = "sweep") -> CliRun:
    """`fsdp-bench sweep` (or `run`) with sweep.wait=false, with this test's host lock, in this process:
    it finds the lock another process holds and stops before anything launches."""
    overrides = (*POINTS, *overrides, "sweep.wait=false", f"results_dir={results}")
    return in_process(command, *overrides, env=enforced(results))


def held_by(lock: Path, pid: int, timeout: float = 60) -> dict:
    """Wait until `pid` holds the lock file (its content names the holder)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            holder = json.loads(lock.read_text() or "{}")
        except (OSError, ValueError):
            holder = {}
        if holder.get("pid") == pid:
            return holder
        time.sleep(0.05)
    pytest.fail(f"pid {pid} never took {lock}")


def finished_points(sweep_dir: Path) -> list[str]:
    events = [json.loads(line) for line in (sweep_dir / LEDGER_FILE).read_text().splitlines()]
    return [e["point_id"] for e in events if e["event"] == "finished"]


@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_a_second_sweep_into_the_folder_waits_then_runs_only_what_is_left(tmp_path):
    # One-rank points, each sweep's in one launch: the locks, not the world size, are tested.
    first = start(tmp_path, tmp_path, "strategy=full_shard,no_shard", "sweep.name=shared")
    holder = held_by(tmp_path / "shared" / ".lock", first.pid)
    assert holder["host"] == socket.gethostname()
    second = start(tmp_path, tmp_path, "strategy=full_shard,no_shard", "precision=fp32,bf16", "sweep.name=shared")
    # Refused before anything launches: in this process (not the holder's), without an interpreter of its own.
    rc, out, err, _ = refuse(tmp_path, "strategy=full_shard,no_shard", "sweep.name=shared")
    assert rc == 2 and "[1/" not in out and err.count("\n") == 1  # nothing ran
    assert err.startswith(f"error: the sweep folder {tmp_path / 'shared'} (") and "(sweep.wait=false)" in err
    assert f"is held by pid {first.pid} on {socket.gethostname()} since " in err
    assert finish(first)[0] == 0
    rc, out, err = finish(second)
    assert rc == 0, out + err
    assert (
        f"waiting: the sweep folder {tmp_path / 'shared'} ({tmp_path / 'shared' / '.lock'}) is held by pid {first.pid}"
        in err
    )
    records = load_records(tmp_path / "shared")[0]
    points = [(r.spec.strategy, r.spec.precision) for r in records]
    assert sorted(points) == [
        ("full_shard", "bf16"),
        ("full_shard", "fp32"),
        ("no_shard", "bf16"),
        ("no_shard", "fp32"),
    ]
    ran = finished_points(tmp_path / "shared")
    assert len(ran) == len(set(ran)) == 4  # every point once
    left = [r for r in records if r.spec.precision == "bf16"]  # the points only the second sweep had
    assert min(r.started_at for r in left) >= max(r.finished_at for r in records if r not in left)  # never at once
    assert {r.env.exclusive_host for r in records} == {True}


@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_a_benchmark_into_another_folder_waits_for_the_host_unless_allowed(tmp_path):
    # Two one-rank points in one launch hold the host while the other two commands start.
    first = start(tmp_path, tmp_path, "strategy=full_shard,no_shard", "sweep.name=one")
    held_by(tmp_path / "fsdp-bench-host.lock", first.pid)
    rc, _, err, _ = refuse(tmp_path, "sweep.name=two", command="run")
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(
        f"error: this host's benchmark lock ({tmp_path / 'fsdp-bench-host.lock'}) is held by pid {first.pid}"
    )
    alongside = start(tmp_path, tmp_path, "sweep.name=three", "sweep.allow_concurrent=true", command="run")
    rc, out, err = finish(alongside)
    assert rc == 0 and "waiting" not in err, out + err
    assert finish(first)[0] == 0
    (record,) = load_records(tmp_path / "three")[0]
    assert record.env.exclusive_host is False  # the record says it shared the host
    assert not (tmp_path / "two").exists() or not load_records(tmp_path / "two")[0]


def test_cancel_stops_the_fsdp_bench_that_holds_a_results_folder(tmp_path):
    """`fsdp-bench cancel RESULTS` signals the holder of a sweep folder's lock on this host (here a sweep
    that waits for the host), which stops as on Ctrl-C; nothing else to cancel is said so."""
    host = FileLock(tmp_path / HOST_LOCK, "this host's benchmark lock")  # start() points the sweep here
    assert host.try_acquire()
    try:
        waiting = start(tmp_path, tmp_path, "sweep.name=held")
        holder = held_by(tmp_path / "held" / ".lock", waiting.pid)
        cancel = run_separately("cancel", tmp_path, timeout=120)  # signals another process: one of its own
        assert cancel.rc == 0, cancel.stdout + cancel.stderr
        assert (
            cancel.stdout
            == f"stopping fsdp-bench pid {waiting.pid} ({holder['command']}), which holds {tmp_path / 'held'}\n"
        )
        rc, out, err = finish(waiting)
        assert rc == 1 and "interrupted before any point ran (waiting for a lock, or in the preflight)" in err, (
            out + err
        )
    finally:
        host.release()
    again = in_process("cancel", tmp_path)  # an idle folder: nothing to signal
    assert (again.rc, again.stdout) == (0, f"nothing to cancel in {tmp_path}\n")
    missing = in_process("cancel", tmp_path / "nope")
    assert (missing.rc, missing.stderr) == (
        2,
        f"error: RESULTS: {tmp_path / 'nope'} does not exist; give a results folder (results_dir) or a sweep folder\n",
    )
