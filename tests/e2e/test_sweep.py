"""`fsdp-bench sweep` as a user runs it: resume after a real SIGINT, reruns, bad grids (failures: test_sweep_failures.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from bench_cli import finish, in_process, run_separately, start
from shared_launch import CPU_SMOKE_SWEEP, session_results

from bench.analysis.records import load_records, read_record
from bench.config.compose import load_grid
from bench.run.ledger import LEDGER_FILE

SMALL_GRID = [
    "experiment=cpu_smoke",
    "nodes=1",
    "strategy=full_shard,no_shard",
    "precision=fp32,bf16",
    "train.steps=4",
    "train.warmup_steps=1",
    "report=false",
]


def sweep(args: list[str], results: Path, timeout: float = 240):
    return run_separately("sweep", *args, f"results_dir={results}", timeout=timeout)


def ok_ids(results: Path) -> set[str]:
    records, _ = load_records(results)
    return {r.point_id for r in records if r.status == "ok"}


def finished_events(results: Path, sweep_name: str) -> list[dict]:
    path = results / sweep_name / LEDGER_FILE
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "finished"]


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_sigint_then_resume_runs_exactly_the_remaining_points(tmp_path, worker_processes):
    # The four points in one launch (one world shape), each timed step followed by a sleep of four
    # times its own time: a point after the first takes about a second (sleeping, not computing),
    # so the signal lands while the third or the fourth is in flight.
    grid = [*SMALL_GRID, "debug.slow_fraction=4"]
    expected = {p.spec.point_id for p in load_grid(grid)}
    assert len(expected) == 4
    proc = start("sweep", *grid, f"results_dir={tmp_path}", merge_stderr=True, signals=[signal.SIGINT])
    deadline = time.time() + 180
    while len(ok_ids(tmp_path)) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    rc, output, _ = finish(proc, timeout=60)
    assert rc == 1, output
    assert "interrupted" in output
    done_first = ok_ids(tmp_path)
    assert 2 <= len(done_first) < 4
    assert worker_processes(tmp_path) == []
    records, _ = load_records(tmp_path)
    assert {r.status for r in records} <= {"ok", "interrupted"}

    second = sweep(grid, tmp_path)
    assert second.rc == 0, second.stdout + second.stderr
    events = finished_events(tmp_path, "cpu_smoke")
    rerun = {e["point_id"] for e in events[-(4 - len(done_first)) :]}
    assert rerun == expected - done_first
    assert ok_ids(tmp_path) == expected
    assert second.stdout.count("done: ok result exists") == len(done_first)


def test_invalid_points_are_listed_together_and_nothing_launches(tmp_path):
    # Refused before anything launches: the console script's code in this process.
    grid = ["sweep", "experiment=cpu_smoke", "train.seq_len=64,4096"]
    result = in_process(*grid, "strategy=full_shard,zero9", f"results_dir={tmp_path}")
    assert result.rc == 2
    assert "strategy: unknown strategy 'zero9'" in result.stderr
    result = in_process(*grid, "train.warmup_steps=1,8", f"results_dir={tmp_path}")
    assert result.rc == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error: [")]
    # 12 cpu_smoke points x 2 seq lengths x 2 warm-ups: 24 with seq 4096 > 512, 24 with warm-up 8 >= 8 steps,
    # 12 of them both -> 36 invalid points, each line naming its field.
    assert len(lines) == 48
    assert any("train.seq_len: 4096 exceeds debug's maximum 512" in ln for ln in lines)
    assert any("train.warmup_steps: must be fewer than train.steps" in ln for ln in lines)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def cpu_smoke(tmp_path_factory) -> Path:
    """The session's cpu_smoke sweep (tests/shared_launch.py; test_ci_baseline.py checks it)."""
    launch = lambda results: run_separately(*CPU_SMOKE_SWEEP, f"results_dir={results}", timeout=840)  # noqa: E731
    return session_results(tmp_path_factory, "cpu_smoke", launch)


@pytest.fixture(scope="module")
def completed(cpu_smoke, tmp_path_factory) -> Path:
    """A results folder whose sweep ran to the end: a copy of the session's cpu_smoke sweep (12
    points, 2 launches), shared by the tests below: each reruns the sweep on it, or on a copy it changes."""
    results = tmp_path_factory.mktemp("completed")
    shutil.copytree(cpu_smoke, results, dirs_exist_ok=True)
    return results


