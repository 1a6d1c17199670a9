"""history's page drawn in the process the command starts early (reports/history/drawing.py),
its figures on forked workers (draw.py), against the page drawn serially in this process: the same
files, byte for byte (apart from the page's "Generated" minute). In tests/e2e: it forks processes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "records"))
from record_factory import WIGGLE, make_record, night  # noqa: E402

from bench.analysis.history.analyse import analyse  # noqa: E402
from bench.analysis.history.series import build_series  # noqa: E402

pytestmark = pytest.mark.timeout(300)

STRATEGIES = ("full_shard", "no_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2")


def _history_series():
    """Five series of 14 runs, a step at run 9 in every other one."""
    records = []
    for number, strategy in enumerate(STRATEGIES):
        base = make_record(tokens_per_s=1000.0, strategy=strategy)
        for i in range(14):
            factor = 0.75 if number % 2 == 0 and i >= 9 else 1.0
            records.append(night(i, 1000.0 * WIGGLE[i % len(WIGGLE)] * factor, record=base))
    series = build_series(records, "tokens_per_s")
    assert len(series) == len(STRATEGIES)
    return series


def _history():
    """Five plots (one per series), so the figures go to workers."""
    return analyse(_history_series(), metric="tokens_per_s", window=6, detector="apache-otava")


def _files(folder: Path) -> dict[str, bytes]:
    files = {path.name: path.read_bytes() for path in folder.iterdir()}
    files["history.html"] = re.sub(rb"Generated [^<]* by", b"Generated (time) by", files["history.html"])
    return files


def test_the_drawing_process_writes_the_serial_page_byte_for_byte(tmp_path, monkeypatch):
    import reports.history.draw as draw
    from bench.analysis.forking import can_fork
    from reports.history.drawing import drawing_process
    from reports.history.page import write_history

    if not can_fork():
        pytest.skip("fork is not safe in this process (another thread runs): the page is drawn serially")
    history = _history()
    with drawing_process() as drawing:
        assert drawing is not None
        write_history(history, tmp_path / "early", store="s.sqlite", command="fsdp-bench history", drawing=drawing)
    monkeypatch.setattr(draw, "PARALLEL_MIN_PLOTS", 10**6)  # the reference: every figure drawn here, in order
    write_history(history, tmp_path / "serial", store="s.sqlite", command="fsdp-bench history")
    early, serial = _files(tmp_path / "early"), _files(tmp_path / "serial")
    assert sorted(early) == ["history.html", "history.xml", *(f"series{n:03d}.png" for n in range(1, 6)), "summary.md"]
    assert early == serial
    assert b"FAIL: 3 new regression(s) in the last 6 run(s)" in early["summary.md"]


def test_the_early_process_finds_the_change_points_of_this_process_in_two_halves(monkeypatch):
    """The early process's detector and its second detector (a forking.Worker: the second half of the
    series) give what detect_each gives here, in order; with one CPU, and for a second batch, the early
    process finds all."""
    import bench.analysis.forking as forking
    from bench.analysis.history.detect import detect_each
    from reports.history.drawing import drawing_process

    if not forking.can_fork():
        pytest.skip("fork is not safe in this process (another thread runs)")
    values_of = [s.values for s in _history_series()] * 3  # 15 series: a step in 9 of them
    here = detect_each(values_of)
    assert sorted(len(found) for found in here) == [0] * 6 + [1] * 9
    assert [d.index for found in here for d in found] == [9] * 9
    for cpus in (2, 1):
        monkeypatch.setattr("reports.history.drawing.cpus", lambda n=cpus: n)
        with drawing_process() as drawing:
            assert drawing is not None
            assert drawing.ask_detect(values_of)() == here
            assert drawing.ask_detect(values_of[:4])() == here[:4]  # a second batch: the early process alone


def test_a_second_detector_that_died_has_its_half_found_here():
    """A second detector killed before it is asked (an OOM kill, a signal): its half of the series is
    found in the asking process, so the change points are detect_each's, as with one process."""
    import os
    import signal

    from bench.analysis.forking import Worker, can_fork
    from bench.analysis.history.detect import detect_each
    from reports.history.drawing import detect_in_two

    if not can_fork():
        pytest.skip("fork is not safe in this process (another thread runs)")
    values_of = [s.values for s in _history_series()] * 3
    helper = Worker.start(iter, ())  # no first task, as the early process starts it
    assert helper.running
    os.kill(helper.pid, signal.SIGKILL)
    assert detect_in_two(helper, values_of) == detect_each(values_of)
    assert not helper.running  # reaped
