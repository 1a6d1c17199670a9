"""A sweep's failing points are results too: a crashing, a hanging and a killed rank each get their
record (status, the rank named) while the sweep's other points finish, and no process is left.

Apart from tests/e2e/test_sweep.py so that two xdist workers can share the sweep tests (each file
stays on one worker).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from bench_cli import finish, run_separately, start

from bench.analysis.records import load_records


def sweep(args: list[str], results: Path, timeout: float = 240):
    return run_separately("sweep", *args, f"results_dir={results}", timeout=timeout)


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_crashing_and_hanging_points_are_recorded_and_the_others_finish(tmp_path, worker_processes):
    grid = [
        "experiment=cpu_smoke",
        "nodes=2",
        "strategy=full_shard",
        "precision=fp32",
        "train.steps=4",
        "train.warmup_steps=1",
        "debug.fail_rank=1",
        "debug.fail_step=null,1",
        "debug.hang=false,true",
        "sweep.point_timeout_s=12",
        "report=false",
    ]
    started = time.time()
    result = sweep(grid, tmp_path)
    assert result.rc == 1, result.stdout + result.stderr
    records, problems = load_records(tmp_path)
    assert problems == []
    by_knobs = {(r.spec.debug.fail_step, r.spec.debug.hang): r for r in records}
    assert by_knobs[(None, False)].status == "ok"
    assert by_knobs[(None, True)].status == "ok"
    assert by_knobs[(1, False)].status == "failed"
    assert "rank 1" in by_knobs[(1, False)].error and "injected failure" in by_knobs[(1, False)].error
    assert by_knobs[(1, True)].status == "timeout"
    assert "sweep.point_timeout_s=12" in by_knobs[(1, True)].error
    # Two nodes, one rank each: rank 1 never reached step 1's opening barrier, which rank 0 entered.
    hang = by_knobs[(1, True)].hang
    assert (hang.collective.kind, hang.collective.meaning) == (
        "gloo:barrier",
        "the step timer's opening barrier of step 1",
    )
    assert (hang.entered, [m.rank for m in hang.missing]) == ([0], [1])
    assert by_knobs[(1, True)].error.startswith("hung: rank 1 never entered collective ")
    assert all(r.hang is None for r in records if r.status != "timeout")
    # Only the hung point keeps its dumps: the points that finished deleted theirs.
    assert [p.parent.name for p in tmp_path.rglob("flight_recorder")] == [by_knobs[(1, True)].point_id]
    assert by_knobs[(None, False)].env.env_vars.get("TORCH_FR_BUFFER_SIZE") == "2000"
    assert time.time() - started < 200
    assert worker_processes(tmp_path) == []


def _rank_pids(results: Path) -> list[int]:
    """PIDs of rank processes (not torchrun agents) whose launch file lies under `results`."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(args).decode(errors="replace")
        if "fsdp_core.worker" in text and str(results) in text and "torch.distributed.run" not in text:
            pids.append(int(proc.name))
    return pids


@pytest.mark.ranks
def test_a_rank_killed_by_a_signal_is_named_in_the_record(tmp_path, worker_processes):
    # Two nodes (an agent each): under one agent, the rank that agent stops after the killed one is
    # the one the record names (rank 0: killed by SIGTERM).
    proc = start("run", "model=tiny", "nodes=2", "train.steps=400", f"results_dir={tmp_path}", merge_stderr=True)
    deadline = time.time() + 120
    while not list(tmp_path.rglob("started")) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # inside the training loop
    victim = max(_rank_pids(tmp_path))
    os.kill(victim, signal.SIGKILL)
    rc, output, _ = finish(proc, timeout=120)
    assert rc == 1, output
    (record,) = load_records(tmp_path)[0]
    assert record.status == "failed"
    assert "killed by SIGKILL" in record.error and record.error.startswith("rank "), record.error
    assert worker_processes(tmp_path) == []
