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


@pytest.fixture(scope="module")
def contended(tmp_path_factory) -> dict:
    """One sweep holds its folder and this host; meanwhile a second sweep into the same folder waits,
    a sweep into that folder and a run into another one are refused (sweep.wait=false), and a run
    with sweep.allow_concurrent=true runs alongside. One holder serves both tests below: its two
    one-rank points (one launch) are what every other command meets."""
    root = tmp_path_factory.mktemp("locks")
    first = start(root, root, "strategy=full_shard,no_shard", "sweep.name=shared")
    folder_holder = held_by(root / "shared" / ".lock", first.pid)
    host_holder = held_by(root / "fsdp-bench-host.lock", first.pid)
    second = start(root, root, "strategy=full_shard,no_shard", "precision=fp32,bf16", "sweep.name=shared")
    # Refused before anything launches: in this process (not the holder's), without an interpreter of its own.
    folder_refused = refuse(root, "strategy=full_shard,no_shard", "sweep.name=shared")
    host_refused = refuse(root, "sweep.name=two", command="run")
    alongside = finish(start(root, root, "sweep.name=three", "sweep.allow_concurrent=true", command="run"))
    return {
        "root": root,
        "first": first,
        "folder_holder": folder_holder,
        "host_holder": host_holder,
        "folder_refused": folder_refused,
        "host_refused": host_refused,
        "alongside": alongside,
        "first_done": finish(first),
        "second_done": finish(second),
    }


@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_a_second_sweep_into_the_folder_waits_then_runs_only_what_is_left(contended):
    root, first = contended["root"], contended["first"]
    assert contended["folder_holder"]["host"] == socket.gethostname()
    rc, out, err, _ = contended["folder_refused"]
    assert rc == 2 and "[1/" not in out and err.count("\n") == 1  # nothing ran
    assert err.startswith(f"error: the sweep folder {root / 'shared'} (") and "(sweep.wait=false)" in err
    assert f"is held by pid {first.pid} on {socket.gethostname()} since " in err
    assert contended["first_done"][0] == 0
    rc, out, err = contended["second_done"]
    assert rc == 0, out + err
    assert (
        f"waiting: the sweep folder {root / 'shared'} ({root / 'shared' / '.lock'}) is held by pid {first.pid}" in err
    )
    records = load_records(root / "shared")[0]
    points = [(r.spec.strategy, r.spec.precision) for r in records]
    assert sorted(points) == [
        ("full_shard", "bf16"),
        ("full_shard", "fp32"),
        ("no_shard", "bf16"),
        ("no_shard", "fp32"),
    ]
    ran = finished_points(root / "shared")
    assert len(ran) == len(set(ran)) == 4  # every point once
    left = [r for r in records if r.spec.precision == "bf16"]  # the points only the second sweep had
    assert min(r.started_at for r in left) >= max(r.finished_at for r in records if r not in left)  # never at once
    assert {r.env.exclusive_host for r in records} == {True}


def test_a_benchmark_into_another_folder_waits_for_the_host_unless_allowed(contended):
    root, first = contended["root"], contended["first"]
    assert contended["host_holder"]["pid"] == first.pid
    rc, _, err, _ = contended["host_refused"]
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(
        f"error: this host's benchmark lock ({root / 'fsdp-bench-host.lock'}) is held by pid {first.pid}"
    )
    rc, out, err = contended["alongside"]
    assert rc == 0 and "waiting" not in err, out + err
    assert contended["first_done"][0] == 0
    (record,) = load_records(root / "three")[0]
    assert record.env.exclusive_host is False  # the record says it shared the host
    assert not (root / "two").exists() or not load_records(root / "two")[0]


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
