"""Whole-job accounting and restarts without ranks: the accounting of journals built by hand (every
expected value is known), the kill knobs' bad input, and each launcher's restart settings as rendered.

The real failure loop (2 gloo ranks, SIGKILL, torchrun restarts) is tests/distributed/test_job_restarts.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from bench_cli import in_process

from bench.config.compose import spec_from_fields
from bench.config.problems import ConfigError
from bench.run.execute import prepare_launch
from bench.run.launch import get_launcher
from bench.run.launch.k8s_manifest import KubeflowOptions, crd_schema, render_pytorchjob, validate_pytorchjob
from bench.run.launch.local import torchrun_command
from bench.run.launch.slurm import SlurmOptions, batch_script, sbatch_command, srun_line
from bench.schema.job import BUCKETS, JobMetrics
from bench.schema.job_accounting import (
    INIT_DONE,
    LOOP_END,
    POINT_START,
    PROCESS_START,
    RESTORE_DONE,
    AttemptLog,
    KillNote,
    account,
    surviving_losses,
)
from bench.schema.protocol import LaunchFile

CRD = Path(__file__).resolve().parents[1] / "fixtures" / "kubeflow" / "kubeflow.org_pytorchjobs.yaml"

STEP_S, SAVE_S = 1.0, 0.5


def attempt(number: int, start_step: int, steps: range, saves: list[int], t0: float, **extra) -> AttemptLog:
    """An attempt whose process starts at t0: 2 s to its point's start, 3 s of initialization, 1 s of
    restore (0 without one), its first step 2 s longer than the rest, saves of SAVE_S."""
    log = AttemptLog(number, 0, start_step, **extra)
    marks = {PROCESS_START: t0, POINT_START: t0 + 2, INIT_DONE: t0 + 5, RESTORE_DONE: t0 + 5 + (start_step > 0)}
    log.marks.update(marks)
    now = marks[RESTORE_DONE]
    for index, step in enumerate(steps):
        seconds = STEP_S + (2.0 if index == 0 else 0.0)
        log.steps.append((step, seconds))
        log.losses[step] = 10.0 - step / 100 + number  # a redone step's value differs: the later one survives
        now += seconds
        if step in saves:
            log.saves[step] = SAVE_S
            now += SAVE_S
            log.journaled_at = now
    log.marks[LOOP_END] = now
    return log


def issue_loop() -> tuple[list[AttemptLog], dict[int, KillNote], float]:
    """12 steps, 2 warm-up, saves after steps 4, 7 and 10, kills at step 6 (attempt 0) and 10 (attempt 1):
    attempt 0 runs 0..5 (its journal ends at the save after 4), attempt 1 resumes at 5 and runs 5..9,
    attempt 2 resumes at 8 and finishes."""
    first = attempt(0, 0, range(6), [4], t0=100.0, wall_start=90.0)
    kill0 = first.journaled_at + STEP_S  # step 5 ran, then the kill at the start of step 6
    second = attempt(1, 5, range(5, 10), [7], t0=kill0 + 4.0)
    kill1 = second.journaled_at + 2 * STEP_S  # steps 8 and 9 ran
    third = attempt(2, 8, range(8, 12), [10], t0=kill1 + 4.0)
    for log, last_save in ((first, 4), (second, 7)):  # what a killed attempt journaled: up to its last save
        log.steps = [(step, seconds) for step, seconds in log.steps if step <= last_save]
        log.losses = {step: loss for step, loss in log.losses.items() if step <= last_save}
    kills = {0: KillNote(0, 6, 1, kill0), 1: KillNote(1, 10, 1, kill1)}
    return [first, second, third], kills, third.marks[LOOP_END] + 1.5


def test_the_issues_failure_loop_adds_up_bucket_by_bucket():
    logs, kills, end = issue_loop()
    job = account(logs, kills, end, warmup_steps=2, launch_startup_s=12.0)
    assert (job.attempts, job.steps_redone) == (3, 3)
    assert job.wall_s == pytest.approx(end - 90.0)
    assert job.program_startup_s == pytest.approx(12.0 + 2.0 + 2.0)  # the launch's, then each restart's
    assert job.initialization_s == pytest.approx(9.0) and job.restore_s == pytest.approx(2.0)
    assert job.recovery_s == pytest.approx(8.0)
    # Lost: step 5 (attempt 0), steps 8 and 9 (attempt 1); each of them one STEP_S, none an attempt's first.
    assert job.wasted_progress_s == pytest.approx(3 * STEP_S)
    assert job.checkpoint_save_s == pytest.approx(3 * SAVE_S)
    # 12 surviving steps; each attempt's first two (the warm-up count) may carry start-up: 2 s over the median.
    assert job.step_startup_s == pytest.approx(3 * 2.0)
    assert job.productive_s == pytest.approx(12 * STEP_S)
    assert job.finalization_s == pytest.approx(1.5)
    assert job.profiling_s is None  # no profiled steps measured
    assert abs(job.unattributed_s) < 1e-9
    assert job.bucket_sum() + job.unattributed_s == pytest.approx(job.wall_s)
    assert job.job_goodput == pytest.approx(12 * STEP_S / job.wall_s)
    assert job.startup_s == pytest.approx(16.0 + 9.0 + 6.0) and job.lost_s == pytest.approx(11.0)
    assert job.launch_startup_s == 12.0


def test_a_loss_without_a_kill_note_ends_at_the_last_journal():
    logs, kills, end = issue_loop()
    job = account(logs, {1: kills[1]}, end, warmup_steps=2)
    # Attempt 0's failure is known only by its journal: step 5 and the time to its kill read as recovery.
    assert job.wasted_progress_s == pytest.approx(2 * STEP_S)
    assert job.recovery_s == pytest.approx(8.0 + STEP_S)
    assert job.steps_redone == 2  # attempt 0's journal ends at step 4: nothing after it is known
    assert abs(job.unattributed_s) < 1e-9


def test_one_attempt_has_no_lost_time_and_its_marks_cover_the_wall():
    (log,) = [attempt(0, 0, range(8), [4, 7], t0=10.0, wall_start=10.0)]
    job = account([log], {}, log.marks[LOOP_END] + 0.25, warmup_steps=2)
    assert (job.attempts, job.steps_redone, job.wasted_progress_s, job.recovery_s) == (1, 0, 0.0, 0.0)
    assert job.program_startup_s == 2.0 and job.finalization_s == 0.25
    assert job.bucket_sum() == pytest.approx(job.wall_s)
    queued = account([log], {}, log.marks[LOOP_END] + 0.25, warmup_steps=2, queued_s=42.5)
    assert queued.queued_s == 42.5 and queued.wall_s == job.wall_s  # reported apart, not in the wall


def test_the_surviving_losses_are_the_last_attempt_that_ran_each_step():
    logs, _, _ = issue_loop()
    journaled = [AttemptLog.from_json(log.to_json()) for log in logs[:2]]  # as a restarted rank reads them
    losses = surviving_losses(journaled, start_step=8)
    assert losses == [10.0 - s / 100 for s in range(5)] + [11.0 - s / 100 for s in range(5, 8)]
    assert surviving_losses(journaled[1:], start_step=8) is None  # steps 0..4 in no journal: a foreign resume


def test_every_bucket_is_a_field_and_the_record_section_is_optional():
    assert set(BUCKETS) <= set(JobMetrics.model_fields)
    assert JobMetrics(wall_s=1.0).bucket_sum() == 0.0


# -- bad input: one line naming the key, before launch --


def kill_errors(**fields) -> list[str]:
    with pytest.raises(ConfigError) as info:
        spec_from_fields(model="debug", gpus_per_node=2, steps=12, warmup_steps=2, **fields)
    return info.value.lines


def test_kill_knobs_that_could_never_fire_or_never_resume_are_refused():
    sync = {"checkpoint": "sync", "checkpoint_every": 3}
    assert kill_errors(**sync, **{"debug.kill_steps": [6, 6]}) == [
        "debug.kill_steps: must be strictly increasing steps >= 0, got [6, 6]"
    ]
    assert kill_errors(**sync, **{"debug.kill_steps": [6, 12]}) == [
        "debug.kill_steps: 12 is not a step of this point; allowed: 0..11"
    ]
    assert kill_errors(**sync, **{"debug.kill_steps": [6], "debug.kill_rank": 2}) == [
        "debug.kill_rank: 2 is not a rank of this point; allowed: 0..1"
    ]
    assert kill_errors(**{"debug.kill_steps": [6]}) == [
        "debug.kill_steps: a killed point resumes from its latest checkpoint, and train.checkpoint is none; "
        "allowed: sync, async"
    ]
    assert kill_errors(**sync, **{"debug.kill_mtbf_s": 0}) == ["debug.kill_mtbf_s: Input should be greater than 0"]


def test_restarts_must_outlast_the_kills_and_be_a_count(tmp_path):
    spec = spec_from_fields(
        model="debug", gpus_per_node=2, steps=12, warmup_steps=2, checkpoint="sync", checkpoint_every=3,
        **{"debug.kill_steps": [6, 10]},
    )  # fmt: skip
    assert get_launcher("local", {"max_failures": 1}).check_point(spec, tmp_path) == [
        "debug.kill_steps: 2 kill(s) need launcher.max_failures >= 2 restarts, got 1"
    ]
    assert get_launcher("local", {"max_failures": 2}).check_point(spec, tmp_path) == []
    assert get_launcher("slurm", {"max_failures": -1}).check_point(spec, tmp_path) == [
        "launcher.max_failures: must be >= 0, got -1"
    ]
    mtbf = spec.model_copy(update={"debug": spec.debug.model_copy(update={"kill_steps": None, "kill_mtbf_s": 5.0})})
    assert get_launcher("local").check_point(mtbf, tmp_path) == [
        "debug.kill_mtbf_s: kills need restarts; allowed: launcher.max_failures >= 1"
    ]


def test_run_refuses_more_kills_than_restarts_in_one_line_before_launch(tmp_path):
    rc, out, err, records = in_process(
        "run", "model=debug", "gpus_per_node=2", "train.steps=12", "train.warmup_steps=2", "train.checkpoint=sync",
        "train.checkpoint_every=3", "debug.kill_steps=[6,10]", "launcher.max_failures=1",
        f"results_dir={tmp_path}", results=tmp_path,
    )  # fmt: skip
    assert rc == 2 and records == []
    assert "debug.kill_steps: 2 kill(s) need launcher.max_failures >= 2 restarts, got 1" in err
    assert "Traceback" not in err + out


# -- each launcher's restart settings, as rendered --


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def container_of(job: dict) -> dict:
    (box,) = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return box


def request(tmp_path, *overrides):
    from bench.config.compose import load_grid

    (point,) = load_grid(list(overrides) or ["model=debug"])
    return prepare_launch([point.spec], tmp_path, max_failures=2)


def test_local_agents_restart_with_a_store_per_attempt(tmp_path):
    req = request(tmp_path)
    assert LaunchFile.read(req.launch_file).max_failures == 2  # the ranks journal their attempts
    assert flag(torchrun_command(req, 29500, "x", 2), "--max-restarts") == "2"
    assert flag(torchrun_command(req, 29500, "x"), "--max-restarts") == "0"


def test_slurm_requeues_a_lost_node_only_with_restarts(tmp_path):
    req = request(tmp_path, "model=debug", "launcher=slurm")
    script = tmp_path / "job.sh"
    with_restarts, without = SlurmOptions(max_failures=2), SlurmOptions()
    assert "--requeue" in sbatch_command(req, with_restarts, script)
    assert "--no-requeue" in sbatch_command(req, without, script)
    assert "--requeue" not in sbatch_command(req, without, script)
    assert "--max-restarts 2 " in srun_line(req, with_restarts) and "--max-restarts 0 " in srun_line(req, without)
    assert "export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in batch_script(req, with_restarts)
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in batch_script(req, without)
    assert "export FSDP_BENCH_LAUNCHED_AT=$(date +%s.%N)" in batch_script(req, without)


def test_slurm_exports_the_time_queued_from_the_submission_to_the_job_running(tmp_path):
    req = request(tmp_path, "model=debug", "launcher=slurm")
    script = batch_script(req, SlurmOptions(), submitted_at=1765000000.25)
    line = next(line for line in script.splitlines() if line.startswith("export FSDP_BENCH_QUEUED_S="))
    assert line == (
        'export FSDP_BENCH_QUEUED_S=$(awk -v now="$FSDP_BENCH_LAUNCHED_AT" '
        "'BEGIN { printf \"%.3f\", now - 1765000000.25 }')"
    )
    # After the wall's start, which it is measured to.
    assert script.index("export FSDP_BENCH_LAUNCHED_AT=") < script.index(line)
    assert "FSDP_BENCH_QUEUED_S" not in batch_script(req, SlurmOptions())  # not known: null in the record


def test_the_pytorchjob_restarts_pods_and_agents_and_the_crd_accepts_it(tmp_path):
    schema = crd_schema(yaml.load(CRD.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    req = request(tmp_path, "experiment=eks_llama2", "model=llama2-7b", "nodes=2", "strategy=full_shard")
    once, thrice = render_pytorchjob(req, KubeflowOptions()), render_pytorchjob(req, KubeflowOptions(max_failures=2))
    for job in (once, thrice):
        assert validate_pytorchjob(job, schema) == []
    assert once["spec"]["elasticPolicy"]["maxRestarts"] == 0 and once["spec"]["runPolicy"]["backoffLimit"] == 0
    assert once["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    assert thrice["spec"]["elasticPolicy"]["maxRestarts"] == 2 and thrice["spec"]["runPolicy"]["backoffLimit"] == 2
    assert thrice["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    assert flag(container_of(thrice)["command"], "--max-restarts") == "2"
    env = {e["name"]: e.get("value") for e in container_of(thrice)["env"]}
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    # The deadline covers every attempt.
    deadline = thrice["spec"]["runPolicy"]["activeDeadlineSeconds"]
    assert math.isclose(deadline, 3 * once["spec"]["runPolicy"]["activeDeadlineSeconds"], abs_tol=3)


def test_an_attempt_killed_before_its_first_save_and_one_lost_in_initialization():
    """Attempt 0 dies at step 3 before any save (its journal: its phases only), attempt 1 is lost during
    initialization without a note (its journal: its start), attempt 2 starts again at 0 and finishes."""
    first = attempt(0, 0, range(3), [], t0=0.0, wall_start=0.0)
    first.steps, first.losses = [], {}  # nothing journaled after the restore
    kill0 = first.marks[RESTORE_DONE] + 3 * STEP_S + 2.0
    second = AttemptLog(1, 0, 0, marks={PROCESS_START: kill0 + 1.0, POINT_START: kill0 + 3.0})
    third = attempt(2, 0, range(4), [3], t0=kill0 + 10.0)
    job = account([first, second, third], {0: KillNote(0, 3, 1, kill0)}, third.marks[LOOP_END], warmup_steps=1)
    assert (job.attempts, job.steps_redone) == (3, 3)
    assert job.wasted_progress_s == pytest.approx(3 * STEP_S + 2.0)  # the three steps, their first one's excess
    assert job.recovery_s == pytest.approx(1.0 + 7.0)  # attempt 1 ends at its start: the rest is recovery
    assert job.initialization_s == pytest.approx(3.0 + 0.0 + 3.0)
    assert abs(job.unattributed_s) < 1e-9


def test_the_sweeps_overhead_line_splits_the_points_walls():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
    from record_factory import make_record

    from reports.console import sweep_overhead_line

    logs, kills, end = issue_loop()
    record = make_record()
    record.metrics.timed_window_s = 2.0
    assert sweep_overhead_line([record], [record.point_id], 40.0) == "sweep overhead: 40.0 s wall / 2.0 s timed = 20.0x"
    record.metrics.job = account(logs, kills, end, warmup_steps=2, launch_startup_s=12.0)
    assert sweep_overhead_line([record], [record.point_id], 40.0) == (
        "sweep overhead: 40.0 s wall / 2.0 s timed = 20.0x "
        "(points: start-up 31.0 s, saves 1.5 s, lost 11.0 s, productive 12.0 s)"
    )


def test_a_process_start_is_on_the_wall_clock_of_the_other_marks():
    """A restart's recovery is its process start less the kill's time.time(): the start must be on the
    same clock, never after the first thing the process itself timed, nor long before it."""
    import subprocess
    import sys

    code = "import time; t = time.time(); from fsdp_core.job import process_started_at; print(t, process_started_at())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first_timed, started = map(float, out.split())
    assert started <= first_timed + 0.011  # the start's ticks are 10 ms apart
    assert first_timed - started < 5.0  # the interpreter's own start, not a boot-time offset
