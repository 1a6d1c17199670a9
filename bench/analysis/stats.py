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
steps' ranks, not as the median of gathered values: its draws counted in rank order (one-byte
counts while a resample draws at most 255 steps) give the ranks of its two middle values; the same
two middle values, the same numbers, a fraction of the work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import TYPE_CHECKING

from bench.schema.identity import canonical_json, without
from bench.schema.spec import SERIES_DROPPED

# numpy is imported inside the functions that compute with it: `plan` reads only scaling_key and
# scaling_efficiency from here, and importing numpy is a quarter of a second of its start-up.
if TYPE_CHECKING:
    import numpy as np

# 2,000 resamples: reseeded, a 95 % interval's bounds move by a median 3 % of its width (at most 27 %,
# where 2 runs of 3 steps leave the resampled medians a handful of values); docs/reports.md.
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


@dataclass(frozen=True)
class _RankPlan:
    """A resampling plan as the median kernel reads it (data-independent, cached with the plan).

    `counts[i, b]` is how often resample b drew step i (one row per step: a step's counts for every
    resample are one contiguous row); `low`/`high` are the order statistics whose mean is each
    resample's median (equal for an odd count), one per resample.
    """

    counts: np.ndarray  # (steps, n_boot), the smallest unsigned type that holds a resample's draws
    low: np.ndarray  # (n_boot,)
    high: np.ndarray
    full: bool  # every slot filled: every resample has the same count, so the same two order statistics


