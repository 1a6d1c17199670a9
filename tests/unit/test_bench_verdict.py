"""`make bench`'s verdict (benchmarks/run.py, verdict.py, measuring.py): check's timing rule on CPU and
wall time, a limit of 20 %, one sample per run (a process); this checkout against the baseline's commit
measured in the same sitting, interleaved run by run (A B B A ...), the baseline file's numbers shown
beside; against the file where the commit cannot be measured."""

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


def spread(median: float, n: int = 6) -> list[float]:
    """n samples around `median`, 1 % apart (a quiet machine's spread between processes)."""
    return [median * (1 + 0.01 * (i - n // 2)) for i in range(n)]


def m(run, name: str, cpu: list[float], wall: list[float] | None = None):
    return run.Measured(name, list(wall if wall is not None else cpu), list(cpu))


def compare(run, now, ref, against="commit abc"):
    return run.comparison_rows([now], {ref.name: ref}, against)


def test_a_cpu_slowdown_of_30_percent_fails_and_is_named(run):
    result = compare(run, m(run, "bench_x", spread(5.2), spread(5.3)), m(run, "bench_x", spread(4.0), spread(5.0)))
    (row,) = result.rows
    assert row[0] == "bench_x" and row[1:4] == ["3.98", "5.174", "+30.0%"] and row[-1] == "REGRESSION (CPU)"
    assert result.failing == ["bench_x"]
    (line,) = result.failures
    assert line.startswith("bench_x is 30.0% slower than commit abc in CPU time (3.98 s -> 5.174 s, p=0.0011")
    assert line.endswith("limit 20%)")


def test_a_wall_slowdown_beyond_20_percent_fails_at_equal_cpu(run):
    # A wait (a sleep, a lock, an fsync): CPU within 1 %, wall 30 % slower.
    result = compare(run, m(run, "bench_x", spread(4.0), spread(6.5)), m(run, "bench_x", spread(4.0), spread(5.0)))
    assert result.rows[0][5:8] == ["4.975", "6.467", "+30.0%"] and result.rows[0][-1] == "REGRESSION (wall)"
    assert "30.0% slower than commit abc in wall time (4.975 s -> 6.467 s" in result.failures[0]


def test_a_hot_path_is_judged_by_cpu_time_only(run):
    result = compare(run, run.Measured("test_hot", [], spread(0.013)), run.Measured("test_hot", [], spread(0.010)))
    assert result.rows[0][5:8] == ["", "", ""] and result.rows[0][-1] == "REGRESSION (CPU)"


def test_the_same_speed_passes_and_a_slowdown_without_significance_warns(run):
    same = compare(run, m(run, "bench_x", spread(4.08)), m(run, "bench_x", spread(4.0)))
    assert same.failures == [] and same.warnings == [] and same.rows[0][-1] == "ok"
    # 30 % slower in the medians, but one wild run of each side leaves the U test short of 0.05.
    noisy = m(run, "bench_x", [4.0, 4.04, 4.08, 4.12, 4.16, 9.0])
    result = compare(run, m(run, "bench_x", [5.2, 5.25, 5.3, 3.9, 3.95, 9.5]), noisy)
    assert result.failures == [] and result.failing == []
    (line,) = result.warnings
    assert line.startswith("bench_x: inconclusive: CPU and wall time more than 20% slower than commit abc but not")
    assert line.endswith("; measure it again (--only bench_x)")


def test_each_test_of_a_sitting_is_judged_at_alpha_over_their_number(run):
    # A hot path 30 % "slower" at p=0.015 (its interval just above 1): judged alone (one test), a
    # regression; among 13 tests (4 scripts on two clocks, 5 hot paths), each at 0.05/13 = 0.0038, a
    # warning (identical code read +37.1 % at p=0.047 in one such sitting, docs/development.md).
    ref = run.Measured("test_hot", [], [0.90, 1.00, 1.10, 1.20, 1.30, 1.40])
    now = run.Measured("test_hot", [], [1.20, 1.30, 1.45, 1.55, 1.60, 1.80])
    alone = run.comparison_rows([now], {"test_hot": ref}, "commit abc")
    assert (alone.tests, alone.alpha, alone.failing) == (1, 0.05, ["test_hot"])
    assert "p=0.015 CI[1.019,1.605] n=6/6" in alone.failures[0]
    scripts = [m(run, f"bench_{i}", spread(4.0)) for i in range(4)]
    hot = [run.Measured(f"test_{i}", [], spread(0.01)) for i in range(4)]
    sitting = run.comparison_rows(
        [*scripts, *hot, now],
        {x.name: x for x in [*scripts, *hot, ref]},
        "commit abc",
    )
    assert sitting.tests == 13 and sitting.alpha == pytest.approx(0.05 / 13)
    assert sitting.significance == "p < 0.0038 each (0.05 over 13 test(s): benchmarks x clocks)"
    assert sitting.failing == [] and [w.split(":")[0] for w in sitting.warnings] == ["test_hot"]
    # A slowdown every run shows (p=0.0011, the least p of 6 runs a side) still fails among 13.
    slowed = run.comparison_rows(
        [*scripts[1:], m(run, "bench_0", spread(5.2)), *hot], {x.name: x for x in [*scripts, *hot]}, "commit abc"
    )
    assert slowed.tests == 12 and slowed.failing == ["bench_0"]


def test_two_checkouts_take_turns_abba_run_by_run(run):
    import measuring

    assert measuring.order(["then", "now"], 6) == ["then", "now", "now", "then"] * 3
    assert measuring.order(["then", "now"], 5) == [*["then", "now", "now", "then"] * 2, "then", "now"]
    assert measuring.order(["now"], 3) == ["now"] * 3


def test_a_benchmark_that_did_not_run_at_the_commit_fails_and_a_new_one_is_shown(run):
    old = [run.Measured("bench_x", failure="exit 1")]
    new = [m(run, "bench_x", spread(4.0)), run.Measured("test_new", [], [1.0] * 6)]
    result = run.judged_now("commit abc", old, new)
    assert [row[-1] for row in result.rows] == ["new (not in commit abc)"]
    assert result.failures == ["bench_x did not run: not at commit abc, so nothing judges it: exit 1"]
    assert result.failing == ["bench_x"]


def test_a_failed_pytest_process_fails_every_hot_path_of_its_side(run):
    found = {"report_10k": m(run, "report_10k", [1.0]), "test_a": run.Measured("test_a", [], [0.1])}
    found["pytest"] = run.Measured("pytest", failure="pytest exit 2")
    flat = run.flatten(found, ["report_10k", "test_a", "test_b"])
    assert sorted((x.name, x.failure) for x in flat) == [
        ("report_10k", ""),
        ("test_a", "pytest exit 2"),
        ("test_b", "pytest exit 2"),
    ]
    assert [x.name for x in run.flatten({"pytest": run.Measured("pytest", failure="exit 2")}, [])] == ["pytest"]


def test_a_baseline_taken_with_uncommitted_changes_is_not_measured_again(run, tmp_path):
    why = run.against_commit({"store_add_10k"}, {"commit": "0123456789ab.dirty", "benchmarks": {}}, 6, tmp_path)
    assert why == (
        "the baseline was taken from a checkout with uncommitted changes (0123456789ab.dirty), "
        "so its commit is not the code it measured"
    )


def _baseline_file(tmp_path: Path, cpu: float) -> Path:
    data = {"version": 3, "taken_at": "t", "commit": "0123456789ab", "machine": {"cpus": 2},
            "benchmarks": {"store_add_10k": {"cpu_s": spread(cpu), "wall_s": spread(cpu)}}}  # fmt: skip
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(data))
    return path


def test_main_gives_the_verdict_of_the_same_sitting_and_shows_the_file(run, tmp_path, monkeypatch, capsys):
    # The file says 2.0 s (a faster sitting); now the commit takes 3.0 s and this checkout 3.9 s (+30 %).
    old, new = [m(run, "store_add_10k", spread(3.0))], [m(run, "store_add_10k", spread(3.9))]
    monkeypatch.setattr(run, "against_commit", lambda *args: ("commit 0123456789ab", old, new))
    code = run.main(["--only", "store_add_10k", "--baseline", str(_baseline_file(tmp_path, 2.0))])
    out = capsys.readouterr().out
    assert code == 1
    assert "bench: against commit 0123456789ab, measured in this sitting: the verdict" in out
    assert "bench: FAIL: store_add_10k is 30.0% slower than commit 0123456789ab in CPU time (2.985 s -> 3.88 s" in out
    assert out.splitlines()[-1] == "bench: FAIL (1 benchmark(s), 1 failing)"  # one benchmark, on two clocks


def test_main_judges_against_the_file_where_the_commit_cannot_be_measured(run, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "against_commit", lambda *args: "commit 0123456789ab is not here")
    monkeypatch.setattr(
        run,
        "measure",
        lambda names, checkouts, runs, folder: {"now": {"store_add_10k": m(run, "store_add_10k", spread(2.02))}},
    )
    code = run.main(["--only", "store_add_10k", "--baseline", str(_baseline_file(tmp_path, 2.0))])
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "bench: the verdict is against the file's numbers (cannot measure the baseline's commit in this "
        "sitting: commit 0123456789ab is not here): it carries the machine's drift between sittings"
    ) in out
    assert out.splitlines()[-1] == "bench: PASS (1 benchmark(s), 0 failing)"


def test_bad_input_is_refused_before_anything_runs(run, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "measure", lambda *args: pytest.fail("measured before refusing"))
    with pytest.raises(SystemExit) as exit_:
        run.main(["--runs", "3"])
    assert exit_.value.code == 2
    assert "--runs: must be >= 5 (fewer cannot show a significant change), got 3" in capsys.readouterr().err
    monkeypatch.setattr(run, "modified", lambda: ["bench/analysis/stats.py"])
    with pytest.raises(SystemExit) as exit_:
        run.main(["--update-baseline"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "error: --update-baseline: uncommitted changes to bench/analysis/stats.py; commit them first "
        "(make bench measures the baseline's commit again)\n"
    )
    monkeypatch.setattr(run, "modified", lambda: [])
    with pytest.raises(SystemExit):
        run.main(["--update-baseline", "--only", "check_10k"])
    assert "--only would write a baseline of some benchmarks; take it of all" in capsys.readouterr().err


def test_a_baseline_of_an_earlier_version_is_refused(run, tmp_path, capsys):
    old = tmp_path / "baseline.json"
    old.write_text(json.dumps({"version": 2, "benchmarks": {}}))
    with pytest.raises(SystemExit) as exit_:
        run.read_baseline(old)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == f"error: --baseline: {old}: version 2; allowed: 3 (take one with `make bench-baseline`)\n"
