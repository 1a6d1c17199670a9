"""What history's gate can detect in a series: its run-to-run noise, and the smallest shift the
detector finds with at least DETECTION_PROBABILITY given that noise and the runs on each side.

The noise is estimated from the series' own runs, robustly: the median absolute deviation of the
successive differences of log values within the segments between change points (a step is no
noise, and one bad night moves two differences of many, not the estimate). On log values a shift's
detectability depends only on its size over the noise and on the runs before and after it, so the
detector's power is one table, `shift per unit of noise` by (runs before, runs after), simulated once
with the detector itself (scripts/power_table.py, `simulate_cell` here) and committed
(data/power.json); history only reads it. docs/history.md says how the numbers are used.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bench.analysis.history.detect import MIN_RUNS_AFTER, MIN_SERIES_RUNS, WINDOW, detect

TABLE = Path(__file__).with_name("data") / "power.json"
# The probability with which the stated shift is detected.
DETECTION_PROBABILITY = 0.95
# The default of --target-shift: a series whose detectable shift is larger is not gated.
DEFAULT_TARGET_SHIFT = 0.10
# Runs after a change the power is stated for when no gate is set (--fail-on-new-regression N sets N):
# the window ci/nightly.sh gates by default.
DEFAULT_RUNS_AFTER = 3
# Successive differences needed for a noise estimate (fewer: the series is not gated, `noise unknown`).
MIN_DIFFERENCES = 4
# The MAD of a normal sample over its standard deviation; a difference of two runs has sqrt(2) times
# a run's deviation.
MAD_TO_SD = 1.4826
# More repeats than this are not suggested: the series' noise is for the machine to fix, not repeats.
MAX_REPEATS = 100


@dataclass(frozen=True)
class Power:
    """A series' noise (standard deviation of log values per run, robust) and what follows from it:
    the smallest shift detected with DETECTION_PROBABILITY (a fraction of the metric, the worse way;
    None where the table has none for these runs), whether that is within the target, and the
    repeats per night that would make it so (noise of pooled repeats taken to shrink as 1/sqrt)."""

    noise: float | None
    runs_before: int
    runs_after: int
    detectable: float | None
    target: float
    repeats: int | None = None

    @property
    def gated(self) -> bool:
        return self.detectable is not None and self.detectable <= self.target

    def reason(self) -> str:
        """Why the series is not gated, with what would gate it ("" when it is gated)."""
        if self.gated:
            return ""
        if self.noise is None:
            return f"noise unknown: fewer than {MIN_DIFFERENCES} successive runs without a change point"
        if self.detectable is None:
            return f"{self.runs_before} run(s) before the last {self.runs_after}: too few to detect any shift"
        head = (
            f"detects >= {self.detectable * 100:.1f}% > target {self.target * 100:g}% (noise {self.noise * 100:.1f}%)"
        )
        if self.repeats is None:
            return f"{head}; more than {MAX_REPEATS} repeats per night would be needed"
        return f"{head}; gateable with {self.repeats} repeats per night"


def noise(values: Sequence[float], changes: Sequence[int] = ()) -> float | None:
    """The standard deviation of log values per run, from the successive differences within the
    segments between change points (`changes`: the first run after each); None with fewer than
    MIN_DIFFERENCES differences."""
    logs = [math.log(max(v, 1e-300)) for v in values]
    bounds = [0, *changes, len(logs)]
    diffs = [logs[i + 1] - logs[i] for start, stop in zip(bounds, bounds[1:]) for i in range(start, stop - 1)]
    if len(diffs) < MIN_DIFFERENCES:
        return None
    center = _median(diffs)
    return MAD_TO_SD * _median([abs(d - center) for d in diffs]) / math.sqrt(2.0)


def _median(xs: list[float]) -> float:
    ordered = sorted(xs)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


@dataclass(frozen=True)
class PowerTable:
    """Detectable shift per unit of noise (log units), by runs before and runs after a change."""

    runs_before: tuple[int, ...]
    runs_after: tuple[int, ...]
    shift: dict[tuple[int, int], float | None]

    def lookup(self, before: int, after: int) -> float | None:
        """The entry for at most these runs (the nearest tabulated counts below: fewer runs detect
        less, so the answer errs on the safe side); None below the table or where no shift is found."""
        i, j = bisect_right(self.runs_before, before) - 1, bisect_right(self.runs_after, after) - 1
        if i < 0 or j < 0:
            return None
        # Past the window, runs before do not help Otava: the table stops at WINDOW runs in all.
        while i >= 0 and (self.runs_before[i], self.runs_after[j]) not in self.shift:
            i -= 1
        return self.shift.get((self.runs_before[i], self.runs_after[j])) if i >= 0 else None


@cache
def power_table(path: Path = TABLE) -> PowerTable:
    """The committed table (read once per process)."""
    data = json.loads(path.read_text())
    shift = {(int(b), int(a)): value for b, a, value in data["cells"]}
    return PowerTable(tuple(data["runs_before"]), tuple(data["runs_after"]), shift)


def series_power(
    values: Sequence[float], changes: Sequence[int], *, window: int | None, target: float, higher_is_better: bool
) -> Power:
    """The Power of a series for a gate on its last `window` runs (DEFAULT_RUNS_AFTER without one):
    runs before are those since the last change point before that window, up to the detector's window."""
    after = window if window is not None else DEFAULT_RUNS_AFTER
    start = max([0, *(c for c in changes if c <= len(values) - after)])
    before = min(len(values) - after - start, WINDOW - after)
    sd = noise(values, changes)
    if sd is None:
        return Power(None, before, after, None, target)
    per_noise = power_table().lookup(before, after)
    if per_noise is None:
        return Power(sd, before, after, None, target)
    detectable = as_fraction(per_noise * sd, higher_is_better)
    repeats = None
    if detectable > target:
        wanted = -math.log(1.0 - target) if higher_is_better else math.log(1.0 + target)
        needed = math.ceil((per_noise * sd / wanted) ** 2)
        repeats = needed if needed <= MAX_REPEATS else None
    return Power(sd, before, after, detectable, target, repeats)


