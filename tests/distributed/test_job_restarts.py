"""Real repeated failures: 2 gloo ranks, rank 1 SIGKILLed at the start of step 6 and again of step 10,
torchrun restarting the ranks (launcher.max_failures=2), each restart resuming from the latest checkpoint.

One launch of one torchrun agent holds both points: `plain`, the uninterrupted training, then `killed`,
the same training with the kills. Saves follow steps 4, 7 and 10 (2 warm-up steps, every 3rd timed
step): the kill at step 6 loses step 5, the second attempt resumes at 5; the kill at step 10 loses 8
and 9, the third attempt resumes at 8 and finishes. The restarted ranks skip `plain` (it has its record).
"""

from __future__ import annotations

import json

import pytest
from dist_helpers import debug_spec

from bench.run.execute import run_group
from bench.run.launch.local import LocalLauncher
from bench.schema.job import BUCKETS
from bench.schema.protocol import JOB_DIR, point_dir

pytestmark = pytest.mark.ranks

TRAINING = {"gpus_per_node": 2, "steps": 12, "warmup_steps": 2, "checkpoint": "sync", "checkpoint_every": 3}


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    results = tmp_path_factory.mktemp("restarts")
    plain = debug_spec(**TRAINING, **{"sweep.name": "restarts"})
    killed = debug_spec(**TRAINING, **{"sweep.name": "restarts", "debug.kill_steps": [6, 10]})
    records = {r.point_id: r for r in run_group([plain, killed], LocalLauncher({"max_failures": 2}), results)}
    return records[plain.point_id], records[killed.point_id], point_dir(results, killed)


def test_three_attempts_redo_three_steps_and_end_with_the_uninterrupted_losses(loop):
    plain, killed, folder = loop
    assert plain.status == killed.status == "ok", (plain.error, killed.error)
    job = killed.metrics.job
    assert (job.attempts, job.steps_redone) == (3, 3)
    assert sorted(p.name for p in (folder / JOB_DIR).glob("kill*.json")) == ["kill0.json", "kill1.json"]
    assert [json.loads((folder / JOB_DIR / f"kill{a}.json").read_text())["step"] for a in (0, 1)] == [6, 10]
    # Every step once, the surviving value, bit for bit the uninterrupted run's.
    assert len(killed.metrics.losses) == 12
    assert killed.metrics.losses == plain.metrics.losses
    assert killed.metrics.checkpoint.resumed.step == 7  # the third attempt restored the save after step 7
    assert [s.step for s in killed.metrics.checkpoint.saves] == [10]  # the last attempt's own save
    assert job.wasted_progress_s > 0 and job.recovery_s > 0 and job.restore_s > 0


@pytest.mark.parametrize("which", ["plain", "killed"])
def test_the_buckets_add_up_to_the_wall(loop, which):
    record = loop[0] if which == "plain" else loop[1]
    job = record.metrics.job
    assert all((getattr(job, name) or 0.0) >= 0 for name in BUCKETS), job
    assert job.bucket_sum() + job.unattributed_s == pytest.approx(job.wall_s)
    assert abs(job.unattributed_s) < (1.0 if job.wall_s < 50 else 0.02 * job.wall_s)
    assert 0 < job.job_goodput < 1 and job.productive_s > 0 and job.checkpoint_save_s > 0
    assert job.launch_startup_s > 0


def test_the_uninterrupted_point_ran_once_and_holds_the_launchs_start_up(loop):
    plain, killed, _ = loop
    assert (plain.metrics.job.attempts, plain.metrics.job.steps_redone, plain.metrics.job.lost_s) == (1, 0, 0.0)
    # The launch's first point carries its start-up; the later point starts at its own start.
    assert plain.metrics.job.program_startup_s == pytest.approx(plain.metrics.job.launch_startup_s)
    assert killed.metrics.job.launch_startup_s == pytest.approx(plain.metrics.job.launch_startup_s)
