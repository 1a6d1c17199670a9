"""The statistics engine's intervals, pinned: a faster engine must give the intervals it gave.

tests/fixtures/records/intervals.json holds what bench.analysis.stats computed, before it was made
fast, on real fixture records (every `result.json` under tests/fixtures/records: the report's cell
and efficiency intervals, check's ratio intervals and p-values of the version-1 sweep against its
baseline) and on seeded synthetic runs that reach every path of the engine (runs of equal and of
unequal lengths, up to 255 steps and beyond).

Centers (pooled medians, ratios of them, efficiencies) involve no resampling: they must be equal.
Interval bounds are percentiles of N_BOOT resamples: an engine that resamples differently (another
plan, another N_BOOT) moves them by its Monte-Carlo error, which TOLERANCE bounds. Measured on
these 27 intervals with 20 other seeds (bench.analysis.stats.SEED 1-20 against 0; docs/reports.md
"How precise the intervals are"): a bound moved by a median 3 % of its interval's width, 19 % at the
95th percentile, 27 % at most: the version-1 cells have 2 runs of 3 steps, whose resampled medians
take a handful of values, so a bound jumps from one to the next. TOLERANCE is 35 %: above every
move a reseeding made, far below a changed statistic (a one-level bootstrap, another pooling).
The engine as it is resamples exactly as the pinned one did (the same draws on the same streams)
and gives the same bounds bit for bit. The U test's p-values are exact functions of the samples:
equal too.

Regenerate only on purpose (a deliberate change of the statistic), with the code to be pinned:
    python tests/unit/test_intervals.py --write
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.analysis.check.baseline import load_side
from bench.analysis.check.synthetic import step_times
from bench.analysis.records import load_records
from bench.analysis.report.views import analyse
from bench.analysis.stats import compare_runs, median_ci, ratio_ci

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
EXPECTED = FIXTURES / "intervals.json"
# A bound may move by this fraction of its interval's width (the module docstring says why).
TOLERANCE = 0.35
# Centers and p-values: rounding only.
EXACT = 1e-12


def _runs(lengths: list[int], level: float, seed: int) -> list[list[float]]:
    return [step_times(level, 0.05, n, seed=seed + i) for i, n in enumerate(lengths)]


# Seeded synthetic runs: (name, run lengths, level, seed); lengths of one set equal or not, totals
# below and above 255 steps.
SYNTHETIC = [
    ("three_equal_runs", [30, 30, 30], 0.050, 1),
    ("three_unequal_runs", [30, 20, 25], 0.050, 11),
    ("two_runs_of_100", [100, 100], 0.052, 21),
    ("three_runs_of_100", [100, 100, 100], 0.050, 31),
    ("unequal_over_255", [150, 120], 0.049, 41),
    ("five_short_runs", [10, 10, 10, 10, 10], 0.051, 51),
]


def _triple(values: tuple[float, float, float]) -> list[float]:
    return [float(v) for v in values]


def snapshot() -> dict[str, Any]:
    """Every pinned number, computed by the code at hand."""
    records, problems = load_records(FIXTURES)
    assert records and not [p for p in problems if "v1" in str(p.path)]
    analysis = analyse(records)
    cells = {
        ",".join(sorted(row.point_ids)): _triple((row.tokens_per_s, row.tps_ci_low, row.tps_ci_high))
        for row in analysis.cells.itertuples()
    }
    point_ids = analysis.cells["point_ids"]
    scaling = {
        f"{row.mode}:{','.join(sorted(point_ids.loc[row.cell]))}": _triple(
            (row.scaling_efficiency, row.eff_ci_low, row.eff_ci_high)
        )
        for row in analysis.scaling.itertuples()
        if row.mode != "single"
    }
    base, cur = load_side(FIXTURES / "v1_baseline.json"), load_side(FIXTURES / "v1" / "v1_scaling")
    base_by_key = {p.key: p for p in base.points}
    check = {}
    for point in cur.points:
        if point.key in base_by_key and point.step_runs:
            c = compare_runs(base_by_key[point.key].step_runs, point.step_runs)
            check[point.key] = [c.ratio, c.ci_low, c.ci_high, c.p_greater, c.p_less]
    synthetic: dict[str, Any] = {}
    for name, lengths, level, seed in SYNTHETIC:
        runs = _runs(lengths, level, seed)
        other = _runs(lengths, 0.050, seed + 100)
        synthetic[name] = {
            "median_ci": _triple(median_ci(runs)),
            "ratio_ci": _triple(ratio_ci(runs, other, scale=2.0)),
        }
    return {"cells": cells, "scaling": scaling, "check": check, "synthetic": synthetic}


@pytest.fixture(scope="module")
def pinned() -> tuple[dict[str, Any], dict[str, Any]]:
    return json.loads(EXPECTED.read_text()), snapshot()


def _assert_interval(name: str, expected: list[float], got: list[float]) -> None:
    center, low, high = expected
    assert got[0] == pytest.approx(center, rel=EXACT, nan_ok=True), f"{name}: center"
    if math.isnan(low):
        assert math.isnan(got[1]) and math.isnan(got[2]), f"{name}: an interval where there was none"
        return
    slack = TOLERANCE * (high - low)
    assert abs(got[1] - low) <= slack and abs(got[2] - high) <= slack, f"{name}: {got[1:]} against {expected[1:]}"


def test_report_cell_intervals_of_the_fixture_records(pinned):
    expected, got = pinned
    assert set(got["cells"]) == set(expected["cells"])
    with_interval = [name for name, (_, low, _) in expected["cells"].items() if not math.isnan(low)]
    assert len(with_interval) >= 6  # the version-1 sweep's repeated cells
    for name, values in expected["cells"].items():
        _assert_interval(name, values, got["cells"][name])


def test_report_efficiency_intervals_of_the_fixture_records(pinned):
    expected, got = pinned
    assert set(got["scaling"]) == set(expected["scaling"])
    assert sum(not math.isnan(low) for _, low, _ in expected["scaling"].values()) >= 3
    for name, values in expected["scaling"].items():
        _assert_interval(name, values, got["scaling"][name])


def test_check_intervals_and_p_values_of_the_version_1_sweep_against_its_baseline(pinned):
    expected, got = pinned
    assert set(got["check"]) == set(expected["check"]) and len(expected["check"]) == 6
    for key, (ratio, low, high, p_greater, p_less) in expected["check"].items():
        _assert_interval(key, [ratio, low, high], got["check"][key][:3])
        assert got["check"][key][3:] == pytest.approx([p_greater, p_less], rel=EXACT)


@pytest.mark.parametrize("name", [case[0] for case in SYNTHETIC])
def test_synthetic_intervals_on_fixed_seeds(pinned, name):
    expected, got = pinned
    for kind in ("median_ci", "ratio_ci"):
        _assert_interval(f"{name} {kind}", expected["synthetic"][name][kind], got["synthetic"][name][kind])


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        EXPECTED.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {EXPECTED}")
