"""The deadline a launcher's watch gives the point running inside a launch (bench/run/launch/base.py
PointWatch), read from the files the ranks leave: nothing started, a point running, every point done."""

from __future__ import annotations

import os
import time

from bench.config.compose import spec_from_fields
from bench.run.launch.base import LaunchRequest, PointWatch
from bench.schema.protocol import RESULT_FILE, STARTED_MARK

GRACE_S = 120.0


def watch(tmp_path, points: int = 2) -> tuple[PointWatch, list]:
    spec = spec_from_fields(model="debug")
    spec = spec.model_copy(update={"sweep": spec.sweep.model_copy(update={"point_timeout_s": 60.0})})
    dirs = [tmp_path / f"p{i}" for i in range(points)]
    for d in dirs:
        d.mkdir()
    request = LaunchRequest(points=[spec] * points, point_dirs=dirs, launch_file=tmp_path / "l", work_dir=tmp_path)
    return PointWatch(request, startup_grace_s=GRACE_S), dirs


def touch(path, at: float) -> None:
    path.write_text("x")
    os.utime(path, (at, at))


def test_a_running_point_has_its_timeout_from_its_start_mark(tmp_path):
    w, dirs = watch(tmp_path)
    started = time.time() - 10
    touch(dirs[0] / STARTED_MARK, started)
    assert w.deadline() == started + 60


def test_the_next_point_has_start_up_and_its_timeout_from_the_previous_result(tmp_path):
    w, dirs = watch(tmp_path)
    done = time.time() - 5
    touch(dirs[0] / RESULT_FILE, done)
    assert w.deadline() == done + GRACE_S + 60


def test_a_launch_longer_than_the_grace_is_not_cancelled_as_its_last_result_lands(tmp_path):
    """Once every point is done, the ranks' shutdown has the grace from the last result: a launch that
    began longer ago than the grace (a Slurm job of several points, or one on a loaded host) is not
    expired the moment its last record is written (it once was: the job was cancelled at its end)."""
    w, dirs = watch(tmp_path)
    w.launched_at = time.time() - 2 * GRACE_S
    last = time.time() - 1
    touch(dirs[0] / RESULT_FILE, last - 30)
    touch(dirs[1] / RESULT_FILE, last)
    assert w.current() is None
    assert w.deadline() == last + GRACE_S and not w.expired()
    for d in dirs:  # a shutdown that hangs past the grace
        touch(d / RESULT_FILE, time.time() - GRACE_S - 1)
    assert w.expired()
