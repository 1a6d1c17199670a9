"""The check's batched statistics give the numbers of the one-at-a-time ones (bench.analysis.stats):
`bootstrap_medians_counted` the very bootstrap medians of `bootstrap_medians`, and `compare_many`'s
U-test p-values those of scipy's mannwhitneyu (`shift_p_values`), pair by pair."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.analysis.check.synthetic import step_times
from bench.analysis.stats import (
    DENOMINATOR,
    NUMERATOR,
    bootstrap_medians,
    bootstrap_medians_counted,
    compare_many,
    compare_runs,
    shift_p_values,
)


def _runs(lengths: tuple[int, ...], seed: int, decimals: int | None = None, median: float = 0.1) -> list[list[float]]:
    """Runs of step times of these lengths; rounded to `decimals` they hold ties."""
    runs = [step_times(median, 0.05, n, seed=seed * 100 + i) for i, n in enumerate(lengths)]
    return [[round(t, decimals) for t in run] for run in runs] if decimals is not None else runs


# Runs of one length (every resample the same count), of several (counts differ between resamples),
# one long run, and runs whose resamples draw over 255 steps (16-bit counters).
SHAPES = [(10, 10, 10, 10, 10), (10, 10, 10), (10,), (3, 7, 12), (1, 1, 1), (200,), (100, 10, 10), (2,) * 140]


@pytest.mark.parametrize("stream", [NUMERATOR, DENOMINATOR])
def test_counted_bootstrap_medians_are_bootstrap_medians(stream):
    items = [_runs(shape, seed, decimals) for shape in SHAPES for seed in range(3) for decimals in (None, 3)]
    items += [[[0.1, math.nan, 0.3], [0.2, 0.2]], [[0.1, math.inf], [0.2]], [], [[0.5] * 10] * 3]
    counted = bootstrap_medians_counted(items, stream, n_boot=500)
    expected = bootstrap_medians(items, stream, n_boot=500)
    assert counted.shape == (len(items), 500)
    assert np.array_equal(counted, expected, equal_nan=True)
    assert np.isnan(counted[-2]).all() and (counted[-1] == 0.5).all()


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
