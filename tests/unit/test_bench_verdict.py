"""`make bench`'s verdict (benchmarks/run.py): a benchmark more than 20 % slower than the baseline
file, in CPU or wall time, by check's timing rule, is flagged; a flag fails only when the baseline's
commit, measured again in the same sitting, confirms it (or when that commit cannot be measured)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def run():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import run as harness

        yield harness
    finally:
        sys.path.remove(str(BENCHMARKS))


def spread(median: float, n: int = 5) -> list[float]:
    """n samples around `median`, 1 % apart (a quiet machine's spread)."""
    return [median * (1 + 0.01 * (i - n // 2)) for i in range(n)]


def reference(cpu: list[float], wall: list[float]) -> dict:
    return {"bench_x": {"cpu_s": cpu, "wall_s": wall}}


def test_a_cpu_slowdown_of_30_percent_is_flagged_and_named(run):
    measured = [run.Measured("bench_x", wall_s=spread(5.3), cpu_s=spread(5.2))]
    result = run.comparison_rows(measured, reference(spread(4.0), spread(5.0)))
    (row,) = result.rows
    assert row[0] == "bench_x" and row[1:4] == ["4", "5.2", "+30.0%"] and row[-1] == "REGRESSION (CPU)"
    (line,) = result.failures
    assert line.startswith("bench_x is 30.0% slower than the baseline in CPU time (4 s -> 5.2 s, p=")
    assert line.endswith("limit 20%)")


def test_a_wall_slowdown_beyond_20_percent_is_flagged_at_equal_cpu(run):
    # A wait (a sleep, a lock, an fsync): CPU within 1 %, wall 30 % slower.
    measured = [run.Measured("bench_x", wall_s=spread(6.5), cpu_s=spread(4.0))]
    result = run.comparison_rows(measured, reference(spread(4.0), spread(5.0)))
    assert result.rows[0][5:8] == ["5", "6.5", "+30.0%"] and result.rows[0][-1] == "REGRESSION (wall)"
    assert list(result.regressed) == ["bench_x"]
    assert "30.0% slower than the baseline in wall time (5 s -> 6.5 s" in result.failures[0]


def test_a_pytest_hot_path_is_judged_by_cpu_time_only(run):
    measured = [run.Measured("bench_x", wall_s=[], cpu_s=spread(0.013, 40))]
    result = run.comparison_rows(measured, reference(spread(0.010, 40), []))
    assert result.rows[0][5:8] == ["", "", ""] and result.rows[0][-1] == "REGRESSION (CPU)"
    assert "30.0% slower than the baseline in CPU time" in result.failures[0]


def test_a_benchmark_that_did_not_run_fails_and_one_the_baseline_lacks_is_new(run):
    measured = [run.Measured("bench_x", failure="exit 1, 0 of 5 run line(s)"), run.Measured("bench_y", [1.0], [1.0])]
    result = run.comparison_rows(measured, reference(spread(4.0), spread(5.0)))
    assert [row[-1] for row in result.rows] == ["FAILED TO RUN", "new (not in the baseline)"]
    assert result.failures == ["bench_x failed to run: exit 1, 0 of 5 run line(s)"]


def flagged(run):
    """A benchmark 30 % slower than the baseline file (CPU 4.0 -> 5.2 s), flagged by the first step."""
    return run.comparison_rows([run.Measured("bench_x", spread(5.3), spread(5.2))], reference(spread(4.0), spread(5.0)))


def judged_now(run, commit_cpu: list[float], commit_wall: list[float], now=None):
    """The second step: this checkout's samples (by default as slow as in the first) against the
    baseline's commit measured in the same sitting."""
    now = now or run.Measured("bench_x", spread(5.3, 6), spread(5.2, 6))
    return run.comparison_rows([now], reference(commit_cpu, commit_wall), "commit abc")


def test_a_flag_the_same_sitting_confirms_fails(run):
    failures, notes = run.verdict(flagged(run), judged_now(run, spread(4.06, 6), spread(5.1, 6)))
    assert notes == []
    (line,) = failures
    assert line.startswith("bench_x is 28.1% slower than commit abc in CPU time (4.04 s -> 5.174 s, p=0.0011")


def test_a_flag_the_old_code_shows_too_is_drift_and_passes(run):
    # The machine is slower in this sitting: the baseline's commit measures as slow as this checkout.
    failures, notes = run.verdict(flagged(run), judged_now(run, spread(5.1, 6), spread(5.25, 6)))
    assert failures == []
    (note,) = notes
    assert note.startswith("not confirmed: bench_x: +2.0% in CPU time (p=")
    assert "+1.0% in wall time" in note and note.endswith(": the flag was the machine's drift")


def test_a_slowdown_the_second_step_cannot_call_significant_still_fails(run):
    # 30 % slower in the medians, but one slow run of the old code leaves the U test short of 0.05.
    noisy = [4.0, 4.04, 4.08, 4.12, 4.16, 9.0]
    second = judged_now(run, noisy, noisy, run.Measured("bench_x", spread(5.3, 6), [5.2, 5.25, 5.3, 3.9, 3.95, 9.5]))
    assert "bench_x" not in second.regressed and "bench_x" in second.inconclusive
    failures, notes = run.verdict(flagged(run), second)
    assert notes == []
    (line,) = failures
    assert line.startswith("bench_x: inconclusive: CPU and wall time more than 20% slower than commit abc but not")
    assert line.endswith("; the flag stands (run it again)")


def test_a_flag_stands_when_the_commit_cannot_be_measured(run):
    failures, notes = run.verdict(flagged(run), "commit 0123abc is not in this repository")
    assert len(failures) == 1 and failures[0].startswith("bench_x is 30.0% slower than the baseline")
    assert notes == [
        "cannot measure the baseline's commit in this sitting: commit 0123abc is not in this repository; "
        "the flags stand"
    ]


def test_a_baseline_taken_with_uncommitted_changes_is_not_confirmed(run):
    why = run.confirm(["bench_x"], {"commit": "0123456789ab.dirty"}, print)
    assert why == (
        "the baseline was taken from a checkout with uncommitted changes (0123456789ab.dirty), "
        "so its commit is not the code it measured"
    )


def test_a_baseline_is_taken_from_a_committed_checkout_only(run, monkeypatch, capsys):
    monkeypatch.setattr(run, "modified", lambda: ["bench/analysis/stats.py"])
    monkeypatch.setattr(run, "measure", lambda *args: pytest.fail("measured before refusing"))
    with pytest.raises(SystemExit) as exit_:
        run.main(["--update-baseline"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "error: --update-baseline: uncommitted changes to bench/analysis/stats.py; commit them first "
        "(a flag is confirmed against the baseline's commit, measured again)\n"
    )


def test_the_two_checkouts_alternate_abba_in_blocks_of_three(run):
    then, now = run.Checkout(Path("/old"), "commit abc"), run.Checkout(Path("/new"), "this checkout")
    calls = []

    def measure_in(groups, runs, smoke, checkout):
        calls.append((checkout.label, runs, sorted(groups)))
        seconds = 1.0 if checkout is then else 2.0
        tests = [run.Measured("test_hot", [], [seconds / 100] * 3), run.Measured("test_other", [], [9.0])]
        return [run.Measured("report_10k", [seconds] * runs, [seconds] * runs), *tests]

    old, new = run.measure_alternating(["report_10k", "test_hot"], then, now, measure_in)
    labels = ["commit abc", "this checkout", "this checkout", "commit abc"]
    assert calls == [(label, 3, ["pytest", "report_10k"]) for label in labels]
    assert old["report_10k"].cpu_s == [1.0] * 6 and new["report_10k"].wall_s == [2.0] * 6
    assert old["test_hot"].cpu_s == [0.01] * 6 and set(new) == {"report_10k", "test_hot"}


def test_a_group_that_fails_in_one_checkout_marks_its_benchmarks_failed(run):
    then, now = run.Checkout(Path("/old"), "commit abc"), run.Checkout(Path("/new"), "this checkout")

    def measure_in(groups, runs, smoke, checkout):
        if checkout is then:
            return [run.Measured("pytest", failure="pytest exit 2")]
        return [run.Measured("test_hot", [], [0.02] * 3)]

    old, new = run.measure_alternating(["test_hot"], then, now, measure_in)
    assert old["test_hot"].failure == "pytest exit 2" and new["test_hot"].failure == ""


def test_a_baseline_of_the_wall_only_version_is_refused(run, tmp_path, capsys):
    old = tmp_path / "baseline.json"
    old.write_text(json.dumps({"version": 1, "benchmarks": {}}))
    with pytest.raises(SystemExit) as exit_:
        run.read_baseline(old)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == f"error: --baseline: {old}: version 1; allowed: 2 (take one with `make bench-baseline`)\n"
