"""Verdicts of the timing comparison on synthetic step times (bench.analysis.stats, bench/analysis/check/compare.py)."""

from __future__ import annotations

import pytest

from bench.analysis.check.compare import compare_timing
from bench.analysis.check.points import PointData
from bench.analysis.check.synthetic import step_times
from bench.analysis.check.thresholds import Threshold, Thresholds
from bench.analysis.stats import compare_runs, ratio_ci


def _point(runs: list[list[float]], label: str = "p") -> PointData:
    """A point whose step times are `runs` (tokens/s = 1000 tokens per step / step time)."""
    return PointData(
        key="k", label=label, identity={}, status="ok", runs=len(runs), step_runs=runs, tokens_per_step=1000.0
    )


def _timing(base_runs, cur_runs, metric: str = "tokens_per_s", pct: float = 5.0):
    """The statistic itself on one run a side: `min_runs=1` opts in (the default 2 would say insufficient)."""
    threshold = Threshold(metric, pct)
    return compare_timing("p", _point(base_runs), _point(cur_runs), threshold, alpha=0.05, gating=True, min_runs=1)


def _verdict(base_runs, cur_runs, metric: str = "tokens_per_s", pct: float = 5.0) -> str:
    return _timing(base_runs, cur_runs, metric, pct).verdict


def test_no_change_passes():
    base = [step_times(0.1, 0.02, 60, seed=1)]
    cur = [step_times(0.1, 0.02, 60, seed=2)]
    assert _verdict(base, cur) == "ok"
    assert _verdict(base, cur, metric="step_time_s") == "ok"


def test_twenty_percent_slower_with_low_noise_fails():
    base = [step_times(0.100, 0.02, 60, seed=1)]
    cur = [step_times(0.125, 0.02, 60, seed=2)]  # tokens/s 1/1.25 = 0.8: 20% lower
    finding = _timing(base, cur)
    assert finding.verdict == "regression"
    assert finding.fails
    assert finding.change == pytest.approx(-0.2, abs=0.02)
    assert _verdict(base, cur, metric="step_time_s") == "regression"


def test_three_percent_slower_under_five_percent_threshold_passes():
    base = [step_times(0.100, 0.005, 60, seed=1)]
    cur = [step_times(0.103, 0.005, 60, seed=2)]
    # Significant (low noise) but within the threshold: not a regression.
    result = compare_runs(base, cur)
    assert result.p_greater < 0.001  # the current steps are longer
    assert _verdict(base, cur) == "ok"
    assert _verdict(base, cur, pct=2.0) == "regression"


def test_high_noise_gives_no_false_alarm():
    # 40% relative spread, 10 steps a side, no real change: the medians often differ by more than
    # 5% by chance, but never significantly enough to be called a regression.
    verdicts = [
        _verdict([step_times(0.1, 0.4, 10, seed=2 * i)], [step_times(0.1, 0.4, 10, seed=2 * i + 1)]) for i in range(40)
    ]
    assert verdicts.count("regression") <= 1
    assert verdicts.count("noise") >= 5  # the threshold alone would have raised these


def test_faster_is_improved_not_regression():
    base = [step_times(0.125, 0.02, 60, seed=1)]
    cur = [step_times(0.100, 0.02, 60, seed=2)]
    assert _verdict(base, cur) == "improved"


def test_too_few_samples_are_insufficient_and_not_gating():
    finding = compare_timing(
        "p", _point([[0.1, 0.1]]), _point([[0.2, 0.2]]), Threshold("tokens_per_s", 5.0), alpha=0.05, gating=True
    )
    assert finding.verdict == "insufficient"
    assert not finding.fails


def test_bootstrap_ci_is_deterministic_and_covers_the_true_ratio():
    base = [step_times(0.1, 0.05, 100, seed=3)]
    cur = [step_times(0.11, 0.05, 100, seed=4)]
    first = ratio_ci(cur, base, min_runs=1)[1:]
    assert first == ratio_ci(cur, base, min_runs=1)[1:]
    assert first[0] < 1.1 < first[1]
    assert first[1] - first[0] < 0.05


def test_run_to_run_spread_widens_the_interval():
    # Four runs a side whose levels differ by up to 8% run to run: resampling runs must widen the
    # interval compared with pooling all steps as if they came from one run.
    levels = [0.096, 0.104, 0.100, 0.092]
    base = [step_times(level, 0.01, 30, seed=i) for i, level in enumerate(levels)]
    cur = [step_times(level, 0.01, 30, seed=10 + i) for i, level in enumerate(reversed(levels))]
    grouped = ratio_ci(cur, base)[1:]
    pooled = ratio_ci([sum(cur, [])], [sum(base, [])], min_runs=1)[1:]
    assert grouped[1] - grouped[0] > 1.5 * (pooled[1] - pooled[0])


def test_identical_constant_samples_give_p_one():
    result = compare_runs([[0.1] * 5], [[0.1] * 5])
    assert (result.ratio, result.p_less, result.p_greater) == (1.0, 1.0, 1.0)


def test_default_thresholds():
    thresholds = Thresholds()
    assert thresholds["tokens_per_s"].pct == 5.0
    assert thresholds["comm_bytes_per_step.all_gather"].pct == 0.0
