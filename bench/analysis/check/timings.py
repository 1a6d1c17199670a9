"""Every timing metric of a check, from one comparison of step times (bench.analysis.stats).

Step time is what the engine measures; tokens/s is tokens per step over it and MFU is tokens/s
times a constant of the configuration. So one two-sample comparison of the step times gives all
three: the medians, the ratio and its interval transform, and a shorter step is a faster point.
The numbers match the report's for the same records (both come from bench.analysis.stats).

Run-level metrics (energy per token, utilization: one value per run, from its telemetry) go
through the same engine with each run as a one-sample run: the center is the median over runs,
the interval resamples runs, and the shift test compares the runs' values. With few runs that
interval is coarse and the test cannot reach significance (docs/checks.md says how many it takes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.analysis.check.points import PointData
from bench.analysis.check.thresholds import METRICS
from bench.analysis.stats import Comparison, compare_many, compare_runs


@dataclass(frozen=True)
class TimingComparison:
    """Current vs baseline for one timing metric."""

    baseline: float
    current: float
    ratio: float  # current / baseline
    ci_low: float
    ci_high: float
    p_greater: float  # current tends to be greater
    p_less: float
    n_baseline: int  # steps per side
    n_current: int
    runs_baseline: int
    runs_current: int


def _scale(point: PointData, metric: str) -> float | None:
    """What turns one over a step time into the metric (None where the point lacks it)."""
    if metric == "tokens_per_s":
        return point.tokens_per_step
    if metric == "mfu":
        if point.tokens_per_step is None or point.mfu_per_token_rate is None:
            return None
        return point.tokens_per_step * point.mfu_per_token_rate
    raise ValueError(f"unknown timing metric {metric!r}")


# The timings with one value per run (a check asks tens of thousands of times, per point and metric).
_RUN_LEVEL = frozenset(name for name, metric in METRICS.items() if metric.per == "run")


def is_run_level(metric: str) -> bool:
    return metric in _RUN_LEVEL


def timing_runs(point: PointData, metric: str) -> list[list[float]]:
    """The samples of a metric, one list per run: the step times, or a run-level metric's value."""
    if metric in _RUN_LEVEL:
        return [[value] for value in point.run_values.get(metric, ())]
    return point.step_runs


def samples_kind(metric: str) -> str:
    """What a metric's comparison compares: the step times (one comparison serves step time,
    tokens/s and MFU) or a run-level metric's own values."""
    return metric if metric in _RUN_LEVEL else "step_time_s"


def compare_samples(wanted: Sequence[tuple[PointData, PointData, str]]) -> list[Comparison]:
    """The comparison of the samples behind each (baseline, current, metric), all computed together
    (bench.analysis.stats.compare_many: the numbers of one comparison at a time)."""
    return compare_many([(timing_runs(base, metric), timing_runs(cur, metric)) for base, cur, metric in wanted])


def has_timing(point: PointData, metric: str) -> bool:
    if metric in _RUN_LEVEL:
        return bool(point.run_values.get(metric))
    return bool(point.step_runs) and (metric == "step_time_s" or _scale(point, metric) is not None)


def compare_timing_metric(
    base: PointData, cur: PointData, metric: str, samples: Comparison | None = None
) -> TimingComparison:
    """The comparison of one timing metric (both points must have it: `has_timing`). `samples`: the
    comparison of its samples (`samples_kind`) when the caller computed it already (compare_samples)."""
    steps: Comparison = samples or compare_runs(timing_runs(base, metric), timing_runs(cur, metric))
    common = (steps.n_baseline, steps.n_current, steps.runs_baseline, steps.runs_current)
    if metric == "step_time_s" or metric in _RUN_LEVEL:
        return TimingComparison(
            steps.baseline_median, steps.current_median, steps.ratio, steps.ci_low, steps.ci_high,
            steps.p_greater, steps.p_less, *common,
        )  # fmt: skip
    scale_base, scale_cur = _scale(base, metric), _scale(cur, metric)
    factor = scale_cur / scale_base
    # value = scale / step time: the ratio inverts, its bounds swap, and "greater" becomes "less".
    return TimingComparison(
        scale_base / steps.baseline_median, scale_cur / steps.current_median, factor / steps.ratio,
        factor / steps.ci_high, factor / steps.ci_low, steps.p_less, steps.p_greater, *common,
    )  # fmt: skip
