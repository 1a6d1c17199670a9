"""The straggler rule (bench.analysis.stats.stragglers): slower than the median by more than
max(k x MAD, floor x median); the floor alone with two values; nobody in a tight group."""

from __future__ import annotations

import pytest

from bench.analysis.stats import stragglers


def test_one_slow_rank_among_eight_is_named_with_how_much_slower():
    times = {rank: 1.0 + 0.01 * (rank % 3) for rank in range(8)}
    times[5] = 1.3
    assert stragglers(times) == {5: pytest.approx(1.3 / 1.01 - 1)}


def test_a_spread_out_group_needs_more_than_three_mads():
    # median 1.0, MAD 0.1: the limit is max(3 x 0.1, 10 %) = 0.3 over the median
    times = {0: 0.8, 1: 0.9, 2: 1.0, 3: 1.0, 4: 1.1, 5: 1.2, 6: 1.29}
    assert stragglers(times) == {}
    assert stragglers({**times, 6: 1.31}) == {6: pytest.approx(0.31)}


def test_two_values_fall_back_to_the_floor():
    assert stragglers({0: 1.0, 1: 1.2}) == {}  # 9 % over the median of 1.1
    assert stragglers({0: 1.0, 1: 1.3}) == {1: pytest.approx(1.3 / 1.15 - 1)}  # 13 %


def test_fewer_than_two_values_name_nobody_and_the_floor_is_settable():
    assert stragglers({0: 5.0}) == {}
    assert stragglers({0: 1.0, 1: 1.0, 2: 1.06}, k=3.0, floor=0.05) == {2: pytest.approx(0.06)}