@pytest.mark.ranks
@pytest.mark.timeout(900)  # the first test of a session to ask runs the cpu_smoke sweep
def test_unreadable_record_is_reported_and_its_point_rerun(completed, tmp_path):
    shutil.copytree(completed, tmp_path, dirs_exist_ok=True)
    everything, before = ok_ids(completed), len(finished_events(completed, "cpu_smoke"))
    # A point of one rank (the cheapest to run again), its record truncated mid-write.
    record_path = next(p for p in sorted(tmp_path.rglob("result.json")) if read_record(p).spec.world_size == 1)
    record_path.write_text(record_path.read_text()[:100])
    second = run_separately(*CPU_SMOKE_SWEEP, f"results_dir={tmp_path}", timeout=240)
    assert second.rc == 0, second.stdout + second.stderr
    assert "rerun: unreadable record" in (tmp_path / "cpu_smoke" / LEDGER_FILE).read_text()
    assert [e["point_id"] for e in finished_events(tmp_path, "cpu_smoke")[before:]] == [record_path.parent.name]
    assert second.stdout.count("done: ok result exists") == len(everything) - 1
    assert ok_ids(tmp_path) == everything


@pytest.mark.skipif(os.cpu_count() is None, reason="needs os.cpu_count")
@pytest.mark.ranks
@pytest.mark.timeout(900)  # the first test of a session to ask runs the cpu_smoke sweep
def test_completed_sweep_reruns_nothing(completed):
    before = len(finished_events(completed, "cpu_smoke"))
    again = run_separately(*CPU_SMOKE_SWEEP, f"results_dir={completed}", timeout=240)
    assert again.rc == 0
    assert again.stdout.count("done: ok result exists") == len(ok_ids(completed)) == before == 12
    assert len(finished_events(completed, "cpu_smoke")) == before


def test_kubeflow_without_apply_renders_one_job_per_world_shape_and_records_nothing(tmp_path):
    result = in_process("sweep", "experiment=eks_llama2", f"results_dir={tmp_path}")  # renders, runs nothing
    assert result.rc == 0, result.stdout + result.stderr
    assert "5 job file(s) rendered, nothing ran (launcher.apply=false)" in result.stdout
    assert len(list(tmp_path.rglob("pytorchjob.yaml"))) == 5  # nodes 1, 2, 4, 8, 16
    assert list(tmp_path.rglob("result.json")) == []


def test_plan_skips_points_predicted_not_to_fit_and_records_why(tmp_path):
    grid = [
        "experiment=cpu_smoke",
        "nodes=1,2",
        "strategy=full_shard",
        "precision=fp32",
        "sweep.plan=true",
        "cluster.device_memory_gib=0.25",
        "report=false",
    ]
    result = in_process("sweep", *grid, f"results_dir={tmp_path}")  # the planner skips both: nothing launches
    assert result.rc == 1, result.stdout + result.stderr
    records, _ = load_records(tmp_path)
    assert len(records) == 2 and {r.status for r in records} == {"skipped"}
    for record in records:
        assert record.error.startswith("planner: predicted not to fit")
        assert record.prediction["fits"] is False
        assert record.prediction["point_id"] == record.point_id  # the plan object `plan --json` prints
        assert record.prediction["memory_bytes_per_device"]["total"] > 0.25 * 2**30
    assert list(tmp_path.rglob("launch.json")) == []


@pytest.mark.ranks
@pytest.mark.slow  # more than 20 s on 2 cores (docs/results/test-suite.md)
def test_compiled_point_trains_and_counts_the_same_communication(tmp_path):
    # Both points in one launch (one world shape: 2 ranks under one agent), the eager one first, as a
    # sweep groups them.
    grid = [
        "model=debug",
        "gpus_per_node=2",
        "train.steps=4",
        "train.warmup_steps=2",
        "train.compile=false,true",
        "report=false",
    ]
    both = sweep(grid, tmp_path, timeout=400)
    assert both.rc == 0, both.stdout + both.stderr
    records = {r.spec.train.compile: r for r in load_records(tmp_path)[0]}
    assert records[True].status == "ok"
    # debug, fp32, full_shard on 2 ranks: all-gather P_total*4 + P_blocks*4, reduce-scatter P_total*4.
    assert records[True].metrics.comm_bytes_per_step == records[False].metrics.comm_bytes_per_step
    assert records[True].metrics.comm_bytes_per_step.all_gather == 989_440
    assert records[True].metrics.loss_last < records[True].metrics.loss_first
