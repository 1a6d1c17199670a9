"""A/B helpers: command prefixes, the alternating schedule, and the B/A summary (bench.analysis.check.abtest)."""

from __future__ import annotations

import sys

import pytest

from bench.analysis.check.abtest import summarize
from bench.analysis.check.compare import timing_verdict
from bench.analysis.check.points import points_from_records
from bench.analysis.check.synthetic import make_record, step_times
from bench.analysis.check.thresholds import Threshold
from bench.analysis.check.timings import compare_timing_metric
from bench.run.ab import build_command, schedule
from reports.check.ab import ab_table

PY = [sys.executable, "-m", "bench"]


@pytest.mark.parametrize(
    ("prefix", "argv"),
    [
        ("", PY),
        ("env FOO=1", ["env", "FOO=1", *PY]),
        ("env -u FOO BAR=2", ["env", "-u", "FOO", "BAR=2", *PY]),
        ("FOO=1 BAR='a b'", ["env", "FOO=1", "BAR=a b", *PY]),
        ("/venvs/torch-next/bin/fsdp-bench", ["/venvs/torch-next/bin/fsdp-bench"]),
        ("env FOO=1 /venvs/b/bin/fsdp-bench", ["env", "FOO=1", "/venvs/b/bin/fsdp-bench"]),
        ("'/path with space/python' -m bench", ["/path with space/python", "-m", "bench"]),
    ],
)
def test_build_command(prefix, argv):
    assert build_command(prefix) == argv


def test_unbalanced_quote_is_a_value_error():
    with pytest.raises(ValueError, match="No closing quotation"):
        build_command("env FOO='1")


def test_schedule_alternates_the_order():
    assert schedule(3) == [(0, "A"), (0, "B"), (1, "B"), (1, "A"), (2, "A"), (2, "B")]


def test_summary_reports_the_ratio_of_medians_with_its_ci():
    a = points_from_records([make_record(step_times(0.05, 0.02, 30, seed=r), spec={"repeat": r}) for r in range(4)])
    b = points_from_records(
        [make_record(step_times(0.0625, 0.02, 30, seed=10 + r), spec={"repeat": r}) for r in range(4)]
    )
    (row,) = summarize(a, b)
    assert (row.rounds_a, row.rounds_b) == (4, 4)
    assert row.ratio == pytest.approx(0.8, abs=0.02)  # 25% longer steps: 1/1.25 of the tokens/s
    assert row.ci_low < row.ratio < row.ci_high < 1.0
    assert row.verdict == "B slower"
    (same,) = summarize(a, a)
    assert (same.ratio, same.verdict) == (1.0, "no significant difference")
    assert same.reason == ""


def rounds(medians: list[float], seed: int):
    """One point run once per round, 100 steps each around the round's median step time."""
    return points_from_records(
        [make_record(step_times(m, 0.01, 100, seed=seed + r), spec={"repeat": r}) for r, m in enumerate(medians)]
    )


def test_a_small_p_beside_an_interval_spanning_1_says_why_it_is_not_significant():
    """B's rounds spread (one 20 % slow): its steps tend to be longer, so the U test over 400 steps a
    side is far below 0.05, while the interval, resampling rounds, spans 1. The verdict is check's
    rule, and the row says why its small p is not significant."""
    a, b = rounds([0.050] * 4, seed=0), rounds([0.049, 0.050, 0.052, 0.060], seed=10)
    (row,) = summarize(a, b)
    assert row.p_value == pytest.approx(3.7e-12, rel=0.01)  # one-sided, in the direction of the change
    assert (round(row.ci_low, 3), round(row.ci_high, 3)) == (0.836, 1.018)
    assert row.verdict == "no significant difference"
    assert row.reason == "p < 0.05 counts steps as independent, but the rounds' 95% CI spans 1"
    assert ab_table([row])[0][6:] == [
        "3.7e-12",
        "no significant difference: p < 0.05 counts steps as independent, but the rounds' 95% CI spans 1",
    ]
    # The same records through check's timing rule: the same p and the same call ("noise", not gating).
    check = timing_verdict(compare_timing_metric(a[0], b[0], "tokens_per_s"), Threshold("tokens_per_s", 0.0), 0.05)
    assert check == ("noise", row.p_value)


def test_significant_rows_carry_no_reason():
    a, b = rounds([0.050] * 4, seed=0), rounds([0.040] * 4, seed=10)
    (row,) = summarize(a, b)
    assert row.ratio == pytest.approx(1.25, abs=0.01) and row.ci_low > 1.0
    assert (row.verdict, row.reason) == ("B faster", "")
    assert row.p_value < 1e-10
