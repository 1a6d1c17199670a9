"""Scaling arithmetic on hand-made records: efficiency, speedup, weak vs strong, repeats, predictions."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, scaling_records  # noqa: E402

from bench.analysis.report.views import analyse  # noqa: E402
from bench.analysis.stats import median_ci, ratio_ci  # noqa: E402


def _row(scaling, **match):
    rows = scaling
    for key, value in match.items():
        rows = rows[rows[key] == value]
    assert len(rows) == 1, f"expected one row for {match}, got {len(rows)}"
    return rows.iloc[0]


def test_efficiency_one_node_1000_two_nodes_1900_is_95_percent():
    analysis = analyse(scaling_records({1: 1000.0, 2: 1900.0}))
    two = _row(analysis.scaling, nodes=2)
    assert two["scaling_efficiency"] == pytest.approx(0.95)
    assert two["speedup"] == pytest.approx(1.9)
    assert two["baseline_nodes"] == 1
    assert two["mode"] == "weak"
    assert _row(analysis.scaling, nodes=1)["scaling_efficiency"] == pytest.approx(1.0)
    point = analysis.points[analysis.points["nodes"] == 2].iloc[0]
    assert point["scaling_efficiency"] == pytest.approx(0.95)
    assert point["scaling_mode"] == "weak"


def test_baseline_is_the_smallest_node_count_of_the_series():
    analysis = analyse(scaling_records({2: 2000.0, 4: 3600.0, 8: 6400.0}))
    eight = _row(analysis.scaling, nodes=8)
    assert eight["baseline_nodes"] == 2
    assert eight["scaling_efficiency"] == pytest.approx((6400 / 2000) / (8 / 2))  # 0.8
    assert eight["speedup"] == pytest.approx(3.2)


def test_fixed_per_device_batch_is_weak_scaling():
    records = scaling_records({1: 1000.0, 2: 1900.0, 4: 3600.0}, micro_batch=4, grad_accum=2)
    analysis = analyse(records)
    assert set(analysis.scaling["mode"]) == {"weak"}
    assert list(analysis.scaling["global_batch"]) == [8, 16, 32]  # the global batch grew with the nodes


def test_fixed_global_batch_is_strong_scaling():
    # Global batch 8 on 1, 2, 4 nodes (one rank each): the per-device batch shrinks 8 -> 4 -> 2.
    records = [
        make_record(nodes=1, tokens_per_s=1000.0, micro_batch=8),
        make_record(nodes=2, tokens_per_s=1800.0, micro_batch=4),
        make_record(nodes=4, tokens_per_s=3000.0, micro_batch=2),
    ]
    analysis = analyse(records)
    assert set(analysis.scaling["mode"]) == {"strong"}
    assert list(analysis.scaling["global_batch"]) == [8, 8, 8]
    assert _row(analysis.scaling, nodes=4)["scaling_efficiency"] == pytest.approx(0.75)
    assert list(analysis.points.sort_values("nodes")["scaling_mode"]) == ["strong"] * 3


def test_weak_sweep_over_two_batches_makes_no_spurious_strong_series():
    # micro_batch 2 and 4 at 1 and 2 nodes: global batch 4 occurs at both node counts, yet every
    # point already belongs to a weak series, so no strong series is reported.
    records = scaling_records({1: 1000.0, 2: 1900.0}, micro_batch=2) + scaling_records(
        {1: 1800.0, 2: 3500.0}, micro_batch=4
    )
    scaling = analyse(records).scaling
    assert set(scaling["mode"]) == {"weak"}
    assert scaling["series"].nunique() == 2


def test_strong_series_is_kept_when_it_scales_points_no_weak_series_covers():
    records = scaling_records({1: 1000.0, 2: 1900.0}, micro_batch=2) + [
        make_record(nodes=2, tokens_per_s=1200.0, micro_batch=1)
    ]  # global batch 2, as at 1 node
    analysis = analyse(records)
    strong = analysis.scaling[analysis.scaling["mode"] == "strong"]
    assert list(strong["nodes"]) == [1, 2]
    assert strong.iloc[1]["scaling_efficiency"] == pytest.approx(0.6)
    lone = analysis.points[(analysis.points["micro_batch"] == 1)].iloc[0]
    assert lone["scaling_mode"] == "strong"
    assert lone["scaling_efficiency"] == pytest.approx(0.6)


def test_different_strategies_are_separate_series():
    records = scaling_records({1: 1000.0, 2: 1900.0}, strategy="full_shard") + scaling_records(
        {1: 1000.0, 2: 1200.0}, strategy="no_shard"
    )
    scaling = analyse(records).scaling
    assert _row(scaling, strategy="full_shard", nodes=2)["scaling_efficiency"] == pytest.approx(0.95)
    assert _row(scaling, strategy="no_shard", nodes=2)["scaling_efficiency"] == pytest.approx(0.6)


def test_single_node_count_has_no_efficiency():
    analysis = analyse([make_record(nodes=2, tokens_per_s=500.0)])
    row = _row(analysis.scaling, nodes=2)
    assert row["mode"] == "single"
    assert math.isnan(row["scaling_efficiency"])
    assert math.isnan(analysis.points.iloc[0]["scaling_efficiency"])


def test_failed_points_stay_in_the_frame_but_not_in_the_scaling():
    records = scaling_records({1: 1000.0, 2: 1900.0}) + [
        make_record(nodes=4, status="oom", error="CUDA out of memory", tokens_per_s=None)
    ]
    analysis = analyse(records)
    assert list(analysis.points["status"]) == ["ok", "ok", "oom"]
    assert analysis.points.iloc[2]["error"] == "CUDA out of memory"
    assert sorted(analysis.scaling["nodes"]) == [1, 2]


def test_repeats_give_the_median_and_a_bootstrap_interval():
    records = [
        make_record(nodes=n, tokens_per_s=tps, repeat=r)
        for n, samples in {1: [900.0, 1000.0, 1100.0], 2: [1700.0, 1900.0, 2000.0]}.items()
        for r, tps in enumerate(samples)
    ]
    analysis = analyse(records)
    assert len(analysis.points) == 6
    one, two = _row(analysis.scaling, nodes=1), _row(analysis.scaling, nodes=2)
    assert one["repeats"] == 3
    assert one["tokens_per_s"] == pytest.approx(1000.0)
    assert two["tokens_per_s"] == pytest.approx(1900.0)
    assert two["scaling_efficiency"] == pytest.approx(0.95)
    assert 1700.0 <= two["tps_ci_low"] <= 1900.0 <= two["tps_ci_high"] <= 2000.0
    assert two["eff_ci_low"] < 0.95 < two["eff_ci_high"]
    # The baseline's efficiency is 1 by definition: no interval.
    assert one["scaling_efficiency"] == 1.0 and math.isnan(one["eff_ci_low"])


def test_bootstrap_is_deterministic_and_brackets_the_pooled_median():
    runs = [[10.0, 12.0, 11.0], [13.0, 9.0, 11.0]]
    assert median_ci(runs) == median_ci(runs)
    median, low, high = median_ci(runs)
    assert median == 11.0 and 9.0 <= low <= 11.0 <= high <= 13.0
    # One run: step-to-step noise alone would understate the spread, so no interval.
    assert median_ci([[5.0, 6.0, 7.0]])[0] == 6.0 and math.isnan(median_ci([[5.0, 6.0, 7.0]])[1])
    point, low, high = ratio_ci([[1900.0, 1950.0], [1925.0]], [[1000.0], [1000.0, 1001.0]], scale=2.0)
    assert point == pytest.approx(1925.0 / 1000.0 / 2.0)
    assert 0.94 <= low <= point <= high <= 0.98


def test_measured_efficiency_10_points_below_prediction_is_flagged():
    predicted = {
        "scaling_efficiency": 0.95,
        "tokens_per_s_per_device": 1000.0,
        "memory_bytes_per_device": {"total": 3 * 2**30},
    }
    records = [
        make_record(nodes=1, tokens_per_s=1000.0, prediction={**predicted, "scaling_efficiency": 1.0}),
        make_record(nodes=2, tokens_per_s=1700.0, prediction=predicted),  # 85 %: 10 points below, not more
        make_record(nodes=4, tokens_per_s=3000.0, prediction=predicted),
    ]  # 75 %: flagged
    analysis = analyse(records)
    points = analysis.points.set_index("nodes")
    assert list(points["below_prediction"]) == [False, False, True]
    assert points.loc[4, "pred_scaling_efficiency"] == pytest.approx(0.95)
    assert points.loc[4, "pred_memory_bytes"] == 3 * 2**30
    assert bool(_row(analysis.scaling, nodes=4)["below_prediction"]) is True


def test_records_without_prediction_have_no_flags():
    analysis = analyse(scaling_records({1: 1000.0, 2: 1000.0}))
    assert not analysis.points["below_prediction"].any()
    assert analysis.points["pred_scaling_efficiency"].isna().all()


def test_rerun_of_a_point_keeps_only_the_latest_record():
    old = make_record(nodes=1, tokens_per_s=500.0)
    new = old.model_copy(
        update={"finished_at": "2025-02-01T00:00:00+00:00", "metrics": make_record(nodes=1, tokens_per_s=800.0).metrics}
    )
    points = analyse([new, old]).points
    assert len(points) == 1 and points.iloc[0]["tokens_per_s"] == 800.0
