"""What a timing comparison of `check` can detect: the smallest change its rule calls a regression
with DETECTION_PROBABILITY, given both sides' runs and the threshold.

The rule needs the bootstrap interval of the runs to exclude 1 (95 %, so 2.5 % a side), the
one-sided U test to reach `--alpha`, and the measured change to pass the threshold. The first two
are set by how much whole runs differ: the runs' noise is the pooled standard deviation of the log
of each run's median (each run's value, for a run-level metric), and the standard error of the log
ratio is noise x sqrt(1/runs before + 1/runs after). The measured log change must clear the larger
of the threshold and t(1 - min(alpha, 2.5 %)) standard errors, so a true change clears it with
DETECTION_PROBABILITY once it is t(95 %) standard errors beyond that bar. A closed-form
approximation of the rule, not a simulation of it (tests/unit/test_check_power.py holds it against
the rule itself; docs/checks.md says where it is conservative). A pass is `not gated` where the
noise alone, with no threshold, hides a change of the threshold's size (docs/checks.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, median

DETECTION_PROBABILITY = 0.95
# The bootstrap interval is a 95 % one: each side's tail is 2.5 %.
INTERVAL_TAIL = 0.025


def runs_noise(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]]) -> float | None:
    """The pooled standard deviation of log run medians of the two sides (None with fewer than 2 runs
    on a side, or a non-positive sample)."""
    sides = [[median(run) for run in side if run] for side in (before, after)]
    if min(len(side) for side in sides) < 2 or any(v <= 0 for side in sides for v in side):
        return None
    logs = [[math.log(v) for v in side] for side in sides]
    squares = sum((x - sum(side) / len(side)) ** 2 for side in logs for x in side)
    return math.sqrt(squares / (sum(map(len, logs)) - 2))


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile from the normal one (Cornish-Fisher expansion to the fourth order: slightly
    low at 2 degrees of freedom, closer with more; tests/unit/test_check_power.py holds it against
    tabulated quantiles): `check` does without scipy.stats."""
    z = NormalDist().inv_cdf(p)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / df**power for power, term in enumerate(terms, start=1))


def detectable_change(
    before: Sequence[Sequence[float]],
    after: Sequence[Sequence[float]],
    alpha: float,
    higher_is_better: bool,
    threshold: float = 0.0,
) -> float | None:
    """The smallest change (a fraction, the worse way) detected with DETECTION_PROBABILITY by a
    comparison of these runs against `threshold` (a fraction; None: fewer than 2 runs a side)."""
    noise = runs_noise(before, after)
    if noise is None:
        return None
    df = len(before) + len(after) - 2
    error = noise * math.sqrt(1 / len(before) + 1 / len(after))
    if higher_is_better and threshold >= 1.0:
        return 1.0  # no drop passes a threshold of 100 % or more
    # The threshold as a log change the worse way: a drop of t for higher-is-better, a rise of t otherwise.
    bar = -math.log1p(-threshold) if higher_is_better else math.log1p(threshold)
    significant = t_quantile(1 - min(alpha, INTERVAL_TAIL), df) * error
    shift = max(bar, significant) + t_quantile(DETECTION_PROBABILITY, df) * error
    return 1.0 - math.exp(-shift) if higher_is_better else math.exp(shift) - 1.0
