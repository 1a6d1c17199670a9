"""The one statistics engine: medians, bootstrap intervals, shift tests and scaling efficiency.

Every number that summarises timings goes through here: the sweep's summary table, the report,
`check`, `ab`, `history` and the planner's compare. So the same records give the same number
everywhere.

Timings arrive as *runs*: one list of per-step step times per run (a run is one record; repeats
of a point, `sweep.repeats`, are several runs of it). The conventions:

- **center**: the median of every step of every run pooled; tokens/s is tokens per step over it.
  For one run this is exactly the record's own `tokens_per_s`.
- **interval**: a two-level percentile bootstrap: resample runs with replacement, then steps
  within each chosen run, and take the pooled median; so with several runs the interval carries
  the run-to-run spread that steps of one run cannot show. Callers decide how many runs an
  interval needs (`MIN_RUNS` by default: with one run, step-to-step noise understates the spread,
  so reports show no interval and `check` does not gate).
- **ratios** (current over baseline, N nodes over the baseline node count) resample the two
  sides independently, on two fixed random streams, so the interval of a ratio is the same
  whichever command computes it.

The random draws depend only on the run lengths and the stream, never on the data or on what
else is being bootstrapped: a report bootstraps thousands of cells in a few vectorised calls, and
`check` compares thousands of points in a few (`compare_many`), and each still gets, for each cell
or point, what it would get for that one alone. Each resample's median is found by selection on the
steps' ranks, not as the median of gathered values: a running count of each resample's draws over
the sorted steps (`_counted_medians`, one-byte counts while a resample draws at most 255 steps)
gives the ranks of its two middle values; the same two middle values, the same numbers, a fraction
of the work. `compare_many` tests shifts with scipy's normal approximation computed in numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import TYPE_CHECKING

from bench.schema.identity import canonical_json, without
from bench.schema.spec import SERIES_DROPPED

# numpy is imported inside the functions that compute with it: `plan` reads only scaling_key and
# scaling_efficiency from here, and its start-up need not pay for numpy's import.
if TYPE_CHECKING:
    import numpy as np

# 2,000 resamples: enough that reseeding moves a 95 % interval's bounds by a small part of its width
# (how much, and where the most: docs/reports.md).
N_BOOT = 2000
CONFIDENCE = 0.95
# The level as printed ("95"): every "95% CI" in a table or a message is formatted from CONFIDENCE.
CONFIDENCE_PCT = f"{CONFIDENCE * 100:g}"
SEED = 0
MIN_RUNS = 2
# The two sides of a ratio use independent streams: NUMERATOR for the current / scaled side,
# DENOMINATOR for the baseline. A lone interval uses NUMERATOR.
NUMERATOR, DENOMINATOR = 0, 1

Runs = Sequence[Sequence[float]]


def clean_runs(runs: Runs) -> list[np.ndarray]:
    """Runs as float arrays, empty runs dropped."""
    import numpy as np

    return [np.asarray(r, dtype=float) for r in runs if len(r)]


def _pooled(runs: Runs) -> tuple[tuple[int, ...], np.ndarray | None]:
    """(lengths of the non-empty runs, their steps concatenated as floats; None without a step):
    clean_runs concatenated, in one conversion where the runs are lists (the report's)."""
    import numpy as np

    lengths = tuple(filter(None, map(len, runs)))
    if not lengths:
        return lengths, None
    if all(type(run) is list for run in runs):
        return lengths, np.array(list(chain.from_iterable(runs)), dtype=float)
    return lengths, np.concatenate(clean_runs(runs))


def pooled_median(runs: Runs) -> float:
    """The center of a set of runs: the median of all their steps pooled (NaN when empty)."""
    import numpy as np

    arrays = clean_runs(runs)
    return float(np.median(np.concatenate(arrays))) if arrays else float("nan")


def pooled_medians(items: Sequence[Runs]) -> np.ndarray:
    """pooled_median of each item, the items of one total number of steps in one np.median call
    (the same numbers: np.median of each row is np.median of that row alone)."""
    import numpy as np

    out = np.full(len(items), np.nan)
    groups: dict[int, list[tuple[int, np.ndarray]]] = {}
    for position, runs in enumerate(items):
        _, steps = _pooled(runs)
        if steps is not None:
            groups.setdefault(len(steps), []).append((position, steps))
    for members in groups.values():
        positions = [position for position, _ in members]
        out[positions] = np.median(np.stack([steps for _, steps in members]), axis=1)
    return out


@lru_cache(maxsize=256)
def _resample_plan(lengths: tuple[int, ...], stream: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """(flat indices into the concatenated runs, validity mask), each (n_boot, runs x widest run).

    Depends only on the run lengths and the stream: every item with these lengths is resampled
    the same way, whatever else is in the batch.
    """
    import numpy as np

    rng = np.random.default_rng([SEED, stream, *lengths])
    lens = np.asarray(lengths)
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
    picked = rng.integers(0, len(lens), size=(n_boot, len(lens)))
    width = int(lens.max())
    steps = (rng.random((n_boot, len(lens), width)) * lens[picked][..., None]).astype(np.int64)
    valid = np.arange(width) < lens[picked][..., None]
    index = np.where(valid, offsets[picked][..., None] + steps, 0)
    return index.reshape(n_boot, -1), valid.reshape(n_boot, -1)


def _rank_dtype(total: int):
    """The smallest unsigned type that holds ranks 0..total (total itself is the empty slot's sentinel)."""
    import numpy as np

    return np.uint8 if total <= 0xFF else np.uint16 if total <= 0xFFFF else np.int64


def _medians_of_gathered(data: np.ndarray, index: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The median of the gathered values themselves: for rows holding a NaN (which np.median propagates)."""
    import numpy as np

    values = data[:, index]
    if valid.all():
        return np.median(values, axis=2)
    return np.nanmedian(np.where(valid, values, np.nan), axis=2)


def bootstrap_medians(items: Sequence[Runs], stream: int = NUMERATOR, n_boot: int = N_BOOT) -> np.ndarray:
    """(len(items), n_boot) bootstrap pooled medians; rows of empty items are NaN.

    Items with the same run lengths share one resampling plan and are computed together (`_bootstrap_rows`).
    """
    import numpy as np

    out = np.full((len(items), n_boot), np.nan)
    groups: dict[tuple[int, ...], list[tuple[int, np.ndarray]]] = {}
    for position, runs in enumerate(items):
        lengths, steps = _pooled(runs)
        if steps is not None:
            groups.setdefault(lengths, []).append((position, steps))
    for lengths, members in groups.items():
        positions = np.array([position for position, _ in members])
        data = np.stack([flat for _, flat in members])  # (items, total steps)
        _bootstrap_rows(data, lengths, stream, n_boot, out=out, rows=positions)
    return out


def percentile_interval(
    boot: np.ndarray, confidence: float = CONFIDENCE, *, overwrite_input: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise percentile interval of a (rows, n_boot) array (NaN rows give NaN bounds).

    `overwrite_input`: `boot` is scratch (a ratio matrix made for this), reordered along its rows in
    place where every row is whole instead of copied, as np.percentile's own option of the name: the
    same numbers."""
    import numpy as np

    boot = np.atleast_2d(boot)
    tail = (1.0 - confidence) / 2 * 100
    with np.errstate(all="ignore"):
        low = np.full(len(boot), np.nan)
        high = np.full(len(boot), np.nan)
        nan = np.isnan(boot)
        whole = ~nan.any(axis=1)  # np.percentile's numbers on these rows: nanpercentile's, in one call
        if whole.all():  # the usual case: the rows as they are, not a copy of them
            low[:], high[:] = _row_percentiles(boot, [tail, 100 - tail], overwrite_input)
        elif whole.any():  # those rows, a block of them copied at a time
            low[whole], high[whole] = _row_percentiles(boot, [tail, 100 - tail], only=np.flatnonzero(whole))
        partial = nan.any(axis=1) & ~nan.all(axis=1)
        if partial.any():
            low[partial], high[partial] = np.nanpercentile(boot[partial], [tail, 100 - tail], axis=1)
    return low, high


# Rows partitioned at a time where the rows are not scratch (the copy a partition needs: a block's).
_PARTITION_ROWS = 64


def _row_percentiles(
    rows: np.ndarray, percents: Sequence[float], overwrite_input: bool = False, only: np.ndarray | None = None
) -> list[np.ndarray]:
    """np.percentile(rows, percents, axis=1) of rows without NaN (`only`: of these rows of `rows`): the
    order statistics either side of (n - 1) x q found by one partition along the rows (a vectorised
    partition along the rows is faster than the one np.percentile runs across them, and than sorting
    them), then np.percentile's own arithmetic (its "linear" method,
    interpolated as its `_lerp` does), so the same numbers. Rows that are not scratch are copied and
    partitioned a block at a time: a report's thousands of cells would take a copy of them all."""
    import numpy as np

    n = rows.shape[1]
    inside = [(n - 1) * q for q in np.true_divide(percents, 100) if 0 <= (n - 1) * q < n - 1]
    ranks = sorted({rank for virtual in inside for rank in (int(np.floor(virtual)), int(np.floor(virtual)) + 1)})
    at_ends = len(inside) < len(percents)  # np.percentile reads those rows as they are (in any order)
    if only is not None and (at_ends or not ranks):  # the rows themselves are read: a copy of them
        rows, only, overwrite_input = rows[only], None, True
    column = {rank: rank for rank in ranks}  # where each order statistic is found in `ordered`
    if not ranks:
        ordered = rows
    elif overwrite_input and only is None:  # np.percentile at an end (below) reads the rows in any order
        rows.partition(ranks, axis=1)
        ordered = rows
    else:  # a block of rows copied and partitioned at a time, its order statistics kept
        selected = np.arange(len(rows)) if only is None else only
        ordered = np.empty((len(selected), len(ranks)), dtype=rows.dtype)
        for start in range(0, len(selected), _PARTITION_ROWS):
            block = rows[selected[start : start + _PARTITION_ROWS]]
            block.partition(ranks, axis=1)
            ordered[start : start + _PARTITION_ROWS] = block[:, ranks]
        column = {rank: position for position, rank in enumerate(ranks)}
    bounds = []
    for quantile in np.true_divide(percents, 100):
        virtual = (n - 1) * quantile
        if not 0 <= virtual < n - 1:  # at an end np.percentile takes the end itself: let it
            bounds.append(np.percentile(rows, quantile * 100, axis=1))
            continue
        below = int(np.floor(virtual))
        gamma = virtual - below
        lower, upper = ordered[:, column[below]], ordered[:, column[below + 1]]
        step = upper - lower
        bounds.append(upper - step * (1 - gamma) if gamma >= 0.5 else lower + step * gamma)
    return bounds


def median_ci(runs: Runs, min_runs: int = MIN_RUNS) -> tuple[float, float, float]:
    """(pooled median, low, high); NaN bounds with fewer than `min_runs` runs."""
    center = pooled_median(runs)
    if len(clean_runs(runs)) < min_runs:
        return center, float("nan"), float("nan")
    low, high = percentile_interval(bootstrap_medians([runs]))
    return center, float(low[0]), float(high[0])


def ratio_ci(
    numerator: Runs, denominator: Runs, scale: float = 1.0, min_runs: int = MIN_RUNS
) -> tuple[float, float, float]:
    """median(numerator) / median(denominator) / scale, with its bootstrap interval.

    NaN bounds when either side has fewer than `min_runs` runs.
    """
    num, den = pooled_median(numerator), pooled_median(denominator)
    point = num / den / scale if den else float("nan")
    if min(len(clean_runs(numerator)), len(clean_runs(denominator))) < min_runs:
        return point, float("nan"), float("nan")
    ratios = bootstrap_medians([numerator], NUMERATOR) / bootstrap_medians([denominator], DENOMINATOR) / scale
    low, high = percentile_interval(ratios)
    return point, float(low[0]), float(high[0])


def ratio_interval(
    numerator_boot: np.ndarray, denominator_boot: np.ndarray, scale=None
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise interval of precomputed bootstrap medians' ratios (the vectorised ratio_ci); `scale`
    None is a scale of 1 without a pass dividing by it (x / 1 is x: the same numbers)."""
    import numpy as np

    ratios = numerator_boot / denominator_boot
    if scale is not None:
        ratios = ratios / np.asarray(scale, dtype=float).reshape(-1, 1)
    return percentile_interval(ratios, overwrite_input=True)  # ratios: made here, scratch


def shift_p_values(baseline: Runs, current: Runs) -> tuple[float, float]:
    """One-sided Mann-Whitney U p-values on the pooled steps: (current tends greater, current tends less)."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    base, cur = np.concatenate(clean_runs(baseline)), np.concatenate(clean_runs(current))
    if np.all(base == base[0]) and np.all(cur == base[0]):
        return 1.0, 1.0  # identical constant samples: no evidence of any shift (scipy would give nan)
    greater = float(mannwhitneyu(cur, base, alternative="greater").pvalue)
    less = float(mannwhitneyu(cur, base, alternative="less").pvalue)
    return greater, less


def family_alpha(alpha: float, tests: int) -> float:
    """Each test's significance level when `tests` shift tests are judged together and any one of them
    fails the whole (Bonferroni): the chance that any is significant by chance alone stays below
    `alpha`. `make bench` judges every benchmark on up to two clocks in one sitting: at `alpha`
    each, one of that many tests of identical code is "significant" by chance too often."""
    return alpha / max(tests, 1)


@dataclass(frozen=True)
class Comparison:
    """Current vs baseline step times: medians, their ratio with its interval, shift p-values."""

    baseline_median: float
    current_median: float
    ratio: float  # current / baseline
    ci_low: float
    ci_high: float
    p_greater: float  # current's steps tend to be longer
    p_less: float  # current's steps tend to be shorter
    n_baseline: int  # steps
    n_current: int
    runs_baseline: int
    runs_current: int


def compare_runs(baseline: Runs, current: Runs) -> Comparison:
    """Compare two sides' runs of step times (ValueError when a side has no steps).

    The interval is computed whatever the number of runs: callers decide whether it may gate.
    """
    return compare_many([(baseline, current)])[0]


def compare_many(pairs: Sequence[tuple[Runs, Runs]], *, shift_tests: bool = True) -> list[Comparison]:
    """compare_runs of every (baseline, current) pair, computed together: the same numbers as one
    pair at a time (each pair's resamples depend only on its run lengths and the streams). `check`
    compares thousands of points this way: pairs of the same run lengths on both sides are stacked
    into two arrays, and their medians, bootstraps (`_bootstrap_rows`, as bootstrap_medians), intervals and U tests
    are a few vectorised calls per shape. `shift_tests=False`: no U tests (p-values NaN), for a
    caller that reads only the medians and intervals (history's change magnitudes), which then
    needs no scipy."""
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
    for position, (baseline, current) in enumerate(pairs):
        shape = (_run_lengths(baseline), _run_lengths(current))
        if not shape[0] or not shape[1]:
            raise ValueError("compare_runs: each side needs at least one step")
        groups.setdefault(shape, []).append(position)
    out: list[Comparison | None] = [None] * len(pairs)
    for (base_lengths, cur_lengths), positions in groups.items():
        base = _stacked_steps([pairs[position][0] for position in positions])
        cur = _stacked_steps([pairs[position][1] for position in positions])
        compared = _compare_stacked(base, base_lengths, cur, cur_lengths, shift_tests)
        for position, comparison in zip(positions, compared, strict=True):
            out[position] = comparison
    return out  # type: ignore[return-value]


def _run_lengths(runs: Runs) -> tuple[int, ...]:
    """The lengths of the runs clean_runs keeps (the empty ones dropped)."""
    return tuple(n for n in map(len, runs) if n)


def _stacked_steps(items: Sequence[Runs]) -> np.ndarray:
    """(items, steps) every item's steps, its runs concatenated (items of one run-length shape)."""
    import numpy as np

    return np.array([[step for run in runs for step in run] for runs in items], dtype=float)


def _compare_stacked(
    base: np.ndarray, base_lengths: tuple[int, ...], cur: np.ndarray, cur_lengths: tuple[int, ...],
    shift_tests: bool = True,
) -> list[Comparison]:  # fmt: skip
    """The Comparison of each row pair of `base` and `cur` (their steps, runs of these lengths)."""
    import numpy as np

    numerators = _bootstrap_rows(cur, cur_lengths, NUMERATOR)
    denominators = _bootstrap_rows(base, base_lengths, DENOMINATOR)
    lows, highs = ratio_interval(numerators, denominators)
    base_medians, cur_medians = np.median(base, axis=1).tolist(), np.median(cur, axis=1).tolist()
    runs = (len(base_lengths), len(cur_lengths))
    p_values = _stacked_shift_p_values(base, cur) if shift_tests else [(math.nan, math.nan)] * len(base)
    return [
        Comparison(
            baseline_median=base_median,
            current_median=cur_median,
            ratio=cur_median / base_median if base_median else float("nan"),
            ci_low=low,
            ci_high=high,
            p_greater=p_greater,
            p_less=p_less,
            n_baseline=base.shape[1],
            n_current=cur.shape[1],
            runs_baseline=runs[0],
            runs_current=runs[1],
        )
        for base_median, cur_median, low, high, (p_greater, p_less) in zip(
            base_medians, cur_medians, lows.tolist(), highs.tolist(), p_values, strict=True
        )
    ]


def _bootstrap_rows(
    data: np.ndarray,
    lengths: tuple[int, ...],
    stream: int,
    n_boot: int = N_BOOT,
    *,
    out: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """bootstrap_medians of each row of `data` (the steps of runs of these lengths, concatenated):
    finite rows by the running count (`_counted_medians`), rows with a non-finite step as the median
    of the gathered values (which propagates a NaN as np.median does). Written into `out`'s `rows`
    (row i of `data` into row rows[i]; `out` returned) where given: a report's thousands of cells
    fill one array, not one per step and a copy."""
    import numpy as np

    if out is None:
        out = np.empty((len(data), n_boot))
    if rows is None:
        rows = np.arange(len(data))
    finite = np.isfinite(data).all(axis=1)
    if finite.any():
        _counted_medians(data[finite], _draw_counts(lengths, stream, n_boot), out, rows[finite])
    if not finite.all():
        out[rows[~finite]] = _medians_of_gathered(data[~finite], *_resample_plan(lengths, stream, n_boot))
    return out


@dataclass(frozen=True)
class _DrawCounts:
    """A resampling plan as counts (data-independent, cached): `counts[i, b]` is how often resample
    b drew step i (the plan of `_resample_plan`, the same draws), in the smallest unsigned type that
    holds every resample's total count; `low`/`high` the order statistics whose mean is each
    resample's median (equal for an odd count), in that type too, and one number each where every
    resample has the same count (runs of one length): comparing with a scalar is cheaper than
    with a row."""

    counts: np.ndarray  # (steps, n_boot)
    low: np.ndarray | np.generic  # (n_boot,) or one for all
    high: np.ndarray | np.generic


@lru_cache(maxsize=256)
def _draw_counts(lengths: tuple[int, ...], stream: int, n_boot: int) -> _DrawCounts:
    import numpy as np

    index, valid = _resample_plan(lengths, stream, n_boot)
    total = sum(lengths)
    per_resample = valid.sum(axis=1)
    dtype = _rank_dtype(max(total, int(per_resample.max())))
    resample = np.broadcast_to(np.arange(n_boot)[:, None], index.shape)
    counts = np.bincount(index[valid] * n_boot + resample[valid], minlength=total * n_boot)
    low, high = ((per_resample - 1) // 2).astype(dtype), (per_resample // 2).astype(dtype)
    if (per_resample == per_resample[0]).all():
        low, high = low[0], high[0]
    return _DrawCounts(counts.reshape(total, n_boot).astype(dtype), low, high)


# Items per block of the running count: its (items x n_boot) counters stay in the CPU's cache.
_RUNNING_ITEMS = 64


def _counted_medians(data: np.ndarray, plan: _DrawCounts, out: np.ndarray, rows: np.ndarray) -> None:
    """The pooled medians of `data`'s finite rows resampled by `plan`, row i's n_boot of them written
    into out[rows[i]]: the medians of the gathered values (the same two middle values, averaged alike) by a running count. Each row is sorted once; walking its steps from the smallest up, a
    resample's draws so far are a sum of the plan's count rows, and the k-th order statistic's rank
    is the number of steps at which that sum is still at most k. One pass of small integer adds per
    step, on (items x n_boot) counters that stay in cache, instead of a (steps x steps) product and
    reductions along the shortest axis."""
    import numpy as np

    items, total = data.shape
    order = np.argsort(data, axis=1, kind="stable")  # (items, steps): the step at each rank
    ordered = np.take_along_axis(data, order, axis=1)
    n_boot = plan.counts.shape[1]
    for start in range(0, items, _RUNNING_ITEMS):
        steps = order[start : start + _RUNNING_ITEMS]
        shape = (len(steps), n_boot)
        drawn, low, high = (np.zeros(shape, dtype=plan.counts.dtype) for _ in range(3))
        below = np.empty(shape, dtype=bool)
        for rank in range(total):
            np.add(drawn, plan.counts[steps[:, rank]], out=drawn)  # draws at or below this rank
            np.less_equal(drawn, plan.low, out=below)
            np.add(low, below.view(np.uint8), out=low)
            np.less_equal(drawn, plan.high, out=below)
            np.add(high, below.view(np.uint8), out=high)
        flat = ordered[start : start + _RUNNING_ITEMS].ravel()
        row = (np.arange(len(steps)) * total)[:, None]  # where each item's sorted row starts in `flat`
        out[rows[start : start + _RUNNING_ITEMS]] = (flat[row + low] + flat[row + high]) / 2


# Above this many steps per side scipy's U test is the normal approximation whatever the ties
# (scipy.stats._mannwhitneyu._mwu_choose_method), so samples of one size can be tested in one call
# with each row's own tie correction: the p-values one call per pair gives.
_ASYMPTOTIC_ABOVE = 8


def _stacked_shift_p_values(base: np.ndarray, cur: np.ndarray) -> list[tuple[float, float]]:
    """shift_p_values of each row pair of `base` and `cur`: above `_ASYMPTOTIC_ABOVE` steps a side
    all at once by `_u_test_normal`, but the rows scipy would not test so (a non-finite step, or one
    value on both sides), which go to shift_p_values one at a time, as do smaller samples."""
    import numpy as np

    constant = (base == base[:, :1]).all(axis=1) & (cur == base[:, :1]).all(axis=1)
    finite = np.isfinite(base).all(axis=1) & np.isfinite(cur).all(axis=1)
    batched = ~constant & finite & (min(base.shape[1], cur.shape[1]) > _ASYMPTOTIC_ABOVE)
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(base)
    if batched.any():
        tested = _u_test_normal(cur[batched], base[batched])
        for position, p_values in zip(np.flatnonzero(batched), tested, strict=True):
            out[position] = p_values
    for position in np.flatnonzero(~batched):
        out[position] = shift_p_values([base[position]], [cur[position]])
    return out


def _u_test_normal(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
    """(p x tends greater, p x tends less) of each row pair of `x` (items, n1) and `y` (items, n2):
    the one-sided Mann-Whitney U tests by the normal approximation with tie and continuity
    corrections, as scipy.stats.mannwhitneyu(x, y, alternative=..., method="asymptotic") computes
    them, step by step: the same U (mid-ranks are halves, so their sums are exact), the same tie
    term and z; the normal tail by math.erf/erfc as scipy's ndtr composes it (agreeing to a few
    units in the last place). Here so that `check` need not import scipy.stats (the slowest of its imports).
    Rows must be finite and not all one value."""
    import numpy as np

    n1, n2 = x.shape[1], y.shape[1]
    n = n1 + n2
    xy = np.concatenate([x, y], axis=1)
    order = np.argsort(xy, axis=1, kind="stable")
    ordered = np.take_along_axis(xy, order, axis=1)
    position = np.broadcast_to(np.arange(n), xy.shape)
    starts = np.ones(xy.shape, dtype=bool)  # each sorted value that begins a run of ties
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones(xy.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, n)[:, ::-1], axis=1)[:, ::-1]
    mid_ranks = (first + last) / 2 + 1  # 1-based average rank of each sorted value
    r1 = np.where(order < n1, mid_ranks, 0.0).sum(axis=1)
    u1 = r1 - n1 * (n1 + 1) / 2
    ties = np.where(starts, last - first + 1, 0).astype(float)
    tie_term = (ties**3 - ties).sum(axis=-1)
    s = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    mu = n1 * n2 / 2
    with np.errstate(divide="ignore", invalid="ignore"):  # as scipy: an infinite z has a tail of 0 or 1
        z_greater = (u1 - mu - 0.5) / s
        z_less = ((n1 * n2 - u1) - mu - 0.5) / s
    return [(_normal_sf(g), _normal_sf(le)) for g, le in zip(z_greater.tolist(), z_less.tolist(), strict=True)]


def _normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z, composed as scipy's ndtr(-z) (cephes): erf near 0, erfc in the tails."""
    x = -z * math.sqrt(0.5)
    if abs(x) < math.sqrt(0.5):
        return min(max(0.5 + 0.5 * math.erf(x), 0.0), 1.0)
    tail = 0.5 * math.erfc(abs(x))
    return min(max(1.0 - tail if x > 0 else tail, 0.0), 1.0)


def scaling_efficiency(tokens_per_s, baseline_tokens_per_s, nodes, baseline_nodes):
    """Linear-scaling efficiency: (tokens/s at N / tokens/s at the baseline) / (N / baseline nodes).

    Weak scaling (fixed per-device batch) and strong scaling (fixed global batch) use the same
    formula; what differs is which points form a series. Works on numbers and on pandas/numpy arrays.
    """
    return tokens_per_s / baseline_tokens_per_s / (nodes / baseline_nodes)


def series_key(identity: dict, *, across_nodes: bool = False) -> str:
    """The key of a history series: a point's identity without the fields whose role leaves them
    out of a series (bench/schema/spec.py `SERIES_DROPPED`: its repeat index and its `debug` knobs),
    so runs of one workload configuration across sweeps, dates and software versions form one
    series, and a slowdown injected with `debug.slow_fraction` stays in it (history shows changed knobs
    like an environment change). `across_nodes`: also without what scales (the scaling_key rule), the
    family whose efficiency at its largest node count history follows."""
    key = without(identity, SERIES_DROPPED)
    if across_nodes:
        return scaling_key(key)
    return canonical_json(key)


def scaling_key(identity: dict, mode: str = "weak", text: Callable[[dict], str] = canonical_json) -> str:
    """The key of a scaling series: a point's identity without what scales (nodes, world size) and
    its repeat index. Weak scaling keeps the per-device batch (micro-batch, accumulation); strong
    scaling keeps the global batch instead. Used by the report and the planner alike (the planner
    passes its IdentityMemo's `canonical_json` as `text`: the same text, written faster)."""
    key = {k: v for k, v in identity.items() if k not in ("nodes", "world_size", "repeat")}
    if mode == "strong":
        train = dict(key.get("train") or {})
        world = identity.get("nodes", 1) * identity.get("gpus_per_node", 1)
        key["global_batch"] = world * train.pop("micro_batch", 1) * train.pop("grad_accum", 1)
        key["train"] = train
    elif mode != "weak":
        raise ValueError(f"scaling mode: {mode!r}; allowed: weak, strong")
    return text(key)


def rank_correlation(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Spearman's rank correlation between predicted and measured values of the same items (ties
    share their mean rank); NaN with fewer than 3 items or when either side is constant. Used by
    the report's autotune section and the planner's compare."""
    import numpy as np
    from scipy.stats import spearmanr

    x, y = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def stragglers(values: dict, k: float = 3.0, floor: float = 0.10) -> dict:
    """Keys whose value (a time) exceeds the median by more than max(k x MAD, floor x median), as
    key -> fraction over the median (Megatron's straggler rule: robust to the outlier it looks for).

    With two values the median absolute deviation cannot tell which one is off, so the floor alone
    decides; with one there is nothing to compare.
    """
    import numpy as np

    if len(values) < 2:
        return {}
    data = np.asarray(list(values.values()), dtype=float)
    median = float(np.median(data))
    mad = float(np.median(np.abs(data - median))) if len(values) >= 3 else 0.0
    limit = max(k * mad, floor * median)
    return {key: value / median - 1 for key, value in values.items() if value - median > limit}
