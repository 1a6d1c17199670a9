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
else is being bootstrapped: a report bootstraps thousands of cells in a few vectorised calls and
still gets, for each cell, what `check` gets for that cell alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from bench.schema.identity import canonical_json, without
from bench.schema.spec import SERIES_DROPPED

# numpy is imported inside the functions that compute with it: `plan` reads only scaling_key and
# scaling_efficiency from here, and importing numpy is a quarter of a second of its start-up.
if TYPE_CHECKING:
    import numpy as np

N_BOOT = 2000  # the 2.5 % and 97.5 % percentiles move by well under 1 % of the width between seeds
CONFIDENCE = 0.95
# The level as printed ("95"): every "95% CI" in a table or a message is formatted from CONFIDENCE.
CONFIDENCE_PCT = f"{CONFIDENCE * 100:g}"
SEED = 0
MIN_RUNS = 2
# The two sides of a ratio use independent streams: NUMERATOR for the current / scaled side,
# DENOMINATOR for the baseline. A lone interval uses NUMERATOR.
NUMERATOR, DENOMINATOR = 0, 1
# Items bootstrapped per numpy call: bounds the (chunk x N_BOOT x steps) gather to ~50 MB.
_CHUNK_ELEMENTS = 6_000_000

Runs = Sequence[Sequence[float]]


def clean_runs(runs: Runs) -> list[np.ndarray]:
    """Runs as float arrays, empty runs dropped."""
    import numpy as np

    return [np.asarray(r, dtype=float) for r in runs if len(r)]


def pooled_median(runs: Runs) -> float:
    """The center of a set of runs: the median of all their steps pooled (NaN when empty)."""
    import numpy as np

    arrays = clean_runs(runs)
    return float(np.median(np.concatenate(arrays))) if arrays else float("nan")


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


def bootstrap_medians(items: Sequence[Runs], stream: int = NUMERATOR, n_boot: int = N_BOOT) -> np.ndarray:
    """(len(items), n_boot) bootstrap pooled medians; rows of empty items are NaN.

    Items with the same run lengths share one resampling plan and are computed together.
    """
    import numpy as np

    out = np.full((len(items), n_boot), np.nan)
    groups: dict[tuple[int, ...], list[tuple[int, np.ndarray]]] = {}
    for position, runs in enumerate(items):
        arrays = clean_runs(runs)
        if arrays:
            groups.setdefault(tuple(len(a) for a in arrays), []).append((position, np.concatenate(arrays)))
    for lengths, members in groups.items():
        index, valid = _resample_plan(lengths, stream, n_boot)
        chunk = max(1, _CHUNK_ELEMENTS // index.size)
        for start in range(0, len(members), chunk):
            part = members[start : start + chunk]
            data = np.stack([flat for _, flat in part])  # (chunk, total steps)
            values = data[:, index]  # (chunk, n_boot, runs x width)
            if not valid.all():
                values = np.where(valid, values, np.nan)
                medians = np.nanmedian(values, axis=2)
            else:
                medians = np.median(values, axis=2)
            out[[position for position, _ in part]] = medians
    return out


def percentile_interval(boot: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise percentile interval of a (rows, n_boot) array (NaN rows give NaN bounds)."""
    import numpy as np

    boot = np.atleast_2d(boot)
    tail = (1.0 - confidence) / 2 * 100
    with np.errstate(all="ignore"):
        low = np.full(len(boot), np.nan)
        high = np.full(len(boot), np.nan)
        rows = ~np.isnan(boot).all(axis=1)
        if rows.any():
            low[rows], high[rows] = np.nanpercentile(boot[rows], [tail, 100 - tail], axis=1)
    return low, high


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
    base, cur = clean_runs(baseline), clean_runs(current)
    if not base or not cur:
        raise ValueError("compare_runs: each side needs at least one step")
    ratio, low, high = ratio_ci(cur, base, min_runs=1)
    p_greater, p_less = shift_p_values(base, cur)
    return Comparison(
        baseline_median=pooled_median(base),
        current_median=pooled_median(cur),
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        p_greater=p_greater,
        p_less=p_less,
        n_baseline=sum(len(r) for r in base),
        n_current=sum(len(r) for r in cur),
        runs_baseline=len(base),
        runs_current=len(cur),
    )


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
