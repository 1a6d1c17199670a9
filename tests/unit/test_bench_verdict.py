"""`make bench`'s verdict (benchmarks/run.py): CPU time gates at 20 %, wall time at 50 %, by check's
timing rule; a slower wall time within the between-sittings drift passes, a long wait does not."""

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


def baseline(cpu: list[float], wall: list[float]) -> dict:
    return {"benchmarks": {"bench_x": {"cpu_s": cpu, "wall_s": wall}}}


def test_a_cpu_slowdown_of_30_percent_fails_and_is_named(run):
    measured = [run.Measured("bench_x", wall_s=spread(5.3), cpu_s=spread(5.2))]
    rows, failures = run.comparison_rows(measured, baseline(spread(4.0), spread(5.0)))
    (row,) = rows
    assert row[0] == "bench_x" and row[1:4] == ["4", "5.2", "+30.0%"] and row[-1] == "REGRESSION (CPU)"
    (line,) = failures
    assert line.startswith("bench_x is 30.0% slower than the baseline in CPU time (4 s -> 5.2 s, p=")
    assert line.endswith("limit 20%)")


def test_wall_drift_below_the_wall_limit_passes_at_equal_cpu(run):
    # The same code in another sitting: CPU within 1 %, wall 25 % slower (measured drift on the VM).
    measured = [run.Measured("bench_x", wall_s=spread(6.25), cpu_s=spread(4.0))]
    rows, failures = run.comparison_rows(measured, baseline(spread(4.0), spread(5.0)))
    assert failures == []
    assert rows[0][5:8] == ["5", "6.25", "+25.0%"] and rows[0][-1] == "ok"


def test_a_long_wait_fails_by_wall_time_alone(run):
    # A sleep: CPU unchanged, wall 60 % slower, beyond WALL_SLOWDOWN_PCT.
    measured = [run.Measured("bench_x", wall_s=spread(8.0), cpu_s=spread(4.0))]
    rows, failures = run.comparison_rows(measured, baseline(spread(4.0), spread(5.0)))
    assert rows[0][-1] == "REGRESSION (wall)"
    (line,) = failures
    assert "60.0% slower than the baseline in wall time (5 s -> 8 s" in line and line.endswith("limit 50%)")


def test_a_pytest_hot_path_is_judged_by_cpu_time_only(run):
    measured = [run.Measured("bench_x", wall_s=[], cpu_s=spread(0.013, 40))]
    rows, failures = run.comparison_rows(measured, baseline(spread(0.010, 40), []))
    assert rows[0][5:8] == ["", "", ""] and rows[0][-1] == "REGRESSION (CPU)"
    assert "30.0% slower than the baseline in CPU time" in failures[0]


def test_a_baseline_of_the_wall_only_version_is_refused(run, tmp_path, capsys):
    old = tmp_path / "baseline.json"
    old.write_text(json.dumps({"version": 1, "benchmarks": {}}))
    with pytest.raises(SystemExit) as exit_:
        run.read_baseline(old)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == f"error: --baseline: {old}: version 1; allowed: 2 (take one with `make bench-baseline`)\n"