def as_fraction(log_shift: float, higher_is_better: bool) -> float:
    """A shift of log values as a fraction of the metric, the worse way: a drop of tokens/s or MFU,
    a rise of step time."""
    return 1.0 - math.exp(-log_shift) if higher_is_better else math.exp(log_shift) - 1.0


# The simulation behind the table (scripts/power_table.py; a unit test recomputes a few cells).
# Upper bound of the search, in units of noise: a shift this large that is still missed is a cell
# the detector cannot gate at all (too few runs).
MAX_SHIFT = 20.0
# Bisection steps: the shift to 20 / 2**10 = 0.02 units of noise.
BISECTIONS = 10


def detected(logs: Sequence[float], before: int) -> bool:
    """Whether history's gate on the last `len(logs) - before` runs fails on this series of log
    values: a change point among them, for the worse (values down)."""
    values = [math.exp(x) for x in logs]
    for point in detect(values):
        if point.index >= before:
            left, right = logs[max(0, point.index - WINDOW) : point.index], logs[point.index :]
            if sum(right) / len(right) < sum(left) / len(left):
                return True
    return False


def detection_rate(noise_draws: Sequence[Sequence[float]], before: int, shift: float) -> float:
    """The fraction of the noise draws (unit normal, before + after runs each) in which a drop of
    `shift` units of noise at run `before` is detected."""
    hits = sum(detected([z - shift if i >= before else z for i, z in enumerate(draw)], before) for draw in noise_draws)
    return hits / len(noise_draws)


def simulate_cell(before: int, after: int, simulations: int, seed: int) -> float | None:
    """The smallest shift (units of noise) detected with DETECTION_PROBABILITY at `before` runs
    before and `after` runs after, by bisection over the same noise draws (None: not at MAX_SHIFT)."""
    import numpy as np

    if before + after < MIN_SERIES_RUNS or after < MIN_RUNS_AFTER:
        return None
    rng = np.random.default_rng([seed, before, after])
    draws = rng.standard_normal((simulations, before + after)).tolist()
    if detection_rate(draws, before, MAX_SHIFT) < DETECTION_PROBABILITY:
        return None
    low, high = 0.0, MAX_SHIFT
    for _ in range(BISECTIONS):
        middle = (low + high) / 2.0
        if detection_rate(draws, before, middle) >= DETECTION_PROBABILITY:
            high = middle
        else:
            low = middle
    return round(high, 4)
