"""`fsdp-bench check` of a results folder with its forked worker (bench/analysis/check/loading.py,
bench/analysis/forking.py Worker) prints and writes what one process does, byte for byte: with the worker, with one CPU
(no worker), with a worker that dies at the start or fails while it reads (its share is then
read here), and where fork itself fails. The console script's code in this process (tests/bench_cli.py); the worker is forked
from it, so the sizes that let a small folder use a worker are set here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bench_cli import fsdp_bench
from counted_reads import count_reads

import bench.analysis.check.loading as loading
import bench.analysis.check.timings as timings
import bench.analysis.forking as forked
import bench.analysis.records as records
from bench.analysis.check.synthetic import make_record, step_times
from bench.analysis.forking import can_fork


def _sweep(root: Path, seed: int, slow: float) -> Path:
    """12 points x 3 runs (one point 40% slower with `slow`, one failed run), and a broken file."""
    for nodes in (1, 2, 4):
        for batch in (1, 2, 3, 4):
            for repeat in range(3):
                median = 0.01 * nodes * batch * (slow if (nodes, batch) == (2, 3) else 1.0)
                status = "failed" if (nodes, batch, repeat) == (4, 4, 1) else "ok"
                record = make_record(
                    step_times(median, 0.05, 12, seed=seed + 7 * nodes + 3 * batch + repeat),
                    spec={"nodes": nodes, "micro_batch": batch, "repeat": repeat},
                    status=status,
                )
                records.write_record(record, root / "s" / record.point_id / "result.json")
    (root / "s" / "broken").mkdir()
    (root / "s" / "broken" / "result.json").write_text("{not json")
    return root


def _check(tmp_path: Path, name: str, base: Path, cur: Path) -> tuple:
    out = tmp_path / name
    out.mkdir()
    proc = fsdp_bench(
        "check", cur, "--baseline", base, "--all-rows", "--junit", out / "j.xml", "--summary", out / "s.md"
    )
    return proc.rc, proc.stdout, proc.stderr, (out / "j.xml").read_bytes(), (out / "s.md").read_bytes()


def test_a_forked_worker_gives_the_outputs_of_one_process(tmp_path, monkeypatch):
    if not can_fork():
        pytest.skip("fork is not safe in this process (another thread runs): check reads serially")
    base, cur = _sweep(tmp_path / "base", seed=0, slow=1.0), _sweep(tmp_path / "cur", seed=50, slow=1.4)
    reads = count_reads(monkeypatch)
    reads_here = reads.here

    def check(name: str) -> tuple:
        reads_here.clear()
        return _check(tmp_path, name, base, cur)

    monkeypatch.setattr(loading, "PARALLEL_MIN_RECORDS", 10)  # 37 files: 22 read here, 15 by the worker
    monkeypatch.setattr(timings, "PARALLEL_MIN_COMPARISONS", 4)  # 12 pairs: 5 comparisons here, 7 there
    monkeypatch.setattr(forked, "cpus", lambda: 2)
    shared = check("shared")
    assert reads_here == [37, 22]  # the baseline folder (load_side), then this process's share of the current one
    rc, stdout, stderr, _, summary = shared
    assert rc == 1 and stdout.splitlines()[-1].startswith("FAIL: 2 regression(s) (12 point(s) compared")
    assert f"warning: skipped {cur / 's' / 'broken' / 'result.json'}: " in stderr  # from the worker's share
    assert b"REGRESSION" in summary

    monkeypatch.setattr(forked, "cpus", lambda: 1)  # one CPU: no worker, both folders read by load_side
    assert check("serial") == shared and reads_here == [37, 37]
    monkeypatch.setattr(forked, "cpus", lambda: 2)

    reads.fail_in_worker = True  # the worker sends the list of files, then fails: its share is read here
    assert check("failed") == shared and reads_here == [37, 22, 15]

    monkeypatch.setattr(forked, "_serve", lambda *args: os._exit(3))  # dies before its first result
    assert check("died") == shared and reads_here == [37, 22, 15]

    def no_fork():  # a pids limit or no memory: fork fails, and check reads everything itself
        raise BlockingIOError(11, "Resource temporarily unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fork", no_fork)
        assert check("no fork") == shared and reads_here == [37, 37]
