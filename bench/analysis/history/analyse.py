"""Series -> change points with magnitude, interval, significance and environment change; the
numerics guard along each series; the CI gate (`--fail-on-new-regression N`).

A change point's magnitude compares the runs between the previous change point (or the series'
start) and it with the runs between it and the next (or the end): the ratio of their pooled
medians with its bootstrap interval and the two sides' runs, from the statistics engine that
`check` uses (bench.analysis.stats). Its significance is the detector's t-test p-value. It is a regression
when the metric moved the worse way (tokens/s, MFU, efficiency down; step time up).

The numerics guard compares each run's loss curve with the run before it in its series
(bench.analysis.check.numerics: exact on CPU with the same software stack, within a relative tolerance
otherwise; NaN/inf fails), so a run that got faster because training broke is named where it broke.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench.analysis.check.numerics import LOSS_RTOL, CurveVerdict, compare_curves, exact_rule
from bench.analysis.history.detect import MIN_SERIES_RUNS, Detected, detect, detect_each
from bench.analysis.history.envdiff import env_changes
from bench.analysis.history.power import DEFAULT_TARGET_SHIFT, Power, series_power
from bench.analysis.history.series import EFFICIENCY, Run, Series
from bench.analysis.stats import compare_many


@dataclass(frozen=True)
class ChangePoint:
    """A step in a series, at the first run after it."""

    series: Series
    index: int  # of the first run after the change
    pvalue: float
    runs_before: int  # runs on each side that the magnitude compares
    runs_after: int
    before: float  # pooled medians of the two sides
    after: float
    ratio: float  # after / before, with its 95 % bootstrap interval
    ci_low: float
    ci_high: float
    environment: list[str]
    new: bool = False  # among the last N runs of the series (--fail-on-new-regression N)

    @property
    def run(self) -> Run:
        return self.series.runs[self.index]

    @property
    def previous(self) -> Run:
        return self.series.runs[self.index - 1]

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    @property
    def regression(self) -> bool:
        return self.ratio < 1.0 if self.series.higher_is_better else self.ratio > 1.0

    @property
    def direction(self) -> str:
        return "regression" if self.regression else "improvement"


@dataclass(frozen=True)
class NumericsIssue:
    """A run whose loss curve left the rule against the run before it (or held a NaN/inf)."""

    series: Series
    index: int
    verdict: CurveVerdict
    new: bool = False

    @property
    def run(self) -> Run:
        return self.series.runs[self.index]


@dataclass
class SeriesResult:
    series: Series
    changes: list[ChangePoint] = field(default_factory=list)
    numerics: list[NumericsIssue] = field(default_factory=list)
    numerics_checked: int = 0  # curves compared (runs with a curve and a predecessor with one)
    power: Power | None = None  # what the gate can detect (None: too short to test)

    @property
    def too_short(self) -> bool:
        return len(self.series.runs) < MIN_SERIES_RUNS

    @property
    def not_gated(self) -> bool:
        """Tested, but its noise hides a shift of the target size (or could not be estimated)."""
        return self.power is not None and not self.power.gated

    @property
    def failing(self) -> list[ChangePoint | NumericsIssue]:
        """What fails the gate: new regressions and new numerics failures."""
        return [c for c in self.changes if c.new and c.regression] + [n for n in self.numerics if n.new]


@dataclass
class History:
    """Every series' result, and the gate's window (None: report only, exit 0)."""

    metric: str
    results: list[SeriesResult]
    window: int | None = None
    numerics: bool = True
    detector: str = ""
    # The cluster's measured links over time: bench.analysis.history.links rows of the stored preflights.
    links: list[list[str]] = field(default_factory=list)
    # The hosts that keep being slow over the stored runs (bench.analysis.slow_hosts), one line each.
    slow_hosts: list[str] = field(default_factory=list)
    target_shift: float = DEFAULT_TARGET_SHIFT  # a series that cannot detect this shift is not gated
    fail_on_ungated: bool = False  # with a gate: such a series fails it too

    @property
    def changes(self) -> list[ChangePoint]:
        """Every change point, newest first."""
        found = [c for r in self.results for c in r.changes]
        return sorted(found, key=lambda c: (c.run.started_at, c.series.label), reverse=True)

    @property
    def numerics_issues(self) -> list[NumericsIssue]:
        found = [n for r in self.results for n in r.numerics]
        return sorted(found, key=lambda n: n.run.started_at, reverse=True)

    @property
    def too_short(self) -> list[SeriesResult]:
        return [r for r in self.results if r.too_short]

    @property
    def failing(self) -> list[ChangePoint | NumericsIssue]:
        return [item for r in self.results for item in r.failing]

    @property
    def not_gated(self) -> list[SeriesResult]:
        return [r for r in self.results if r.not_gated]

    @property
    def fails_ungated(self) -> bool:
        """Whether the series that cannot be gated fail the gate (--fail-on-ungated) and there are some."""
        return self.window is not None and self.fail_on_ungated and bool(self.not_gated)

    @property
    def exit_code(self) -> int:
        """1 when the gate is on and something new failed it (or, with --fail-on-ungated, a series
        cannot be gated), else 0 (bad input is 2, before this)."""
        return 1 if self.window is not None and (self.failing or self.fails_ungated) else 0


def analyse_series(
    series: Series,
    *,
    window: int | None = None,
    numerics: bool = True,
    loss_rtol: float = LOSS_RTOL,
    detector: Callable[[Sequence[float]], list[Detected]] = detect,
    intervals: bool = True,
    target_shift: float = DEFAULT_TARGET_SHIFT,
) -> SeriesResult:
    """Change points (with magnitudes) and numerics issues of one series. For
    scripts/validate_history.py: `detector`, another implementation; `intervals=False`, each change's
    ratio without its bootstrap (medians and bounds NaN), which is all the gate needs."""
    (result,) = _analysed(
        [(series, numerics)], window, loss_rtol, at_once(lambda many: [detector(v) for v in many]), intervals
    )
    add_power([result], window, target_shift)
    return result


# Asks for the change points of many series' values at once and gives the function that returns them
# (waiting for them): bench.analysis.history.detect.detect_each here (`at_once`), or by the worker
# pool of `fsdp-bench history`, which finds them while this process checks the loss curves.
DetectEach = Callable[[list[list[float]]], Callable[[], list[list[Detected]]]]


def at_once(detect_many: Callable[[list[list[float]]], list[list[Detected]]]) -> DetectEach:
    """A DetectEach that finds the change points in this process, when asked."""

    def ask(values_of: list[list[float]]) -> Callable[[], list[list[Detected]]]:
        found = detect_many(values_of)
        return lambda: found

    return ask


# The change points found in this process (bench.analysis.history.detect.detect_each).
DETECT_HERE = at_once(detect_each)


def _analysed(
    chosen: Sequence[tuple[Series, bool]],
    window: int | None,
    loss_rtol: float,
    detect_many: DetectEach,
    intervals: bool,
) -> list[SeriesResult]:
    """`analyse_series` of each (series, numerics guard on), with the magnitudes of every change point
    of every series bootstrapped in one bench.analysis.stats.compare_many call: the numbers of one
    comparison at a time (each depends only on its own samples), in a few vectorised passes instead
    of two per change point."""
    tested = [s.values for s, _ in chosen if len(s.runs) >= MIN_SERIES_RUNS]
    answer = detect_many(tested) if tested else list
    # The loss curves need no change point: checked while they are found (by the command's worker pool).
    curves = [
        numerics_along(series, _first_new(series, window), loss_rtol) if numerics else None
        for series, numerics in chosen
    ]
    detections = iter(answer())
    found = [(s, next(detections) if len(s.runs) >= MIN_SERIES_RUNS else []) for s, _ in chosen]
    sides = []  # (series' position, its change point, runs before, runs after) of every change point
    for position, (series, detected) in enumerate(found):
        bounds = [0, *(d.index for d in detected), len(series.runs)]
        for i, point in enumerate(detected):
            before, after = series.runs[bounds[i] : point.index], series.runs[point.index : bounds[i + 2]]
            sides.append((position, point, before, after))
    if intervals and sides:
        # The shift tests' p-values are not shown (a change's significance is the detector's t-test).
        pairs = [found[p][0].samples(before, after) for p, _, before, after in sides]
        steps = compare_many(pairs, shift_tests=False)
        levels = [
            (c.baseline, c.current, c.ratio, c.ci_low, c.ci_high)
            for c in (found[p][0].comparison(b, a, s) for (p, _, b, a), s in zip(sides, steps, strict=True))
        ]
    else:
        levels = [(math.nan, math.nan, found[p][0].ratio(b, a), math.nan, math.nan) for p, _, b, a in sides]
    results = [SeriesResult(series) for series, _ in chosen]
    for (position, point, before, after), level in zip(sides, levels, strict=True):
        series = found[position][0]
        first_new = _first_new(series, window)
        environment = env_changes(series.runs[point.index - 1].record, series.runs[point.index].record)
        results[position].changes.append(
            ChangePoint(
                series,
                point.index,
                point.pvalue,
                len(before),
                len(after),
                *level,
                environment,
                new=point.index >= first_new,
            )
        )
    for result, checked in zip(results, curves, strict=True):
        if checked is not None:
            result.numerics, result.numerics_checked = checked
    return results


def _first_new(series: Series, window: int | None) -> int:
    """The index of a series' first run within the gate's window (past the end without a gate)."""
    return len(series.runs) - window if window is not None else len(series.runs)


def numerics_along(series: Series, first_new: int, rtol: float = LOSS_RTOL) -> tuple[list[NumericsIssue], int]:
    """Each run's loss curve against the run before it: (the runs that failed, curves compared).

    The first run's curve has no reference, but a NaN/inf in it still fails.
    """
    issues, checked = [], 0
    previous = None
    for index, run in enumerate(series.runs):
        curve = run.record.metrics.losses
        if not curve:
            continue
        reference = previous.record.metrics.losses if previous is not None else None
        before, now = (previous.record.env if previous else None), run.record.env
        exact = before is not None and exact_rule(
            before.fingerprint(), now.fingerprint(), run.record.spec.device_type, before.hostnames, now.hostnames
        )
        verdict = compare_curves(reference, curve, exact=exact, rtol=rtol)
        checked += reference is not None
        if verdict.fails:
            issues.append(NumericsIssue(series, index, verdict, new=index >= first_new))
        previous = run
    return issues, checked


def add_power(results: Sequence[SeriesResult], window: int | None, target_shift: float) -> None:
    """Each tested series' Power (bench.analysis.history.power): its noise within the segments
    between its change points, and the shift the gate on its last `window` runs detects."""
    for result in results:
        if not result.too_short:
            series = result.series
            result.power = series_power(
                series.values, [c.index for c in result.changes], window=window, target=target_shift,
                higher_is_better=series.higher_is_better,
            )  # fmt: skip


def analyse(
    series: list[Series], *, metric: str, window: int | None = None, numerics: bool = True,
    loss_rtol: float = LOSS_RTOL, detector: str = "", detect_many: DetectEach = DETECT_HERE,
    target_shift: float = DEFAULT_TARGET_SHIFT, fail_on_ungated: bool = False,
) -> History:  # fmt: skip
    """The history of every series, longest first. `detect_many`: where the change points are found
    (`fsdp-bench history` asks its worker pool, which imported the detector meanwhile)."""
    # An efficiency series' runs are its largest node count's records, whose curves that series checks.
    chosen = [(s, numerics and s.metric != EFFICIENCY) for s in series]
    results = _analysed(chosen, window, loss_rtol, detect_many, intervals=True)
    add_power(results, window, target_shift)
    results.sort(key=lambda r: (-len(r.series.runs), r.series.label))
    return History(
        metric, results, window, numerics, detector, target_shift=target_shift, fail_on_ungated=fail_on_ungated
    )
