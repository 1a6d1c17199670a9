"""`sweep --dry-run`: the grid a sweep would run, decided as the sweep decides, with nothing launched,
locked or written. The half-finished sweep is a copy of the session's cpu_smoke results
(tests/shared_launch.py) with two points' records removed and one rewritten as `failed`; every dry
run is an in-process call, so the only launch is the session's shared one."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from bench_cli import fsdp_bench, in_process
from shared_launch import CPU_SMOKE_SWEEP, session_results

from bench.analysis.records import load_records, read_record, write_record
from bench.run.ownership.locks import FileLock, sweep_lock_path

DONE, NEW, KEPT = "done: ok result exists", "new", "kept: failed (sweep.retry_failed=true reruns it)"


@pytest.fixture(scope="module")
def cpu_smoke(tmp_path_factory) -> Path:
    """The session's cpu_smoke sweep (tests/shared_launch.py; test_ci_baseline.py checks it whole)."""
    sweep = lambda results: fsdp_bench(*CPU_SMOKE_SWEEP, f"results_dir={results}", timeout=840)  # noqa: E731
    return session_results(tmp_path_factory, "cpu_smoke", sweep)


@pytest.fixture
def half_done(cpu_smoke, tmp_path) -> tuple[Path, dict[str, str]]:
    """A copy of the sweep with two records removed (a 1-node and a 2-node point) and one failed:
    (results folder, point id -> what the ledger must say of it)."""
    results = tmp_path / "results"
    shutil.copytree(cpu_smoke, results)
    records = sorted(load_records(results)[0], key=lambda r: (r.spec.nodes, r.spec.strategy, r.spec.precision))
    assert len(records) == 12
    removed, failed = [records[0], records[7]], records[3]
    for record in removed:
        shutil.rmtree(results / record.sweep / record.point_id)
    path = results / failed.sweep / failed.point_id / "result.json"
    write_record(read_record(path).model_copy(update={"status": "failed", "error": "RuntimeError: boom"}), path)
    expected = {r.point_id: DONE for r in records} | {r.point_id: NEW for r in removed} | {failed.point_id: KEPT}
    return results, expected


def files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def dry_run(results: Path, *extra: str, json_out: bool = False):
    flags = ["--dry-run", "--json"] if json_out else ["--dry-run"]
    return in_process(*CPU_SMOKE_SWEEP, f"results_dir={results}", *extra, *flags)


def table_rows(out: str) -> dict[str, list[str]]:
    """point id -> its row's cells (split at two or more spaces)."""
    return {
        cells[2]: cells
        for line in out.splitlines()
        if len(cells := re.split(r"\s{2,}", line)) == 10 and line[0].isdigit()
    }


@pytest.mark.ranks
@pytest.mark.slow  # the first test of a session to ask runs the cpu_smoke sweep
@pytest.mark.timeout(900)
def test_the_ledger_column_of_a_half_finished_sweep_and_nothing_written(half_done):
    results, expected = half_done
    before = files(results)
    rc, out, err, _ = dry_run(results)
    assert (rc, err) == (0, "")
    rows = table_rows(out)
    assert {point_id: row[4] for point_id, row in rows.items()} == expected
    new = [row for row in rows.values() if row[4] == NEW]
    assert sorted(row[5] for row in new) == ["1", "2"]  # one launch per world shape, the others none
    assert all(row[5] == "-" for row in rows.values() if row[4] != NEW)
    assert all(row[6] == "yes" and float(row[9].replace(",", "")) > 0 for row in rows.values())
    assert out.splitlines()[0] == f"sweep cpu_smoke: 12 point(s) x 1 repeat(s) -> {results / 'cpu_smoke'}"
    assert "  1: launcher=local nodes=1 gpus_per_node=1: 1 point run(s)" in out.splitlines()
    assert out.splitlines()[-1] == "dry run: 2 of 12 point run(s) would run; nothing launched, nothing written"
    assert files(results) == before  # no ledger line, no lock file, no record touched

    retry = table_rows(dry_run(results, "sweep.retry_failed=true").stdout)
    assert [row[4] for row in retry.values()].count("rerun: failed and sweep.retry_failed=true") == 1
    forced = table_rows(dry_run(results, "sweep.force=true").stdout)
    assert {row[4] for pid, row in forced.items() if expected[pid] != NEW} == {"rerun: sweep.force=true"}

    rc, out, _, _ = dry_run(results, json_out=True)
    objects = json.loads(out)
    assert rc == 0 and {o["point_id"]: o["ledger"]["reason"] for o in objects} == expected
    assert sorted(o["launch"] for o in objects if o["ledger"]["runs"]) == [1, 2]
    for obj in objects:  # `plan --json`'s object, with the ledger and the launch added
        assert {"spec", "fits", "step_time_s", "tokens_per_s", "memory_bytes_per_device"} <= set(obj)
        assert obj["spec"]["sweep"]["name"] == "cpu_smoke" and rows[obj["point_id"]][2] == obj["point_id"]
    assert files(results) == before