@lru_cache(maxsize=256)
def _rank_plan(lengths: tuple[int, ...], stream: int, n_boot: int) -> _RankPlan:
    import numpy as np

    index, valid = _resample_plan(lengths, stream, n_boot)
    total = sum(lengths)
    per_resample = valid.sum(axis=1)
    # Each resample's draws of each step, counted in one pass over the plan (empty slots left out).
    slots = (index + np.arange(n_boot)[:, None] * total)[valid]
    drawn = np.bincount(slots, minlength=n_boot * total).reshape(n_boot, total)
    counts = np.ascontiguousarray(drawn.T, dtype=_count_dtype(int(per_resample.max())))
    return _RankPlan(counts, (per_resample - 1) // 2, per_resample // 2, bool(valid.all()))


def _count_dtype(most: int):
    """The smallest unsigned type that holds counts 0..most."""
    import numpy as np

    return np.uint8 if most <= 0xFF else np.uint16 if most <= 0xFFFF else np.uint32 if most <= 0xFFFFFFFF else np.int64


# Items x resamples counted at once: the kernel's five working arrays of this many small integers
# stay in a core's L2 cache (1.25 MiB in one-byte counts), where each pass over them is cheapest.
_CHUNK_COUNTS = 262_144


def _resampled_medians(data: np.ndarray, plan: _RankPlan) -> np.ndarray:
    """(items, n_boot) pooled medians of `data`'s rows (items x total steps) resampled by `plan`.

    Selection on ranks, not medians of gathered values: each row is sorted once and each resample's
    two middle order statistics are found as ranks, which index the sorted row. The same numbers as
    the median of the gathered values (the same two middle values, averaged the same way), many
    times faster. The k-th order statistic (from 0) of a resample is at the number of ranks at which
    its running count of draws, the steps taken in rank order, is still at most k: one pass over the
    ranks keeps, for a chunk of items and every resample at once, the running count and the two
    numbers of ranks (one byte each while a resample draws at most 255 steps).
    """
    import numpy as np

    order = np.argsort(data, axis=1, kind="stable")  # the step at each rank, per row
    ordered = np.take_along_axis(data, order, axis=1)
    counts = plan.counts
    total, n_boot = counts.shape
    # Scalars where every resample has the same count: a comparison with a scalar is the cheaper one.
    low_k = int(plan.low[0]) if plan.full else plan.low.astype(counts.dtype)
    high_k = int(plan.high[0]) if plan.full else plan.high.astype(counts.dtype)
    same = plan.full and low_k == high_k
    # A comparison's booleans add as one-byte counts without a cast.
    as_counts = np.uint8 if counts.dtype == np.uint8 else bool
    out = np.empty((len(data), n_boot))
    chunk = max(1, _CHUNK_COUNTS // n_boot)
    for start in range(0, len(data), chunk):
        steps = np.ascontiguousarray(order[start : start + chunk].T)  # (total, chunk): the step at each rank
        drawn = np.zeros((steps.shape[1], n_boot), dtype=counts.dtype)  # draws at or below the rank so far
        low = np.zeros_like(drawn)  # ranks at which the count is at most low_k
        high = low if same else np.zeros_like(drawn)
        at_most = np.empty(drawn.shape, dtype=bool)
        last = np.max(high_k)
        for rank in range(total):
            # Past the rank where every resample's count exceeds both middles nothing changes.
            if rank % 4 == 0 and rank and drawn.min() > last:
                break
            np.add(drawn, counts[steps[rank]], out=drawn)
            np.less_equal(drawn, low_k, out=at_most)
            np.add(low, at_most.view(as_counts), out=low)
            if not same:
                np.less_equal(drawn, high_k, out=at_most)
                np.add(high, at_most.view(as_counts), out=high)
        # The two ranks index the sorted rows (flat: one gather each).
        rows = ordered[start : start + chunk].ravel()
        first = (np.arange(len(steps.T)) * total)[:, None]
        lows = rows[low + first]
        highs = lows if same else rows[high + first]
        out[start : start + chunk] = (lows + highs) / 2
    return out


def _medians_of_gathered(data: np.ndarray, index: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The median of the gathered values themselves: for rows holding a NaN (which np.median propagates)."""
    import numpy as np

    values = data[:, index]
    if valid.all():
        return np.median(values, axis=2)
    return np.nanmedian(np.where(valid, values, np.nan), axis=2)


def bootstrap_medians(items: Sequence[Runs], stream: int = NUMERATOR, n_boot: int = N_BOOT) -> np.ndarray:
    """(len(items), n_boot) bootstrap pooled medians; rows of empty items are NaN.

    Items with the same run lengths share one resampling plan and are computed together.
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
        finite = np.isfinite(data).all(axis=1)
        if finite.all():
            out[positions] = _resampled_medians(data, _rank_plan(lengths, stream, n_boot))
            continue
        plan = _resample_plan(lengths, stream, n_boot)
        if finite.any():
            out[positions[finite]] = _resampled_medians(data[finite], _rank_plan(lengths, stream, n_boot))
        out[positions[~finite]] = _medians_of_gathered(data[~finite], *plan)
    return out


def percentile_interval(boot: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise percentile interval of a (rows, n_boot) array (NaN rows give NaN bounds)."""
    import numpy as np

    boot = np.atleast_2d(boot)
    tail = (1.0 - confidence) / 2 * 100
    with np.errstate(all="ignore"):
        low = np.full(len(boot), np.nan)
        high = np.full(len(boot), np.nan)
        nan = np.isnan(boot)
        whole = ~nan.any(axis=1)  # np.percentile's numbers on these rows: nanpercentile's, in one call
        if whole.any():
            low[whole], high[whole] = _row_percentiles(boot[whole], [tail, 100 - tail])
        partial = nan.any(axis=1) & ~nan.all(axis=1)
        if partial.any():
            low[partial], high[partial] = np.nanpercentile(boot[partial], [tail, 100 - tail], axis=1)
    return low, high


def _row_percentiles(rows: np.ndarray, percents: Sequence[float]) -> list[np.ndarray]:
    """np.percentile(rows, percents, axis=1) of rows without NaN: the rows sorted (a vectorised sort
    along the rows is several times faster than the partition np.percentile runs across them), then
    np.percentile's own arithmetic (its "linear" method: the order statistics either side of (n - 1)
    x q, interpolated as its `_lerp` does), so the same numbers."""
    import numpy as np

    ordered = np.sort(rows, axis=1)
    n = ordered.shape[1]
    bounds = []
    for quantile in np.true_divide(percents, 100):
        virtual = (n - 1) * quantile
        if not 0 <= virtual < n - 1:  # at an end np.percentile takes the end itself: let it
            bounds.append(np.percentile(rows, quantile * 100, axis=1))
            continue
        below = int(np.floor(virtual))
        gamma = virtual - below
        lower, upper = ordered[:, below], ordered[:, below + 1]
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


def ratio_interval(numerator_boot: np.ndarray, denominator_boot: np.ndarray, scale) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise interval of precomputed bootstrap medians' ratios (the vectorised ratio_ci)."""
    import numpy as np

    return percentile_interval(numerator_boot / denominator_boot / np.asarray(scale, dtype=float).reshape(-1, 1))


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


def compare_many(pairs: Sequence[tuple[Runs, Runs]]) -> list[Comparison]:
    """compare_runs of every (baseline, current) pair, computed together: the same numbers as one
    pair at a time (each pair's resamples depend only on its run lengths and the streams), with
    the bootstraps of all pairs in a few vectorised calls and the U tests of samples of one size
    in one call. `check` compares thousands of points this way."""
    import numpy as np

    sides = [(clean_runs(baseline), clean_runs(current)) for baseline, current in pairs]
    if any(not base or not cur for base, cur in sides):
        raise ValueError("compare_runs: each side needs at least one step")
    numerators = bootstrap_medians([cur for _, cur in sides], NUMERATOR)
    denominators = bootstrap_medians([base for base, _ in sides], DENOMINATOR)
    lows, highs = ratio_interval(numerators, denominators, np.ones(len(sides)))
    pooled = [(np.concatenate(base), np.concatenate(cur)) for base, cur in sides]
    p_values = _shift_p_values_many(pooled)
    comparisons = []
    for (base, cur), (base_steps, cur_steps), low, high, (p_greater, p_less) in zip(
        sides, pooled, lows, highs, p_values, strict=True
    ):
        base_median, cur_median = float(np.median(base_steps)), float(np.median(cur_steps))
        comparisons.append(
            Comparison(
                baseline_median=base_median,
                current_median=cur_median,
                ratio=cur_median / base_median if base_median else float("nan"),
                ci_low=float(low),
                ci_high=float(high),
                p_greater=p_greater,
                p_less=p_less,
                n_baseline=len(base_steps),
                n_current=len(cur_steps),
                runs_baseline=len(base),
                runs_current=len(cur),
            )
        )
    return comparisons


# Above this many steps per side scipy's U test is the normal approximation whatever the ties
# (scipy.stats._mannwhitneyu._mwu_choose_method), so samples of one size can be tested in one call
# with each row's own tie correction: the p-values one call per pair gives.
_ASYMPTOTIC_ABOVE = 8


def _shift_p_values_many(pooled: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[tuple[float, float]]:
    """shift_p_values of every (baseline steps, current steps) pair."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    out: list[tuple[float, float] | None] = [None] * len(pooled)
    batches: dict[tuple[int, int], list[int]] = {}
    for position, (base, cur) in enumerate(pooled):
        constant = np.all(base == base[0]) and np.all(cur == base[0])
        finite = np.isfinite(base).all() and np.isfinite(cur).all()
        if constant or not finite or min(len(base), len(cur)) <= _ASYMPTOTIC_ABOVE:
            out[position] = shift_p_values([base], [cur])
        else:
            batches.setdefault((len(base), len(cur)), []).append(position)
    for positions in batches.values():
        base = np.stack([pooled[i][0] for i in positions])
        cur = np.stack([pooled[i][1] for i in positions])
        greater = mannwhitneyu(cur, base, alternative="greater", axis=1).pvalue
        less = mannwhitneyu(cur, base, alternative="less", axis=1).pvalue
        for position, p_greater, p_less in zip(positions, greater, less, strict=True):
            out[position] = (float(p_greater), float(p_less))
    return out  # type: ignore[return-value]


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
