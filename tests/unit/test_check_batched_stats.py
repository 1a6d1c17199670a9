"""The check's batched statistics (bench.analysis.stats `compare_many`) give the numbers of the
one-at-a-time ones, pair by pair: the intervals of `bootstrap_medians`' resampled medians, and the
U-test p-values of scipy's mannwhitneyu (`shift_p_values`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.analysis.check.synthetic import step_times
from bench.analysis.stats import (
    DENOMINATOR,
    NUMERATOR,
    bootstrap_medians,
    compare_many,
    compare_runs,
    ratio_interval,
    shift_p_values,
)


def _runs(lengths: tuple[int, ...], seed: int, decimals: int | None = None, median: float = 0.1) -> list[list[float]]:
    """Runs of step times of these lengths; rounded to `decimals` they hold ties."""
    runs = [step_times(median, 0.05, n, seed=seed * 100 + i) for i, n in enumerate(lengths)]
    return [[round(t, decimals) for t in run] for run in runs] if decimals is not None else runs


# Runs of one length (every resample the same count), of several (counts differ between resamples),
# one long run, and runs whose resamples draw over 255 steps (16-bit counters).
SHAPES = [(10, 10, 10, 10, 10), (10, 10, 10), (10,), (3, 7, 12), (1, 1, 1), (200,), (100, 10, 10), (2,) * 140]


def test_batched_intervals_and_medians_are_one_pair_at_a_time_by_bootstrap_medians():
    """compare_many's running-count bootstrap gives, pair by pair, the interval of bootstrap_medians'
    own resampled medians (to the last bit), whatever the shapes and with non-finite steps."""
    sides = [_runs(shape, seed, decimals) for shape in SHAPES for seed in range(2) for decimals in (None, 3)]
    sides += [[[0.1, math.nan, 0.3], [0.2, 0.2]], [[0.1, math.inf], [0.2]], [[0.5] * 10] * 3, [[], [0.2, 0.3, 0.4]]]
    pairs = list(zip(sides, sides[::-1], strict=True))
    for (base, cur), comparison in zip(pairs, compare_many(pairs), strict=True):
        low, high = ratio_interval(bootstrap_medians([cur], NUMERATOR), bootstrap_medians([base], DENOMINATOR), [1.0])
        assert np.array_equal([comparison.ci_low, comparison.ci_high], [low[0], high[0]], equal_nan=True)
        medians = [float(np.median(np.concatenate([np.asarray(r, dtype=float) for r in side]))) for side in (base, cur)]
        assert np.array_equal([comparison.baseline_median, comparison.current_median], medians, equal_nan=True)
        assert (comparison.n_baseline, comparison.runs_current) == (sum(map(len, base)), sum(1 for r in cur if r))


def test_batched_u_tests_are_scipys_pair_by_pair():
    """Samples above 8 steps a side go through the batched normal approximation; ties (rounded
    steps) take scipy's tie correction; the small and the constant pairs take scipy itself. Half
    the current sides are 5 % slower, so the p-values span both sides of 0.05."""
    pairs = [
        (_runs(base, seed, decimals), _runs(cur, seed + 50, decimals, median))
        for base, cur in [((10, 10, 10), (10, 10)), ((40,), (25,)), ((10,) * 5, (10,) * 5), ((4,), (30,))]
        for seed in range(3)
        for decimals in (None, 3, 2)
        for median in (0.1, 0.105)
    ]
    pairs.append(([[0.2] * 10], [[0.2] * 12]))
    comparisons = compare_many(pairs)
    for (base, cur), comparison in zip(pairs, comparisons, strict=True):
        p_greater, p_less = shift_p_values(base, cur)
        assert comparison.p_greater == pytest.approx(p_greater, rel=1e-13, abs=1e-300)
        assert comparison.p_less == pytest.approx(p_less, rel=1e-13, abs=1e-300)
    assert (comparisons[-1].p_greater, comparisons[-1].p_less) == (1.0, 1.0)
    assert min(c.p_greater for c in comparisons) < 0.05 < max(c.p_greater for c in comparisons)


def test_a_batch_gives_each_pair_what_it_gets_alone():
    pairs = [(_runs((10,) * k, seed), _runs((10,) * k, seed + 9)) for k in (2, 3, 5) for seed in range(3)]
    assert compare_many(pairs) == [compare_runs(base, cur) for base, cur in pairs]
