"""Parsing of per-metric thresholds such as `tokens_per_s:-5%` (bench.analysis.check.thresholds)."""

from __future__ import annotations

import pytest

from bench.analysis.check.thresholds import Threshold, ThresholdError, Thresholds, parse_threshold


@pytest.mark.parametrize(
    ("text", "metric", "pct"),
    [
        ("tokens_per_s:-5%", "tokens_per_s", 5.0),
        ("mfu:-2.5%", "mfu", 2.5),
        ("step_time_s:+10%", "step_time_s", 10.0),
        ("peak_mem_bytes:+0%", "peak_mem_bytes", 0.0),
        ("tokens_per_s:7", "tokens_per_s", 7.0),
        (" params : 0% ", "params", 0.0),
    ],
)
def test_parse_one(text, metric, pct):
    assert parse_threshold(text) == [Threshold(metric, pct)]


def test_group_sets_every_member():
    parsed = parse_threshold("comm_bytes_per_step:+1%")
    assert [t.metric for t in parsed] == [
        "comm_bytes_per_step.all_gather",
        "comm_bytes_per_step.reduce_scatter",
        "comm_bytes_per_step.all_reduce",
    ]
    assert {t.pct for t in parsed} == {1.0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tokens_per_s:+5%", "tokens_per_s is higher-is-better, so its threshold is written tokens_per_s:-5%"),
        ("peak_mem_bytes:-1%", "peak_mem_bytes is lower-is-better, so its threshold is written peak_mem_bytes:+1%"),
        ("latency:-5%", "unknown metric 'latency'; allowed: tokens_per_s, step_time_s, mfu"),
        ("tokens_per_s=5", "expected METRIC:[+-]N%"),
        ("tokens_per_s:-five%", "expected METRIC:[+-]N%"),
    ],
)
def test_bad_thresholds_name_the_problem(text, message):
    with pytest.raises(ThresholdError) as info:
        parse_threshold(text)
    assert message in str(info.value)
    assert str(info.value).startswith(f"--threshold {text!r}")


def test_overrides_win_and_later_strings_win():
    thresholds = Thresholds.parse(["tokens_per_s:-5%", "tokens_per_s:-8%", "peak_mem_bytes:+2%"])
    assert thresholds["tokens_per_s"].pct == 8.0
    assert thresholds["peak_mem_bytes"].pct == 2.0
    assert thresholds["mfu"].pct == 5.0
    assert "tokens_per_s:-8%" in thresholds.describe()
    assert "peak_mem_bytes:+2%" in thresholds.describe()


def test_worsening_follows_the_metric_direction():
    assert Threshold("tokens_per_s", 5).worsening_pct(100.0, 90.0) == pytest.approx(10.0)
    assert Threshold("step_time_s", 5).worsening_pct(1.0, 1.1) == pytest.approx(10.0)
    assert Threshold("params", 0).worsening_pct(100, 90) == pytest.approx(10.0)
    assert Threshold("tokens_per_s", 5).is_exceeded(100.0, 94.0)
    assert not Threshold("tokens_per_s", 5).is_exceeded(100.0, 96.0)
    assert not Threshold("peak_mem_bytes", 0).is_exceeded(100, 100)
    assert Threshold("peak_mem_bytes", 0).is_exceeded(100, 101)
