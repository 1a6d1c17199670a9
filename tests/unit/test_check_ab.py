"""A/B helpers: command prefixes, the alternating schedule, and the B/A summary (bench.analysis.check.abtest)."""

from __future__ import annotations

import sys

import pytest

from bench.analysis.check.abtest import summarize
from bench.analysis.check.points import points_from_records
from bench.analysis.check.synthetic import make_record, step_times
from bench.run.ab import build_command, schedule

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
