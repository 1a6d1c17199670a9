"""One statistics engine: the report and `check` give the same numbers for the same records.

Both compute medians, intervals and ratios through bench.analysis.stats, from the records' step times:
a configuration's tokens/s is its tokens per step over the pooled median step time of its runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record  # noqa: E402

from bench.analysis.check.compare import compare  # noqa: E402
from bench.analysis.check.points import points_from_records  # noqa: E402
from bench.analysis.check.synthetic import step_times  # noqa: E402
from bench.analysis.check.thresholds import Thresholds  # noqa: E402
from bench.analysis.report.views import analyse  # noqa: E402
from bench.analysis.stats import median_ci, percentile_interval, ratio_ci, ratio_interval  # noqa: E402


def _repeats(sweep: str, level: float, nodes: int = 1, seed: int = 0) -> list:
    records = []
    for r in range(3):
        times = step_times(level * (1 + 0.02 * r), 0.03, 12, seed=seed + r)
        record = make_record(sweep=sweep, nodes=nodes, repeat=r, tokens_per_s=1000.0, step_times=times)
        records.append(record)
    return records


def test_report_cell_and_check_medians_are_the_same_numbers():
    baseline, current = _repeats("a", 0.050), _repeats("b", 0.055, seed=10)
    cells = analyse(baseline + current).cells.set_index("sweep")
    report = compare(points_from_records(baseline), points_from_records(current), Thresholds())
    finding = {f.metric: f for f in report.findings}
    assert finding["tokens_per_s"].baseline == cells.loc["a", "tokens_per_s"]
    assert finding["tokens_per_s"].current == cells.loc["b", "tokens_per_s"]
    assert finding["step_time_s"].current == cells.loc["b", "step_time_median_s"]
    # The report's interval of a cell is the engine's interval of its runs.
    steps = [r.metrics.step_times_s for r in current]
    _, low, high = median_ci(steps)
    tokens = current[0].metrics.tokens_per_step
    assert (cells.loc["b", "tps_ci_low"], cells.loc["b", "tps_ci_high"]) == pytest.approx((tokens / high, tokens / low))


def test_report_efficiency_interval_and_check_ratio_interval_are_the_engines_ratio():
    one, two = _repeats("s", 0.050, nodes=1), _repeats("s", 0.052, nodes=2, seed=20)
    row = analyse(one + two).scaling.set_index("nodes").loc[2]
    steps_one = [r.metrics.step_times_s for r in one]
    steps_two = [r.metrics.step_times_s for r in two]
    tokens_ratio = two[0].metrics.tokens_per_step / one[0].metrics.tokens_per_step
    # efficiency = tokens ratio / node ratio / (N step / base step): N is the engine's numerator.
    step_ratio, low, high = ratio_ci(steps_two, steps_one)
    k = tokens_ratio / 2
    assert row["scaling_efficiency"] == pytest.approx(k / step_ratio)
    assert (row["eff_ci_low"], row["eff_ci_high"]) == pytest.approx((k / high, k / low))
    # check's tokens/s ratio (current over baseline) is the inverse step-time ratio, same streams.
    base, cur = _repeats("x", 0.050), _repeats("y", 0.053, seed=30)
    finding = {f.metric: f for f in compare(points_from_records(base), points_from_records(cur), Thresholds()).findings}
    ratio, ratio_low, ratio_high = ratio_ci(
        [r.metrics.step_times_s for r in cur], [r.metrics.step_times_s for r in base]
    )
    assert finding["tokens_per_s"].change == pytest.approx(1 / ratio - 1)
    assert finding["tokens_per_s"].confidence.split("CI")[1].startswith(f"[{1 / ratio_high:.3f},{1 / ratio_low:.3f}]")


def test_percentile_intervals_are_numpys_whether_or_not_they_may_reorder_the_rows():
    """np.percentile's numbers on whole rows, np.nanpercentile's on partial ones, NaN on empty ones;
    a caller's matrix is left as it was unless it is handed over as scratch (overwrite_input)."""
    rng = np.random.default_rng(3)
    boot = np.round(rng.normal(1.0, 0.1, (40, 2000)), 2)  # ties, as resampled medians have
    boot[5], boot[7, :10] = np.nan, np.nan
    kept = boot.copy()
    whole = np.percentile(boot, [2.5, 97.5], axis=1)
    partial = np.nanpercentile(boot[7], [2.5, 97.5])
    low, high = percentile_interval(boot)
    np.testing.assert_array_equal(boot, kept)
    for row in (0, 1, 39):
        assert (low[row], high[row]) == (whole[0][row], whole[1][row])
    assert (low[7], high[7]) == tuple(partial) and np.isnan(low[5]) and np.isnan(high[5])
    scratch_low, scratch_high = percentile_interval(boot.copy(), overwrite_input=True)
    np.testing.assert_array_equal(scratch_low, low)
    np.testing.assert_array_equal(scratch_high, high)
    ratio_low, ratio_high = ratio_interval(boot, boot[::-1])  # its ratio matrix is its scratch
    expected_low, expected_high = percentile_interval(boot / boot[::-1])
    np.testing.assert_array_equal(ratio_low, expected_low)
    np.testing.assert_array_equal(ratio_high, expected_high)
    np.testing.assert_array_equal(boot, kept)