def test_a_dry_run_into_a_new_folder_creates_nothing_and_names_a_held_lock(tmp_path):
    results = tmp_path / "deep" / "results"
    rc, out, _, _ = dry_run(results, "nodes=1")
    assert rc == 0 and "dry run: 6 of 6 point run(s) would run" in out
    assert list(tmp_path.iterdir()) == []
    (results / "cpu_smoke").mkdir(parents=True)
    lock = FileLock(sweep_lock_path(results / "cpu_smoke"), f"the sweep folder {results / 'cpu_smoke'}")
    assert lock.try_acquire()
    try:
        rc, out, _, _ = dry_run(results, "nodes=1")
    finally:
        lock.release()
    assert rc == 0
    # (the host's lock may be another test's sweep's now: only the folder's is this test's)
    (waits,) = [line for line in out.splitlines() if line.startswith("waits for: the sweep folder ")]
    assert waits.startswith(f"waits for: the sweep folder {results / 'cpu_smoke'} (") and "held by pid" in waits
    assert waits.endswith("(sweep.wait)")
    lock.try_acquire()
    try:
        refused = dry_run(results, "nodes=1", "sweep.wait=false")
    finally:
        lock.release()
    assert refused.rc == 2 and "dry run: 6 of 6 point run(s) would run" in refused.stdout
    assert f"error: the sweep folder {results / 'cpu_smoke'} (" in refused.stderr
    assert refused.stderr.rstrip().endswith("(sweep.wait=false)")


def test_a_dry_run_makes_a_real_sweeps_checks(tmp_path):
    """A folder that fails a test write, a typo: the same one line and exit 2 as the real sweep."""
    refused = dry_run(Path("/proc/fsdp-bench-dry-run"))
    assert (refused.rc, refused.stdout) == (2, "")
    assert refused.stderr == (
        "error: results_dir: /proc/fsdp-bench-dry-run is not writable (a test write failed: No such file or directory)\n"
    )
    typo = in_process("sweep", "--dry-run", "model=tinyy", f"results_dir={tmp_path}")
    assert typo.rc == 2 and "(did you mean tiny?)" in typo.stderr and list(tmp_path.iterdir()) == []


def test_repeats_and_the_points_sweep_plan_would_skip(tmp_path):
    rc, out, _, _ = in_process(
        "sweep", "--dry-run", "model=tiny", "train.micro_batch=64,8192", "sweep.plan=true", "sweep.repeats=2",
        f"results_dir={tmp_path}",
    )  # fmt: skip
    rows = list(table_rows(out).values())
    assert rc == 0 and [(row[1], row[3]) for row in rows] == [
        ("tiny 1x1 full_shard fp32 mb=64 s=256", "0"),
        ("tiny 1x1 full_shard fp32 mb=8192 s=256", "0"),
        ("tiny 1x1 full_shard fp32 mb=64 s=256", "1"),
        ("tiny 1x1 full_shard fp32 mb=8192 s=256", "1"),
    ]
    skipped = "new; skipped: predicted not to fit (sweep.plan=true)"
    assert [(row[4], row[5], row[6]) for row in rows] == [("new", "1", "yes"), (skipped, "-", "no")] * 2
    assert out.splitlines()[-1].startswith("dry run: 2 of 4 point run(s) would run;")
    assert list(tmp_path.iterdir()) == []
