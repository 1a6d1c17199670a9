"""What a timing comparison of `check` can detect (bench/analysis/check/power.py): the runs' noise,
the t quantile, the smallest detectable change, and the `not gated` row in the table, JUnit and
summary, on synthetic runs."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from bench.analysis.check.compare import NOT_GATED, CheckReport, compare_timing
from bench.analysis.check.points import PointData
from bench.analysis.check.power import detectable_change, runs_noise, t_quantile
from bench.analysis.check.thresholds import Threshold

# Student's t quantiles as tables print them: (p, degrees of freedom) -> t.
T_TABLE = {(0.975, 2): 4.303, (0.95, 2): 2.920, (0.975, 4): 2.776, (0.95, 4): 2.132, (0.975, 10): 2.228,
           (0.95, 10): 1.812, (0.99, 4): 3.747}  # fmt: skip


@pytest.mark.parametrize(("p", "df"), list(T_TABLE))
def test_the_t_quantile_is_close_to_the_tables(p, df):
    assert t_quantile(p, df) == pytest.approx(T_TABLE[(p, df)], rel=0.01)


def _runs(levels: list[float]) -> list[list[float]]:
    """One run per level: three step times around it."""
    return [[level * 0.999, level, level * 1.001] for level in levels]


def test_the_noise_is_the_pooled_deviation_of_log_run_medians():
    before, after = _runs([0.1, 0.11]), _runs([0.1, 0.1])
    d = math.log(0.11) - math.log(0.1)
    assert runs_noise(before, after) == pytest.approx(math.sqrt(2 * (d / 2) ** 2 / 2))
    assert runs_noise(_runs([0.1]), after) is None  # one run a side: no run-to-run noise


def test_the_detectable_change_is_the_t_tests_and_grows_with_the_noise():
    before, after = _runs([0.100, 0.101, 0.099]), _runs([0.100, 0.1005, 0.0995])
    noise = runs_noise(before, after)
    shift = (t_quantile(0.975, 4) + t_quantile(0.95, 4)) * noise * math.sqrt(2 / 3)
    assert detectable_change(before, after, 0.05, True) == pytest.approx(1 - math.exp(-shift))
    assert detectable_change(before, after, 0.05, False) == pytest.approx(math.exp(shift) - 1)
    assert detectable_change(before, after, 0.001, True) > detectable_change(before, after, 0.05, True)
    noisy = _runs([0.100, 0.110, 0.092])
    assert detectable_change(noisy, after, 0.05, True) > detectable_change(before, after, 0.05, True)


def _point(runs: list[list[float]]) -> PointData:
    return PointData(
        key="k", label="p", identity={}, status="ok", runs=len(runs), step_runs=runs, tokens_per_step=1000.0
    )


def _finding(before, after, pct=5.0):
    return compare_timing("p", _point(before), _point(after), Threshold("tokens_per_s", pct), alpha=0.05, gating=True)


def test_a_pass_of_noisy_runs_is_not_gated_and_says_what_would_gate_it(tmp_path):
    from reports.check.junit import write_junit
    from reports.check.summary import markdown_summary
    from reports.check.table import finding_row

    noisy = _finding(_runs([0.100, 0.115]), _runs([0.105, 0.095]))
    assert noisy.verdict == NOT_GATED and not noisy.gating and not noisy.fails
    detects = detectable_change(_runs([0.100, 0.115]), _runs([0.105, 0.095]), 0.05, True)
    stated = detectable_change(_runs([0.100, 0.115]), _runs([0.105, 0.095]), 0.05, True, threshold=0.05)
    assert 0.05 < detects <= stated and f"detects>={stated * 100:.1f}%" in noisy.confidence
    assert noisy.hint.startswith("tokens_per_s: the runs' noise hides a change of 5%")
    assert finding_row(noisy)[5] == "not gated"
    report = CheckReport(findings=[noisy], matched=1)
    assert report.exit_code == 0
    assert f"Not gated: {noisy.hint}." in markdown_summary(report)
    write_junit(report, tmp_path / "c.xml")
    skipped = ET.parse(tmp_path / "c.xml").getroot().find("testsuite/testcase/skipped")
    assert skipped.get("message").startswith("not gated: ") and noisy.hint in skipped.get("message")
    quiet = _finding(_runs([0.100, 0.1002, 0.0999]), _runs([0.1001, 0.0998, 0.1]))
    assert quiet.verdict == "ok" and quiet.hint == "" and "detects>=" in quiet.confidence
    # A wide threshold is within the noisy runs' reach: gated again.
    assert _finding(_runs([0.100, 0.115]), _runs([0.105, 0.095]), pct=detects * 100 + 1).verdict == "ok"


def _exact_noise_runs(runs: int, noise: float) -> list[list[float]]:
    """Runs (one step each) whose log values have a pooled deviation of exactly `noise`."""
    raw = [i - (runs - 1) / 2 for i in range(runs)]
    scale = math.sqrt((runs - 1) / sum(r * r for r in raw))
    return [[math.exp(noise * scale * r)] for r in raw]


def _caught(runs: int, noise: float, change: float, pct: float, trials: int = 200) -> float:
    """How often check's own rule (compare_timing on real bootstrap intervals and U tests) calls a
    slowdown of `change` a regression: `runs` runs a side of 20 steps, log-normal run noise `noise`,
    1 % step noise, a fixed seed."""
    import numpy as np

    from bench.analysis.stats import compare_many

    rng = np.random.default_rng(46)

    def side(factor: float) -> list[list[float]]:
        return [list(factor * math.exp(rng.normal(0, noise)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(runs)]

    pairs = [(side(1.0), side(1.0 + change)) for _ in range(trials)]
    threshold = Threshold("step_time_s", pct)
    verdicts = [
        compare_timing(
            "p", PointData("k", "p", {}, "ok", runs, step_runs=b), PointData("k", "p", {}, "ok", runs, step_runs=c),
            threshold, alpha=0.05, gating=True, samples=samples,
        ).verdict
        for (b, c), samples in zip(pairs, compare_many(pairs), strict=True)
    ]  # fmt: skip
    return verdicts.count("regression") / trials


# (runs a side, run noise) -> the least share of trials in which the rule catches the stated change.
# The closed form is conservative at 2-3 runs a side (the rule's bootstrap interval resamples so few
# runs that it is narrower than a t-test's with 2-4 degrees of freedom) and a few points short of
# 95 % at 5-10 runs: docs/results/checks.md gives the figures, docs/checks.md the limits.
STATED_CAUGHT = {(2, 0.02): 0.95, (3, 0.02): 0.95, (5, 0.02): 0.85, (10, 0.05): 0.85}


@pytest.mark.parametrize(("runs", "noise"), list(STATED_CAUGHT))
def test_the_stated_change_is_what_the_rule_itself_catches(runs, noise):
    """The stated change, simulated through check's real rule with its threshold at 0 (significance
    alone, which is what the closed form models): caught in about 95 % of trials, never far fewer."""
    exact = _exact_noise_runs(runs, noise)
    stated = detectable_change(exact, exact, 0.05, higher_is_better=False)
    assert STATED_CAUGHT[(runs, noise)] <= _caught(runs, noise, stated, pct=0.0) <= 1.0


def test_the_stated_change_includes_the_threshold():
    """The rule also needs the measured change beyond the threshold: with quiet runs the noise alone
    would catch less than a 5 % threshold (the row is gated), and the stated change is the threshold
    plus 1.645 standard errors and more, which the rule itself catches at about 95 %."""
    exact = _exact_noise_runs(10, 0.02)
    noise_only = detectable_change(exact, exact, 0.05, higher_is_better=False)
    stated = detectable_change(exact, exact, 0.05, higher_is_better=False, threshold=0.05)
    assert noise_only < 0.05 < stated
    assert _caught(10, 0.02, noise_only, pct=5.0) <= 0.10
    assert _caught(10, 0.02, stated, pct=5.0) >= 0.90


def test_a_threshold_of_a_whole_drop_is_never_passed():
    exact = _exact_noise_runs(3, 0.02)
    assert detectable_change(exact, exact, 0.05, higher_is_better=True, threshold=1.0) == 1.0
