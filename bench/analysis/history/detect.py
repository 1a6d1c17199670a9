"""The change-point detector: Apache Otava's E-divisive means with a Student's t-test.

Otava (formerly DataStax's Hunter; Fleming et al., "Hunter: Using Change Point Detection to Hunt
for Performance Regressions", ICPE 2023) splits the series where the energy distance between the
two sides is largest, in sliding windows, keeps a split whose two sides differ by a two-sided t-test
at p < MAX_PVALUE, and merges away the weakest ones. It is deterministic (no permutation test), so
the same store gives the same change points on every machine. Why this detector and these settings:
docs/history.md (measured against MongoDB's signal-processing-algorithms and against `check`'s
threshold, on series of real runs: docs/results/history.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# The significance a change point must reach. 0.001 is Otava's own default; the validation
# (scripts/validate_history.py) measured its false alerts and detection delay on this machine.
MAX_PVALUE = 0.001
# Runs per sliding window of the split step (Otava's default is 50). A nightly series of a year is
# ~365 runs; a window of 30 keeps each split local, so an old change cannot hide a new one.
WINDOW = 30
# Fewer runs than this cannot be tested: the t-test needs runs on both sides of a change, and with
# a handful of runs in all, one noisy run decides. Such series are listed as too short.
MIN_SERIES_RUNS = 6
# A change point is reported once at least this many runs lie after it: a single slow run at the end
# of a series (a busy night) splits off as significantly as a real step does, and the next run
# tells them apart. The validation measured the trade (false alerts against runs to flag a change).
MIN_RUNS_AFTER = 2
# The detector sees log(value): run-to-run noise of throughput is multiplicative (a busy machine
# slows a run by a factor), and a change is judged as a ratio, as its magnitude is reported.
LOG_SCALE = True


@dataclass(frozen=True)
class Detected:
    """A change point: the index of the first run after it, and the t-test's p-value of the split."""

    index: int
    pvalue: float


def detect(
    values: Sequence[float],
    *,
    max_pvalue: float = MAX_PVALUE,
    window: int = WINDOW,
    log_scale: bool = LOG_SCALE,
    min_after: int = MIN_RUNS_AFTER,
) -> list[Detected]:
    """Change points of a series of positive values, in index order (none below MIN_SERIES_RUNS),
    each with at least `min_after` runs after it."""
    if len(values) < MIN_SERIES_RUNS:
        return []
    from otava.analysis import compute_change_points

    series = [math.log(max(v, 1e-300)) if log_scale else float(v) for v in values]
    points, _weak = compute_change_points(series, window_len=window, max_pvalue=max_pvalue)
    return [Detected(int(p.index), float(p.stats.pvalue)) for p in points if len(values) - p.index >= min_after]


def detect_each(values_of: Sequence[Sequence[float]]) -> list[list[Detected]]:
    """`detect` of each series' values: the change points of many series in one call (a task of the
    `history` command's worker pool, bench/cli/commands/history.py)."""
    return [detect(values) for values in values_of]


def import_detector() -> None:
    """Import the detector's libraries now (Otava, and scipy.stats with it), not at the first series."""
    import otava.analysis  # noqa: F401


def detector_name() -> str:
    """`apache-otava 0.8.0`: which implementation found the change points (shown on every output)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"apache-otava {version('apache-otava')}"
    except PackageNotFoundError:
        return "apache-otava (version unknown)"
