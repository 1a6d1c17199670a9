"""Noise-aware comparison of two sets of per-step timings.

Two tests, both on the per-step samples: a one-sided Mann-Whitney U test (does the current side
tend to be worse?) and a bootstrap confidence interval of the ratio of medians (how much worse?).
Samples arrive grouped by run (one group per repeat); the bootstrap resamples runs, then steps
within each chosen run, so when there are several runs per side the interval also carries the
run-to-run spread that per-step samples alone understate. Seeds are fixed: the same samples
always give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# 2000 resamples: the 2.5% and 97.5% percentiles then move by well under 0.1% between seeds,
# and one comparison costs a few milliseconds.
N_BOOT = 2000
CONFIDENCE = 0.95
SEED = 0

Runs = Sequence[Sequence[float]]


@dataclass(frozen=True)
class SampleComparison:
    """Current vs baseline: ratio of medians, its bootstrap CI and one-sided U-test p-values."""

    baseline_median: float
    current_median: float
    ratio: float
    ci_low: float
    ci_high: float
    p_greater: float  # p-value of "current tends to be greater than baseline"
    p_less: float  # p-value of "current tends to be less than baseline"
    n_baseline: int
    n_current: int


def _flatten(runs: Runs) -> np.ndarray:
    return np.concatenate([np.asarray(r, dtype=float) for r in runs if len(r)]) if runs else np.array([])


def bootstrap_medians(runs: Runs, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """`n_boot` bootstrap medians: resample runs with replacement, then steps within each run."""
    runs = [np.asarray(r, dtype=float) for r in runs if len(r)]
    lens = np.array([len(r) for r in runs])
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
    flat = np.concatenate(runs)
    picked = rng.integers(0, len(runs), size=(n_boot, len(runs)))
    width = int(lens.max())
    steps = (rng.random((n_boot, len(runs), width)) * lens[picked][..., None]).astype(int)
    values = flat[offsets[picked][..., None] + steps]
    values[np.arange(width) >= lens[picked][..., None]] = np.nan  # shorter runs: pad, then ignore
    return np.nanmedian(values.reshape(n_boot, -1), axis=1)


def median_ratio_ci(
    baseline: Runs, current: Runs, *, n_boot: int = N_BOOT, confidence: float = CONFIDENCE, seed: int = SEED
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(current) / median(baseline)."""
    rng = np.random.default_rng(seed)
    ratios = bootstrap_medians(current, n_boot, rng) / bootstrap_medians(baseline, n_boot, rng)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def mann_whitney_p(baseline: np.ndarray, current: np.ndarray, alternative: str) -> float:
    """One-sided Mann-Whitney U p-value that `current` is `alternative` ("greater"/"less") than baseline."""
    from scipy.stats import mannwhitneyu

    if np.all(baseline == baseline[0]) and np.all(current == baseline[0]):
        return 1.0  # identical constant samples: no evidence of any shift (scipy would return nan)
    return float(mannwhitneyu(current, baseline, alternative=alternative).pvalue)


def compare_samples(baseline: Runs, current: Runs, *, n_boot: int = N_BOOT, seed: int = SEED) -> SampleComparison:
    """Compare two sides given as per-run lists of per-step samples (raises ValueError when a side is empty)."""
    base, cur = _flatten(baseline), _flatten(current)
    if not len(base) or not len(cur):
        raise ValueError("compare_samples: each side needs at least one sample")
    base_median, cur_median = float(np.median(base)), float(np.median(cur))
    low, high = median_ratio_ci(baseline, current, n_boot=n_boot, seed=seed)
    return SampleComparison(
        baseline_median=base_median,
        current_median=cur_median,
        ratio=cur_median / base_median,
        ci_low=low,
        ci_high=high,
        p_greater=mann_whitney_p(base, cur, "greater"),
        p_less=mann_whitney_p(base, cur, "less"),
        n_baseline=len(base),
        n_current=len(cur),
    )
