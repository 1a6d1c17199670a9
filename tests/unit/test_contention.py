"""Contention: the one rule that calls a scaling efficiency suspect (bench/analysis/report/contention.py),
as the aggregate computes it and the console's sweep table, the report's tables and summary.md show it."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "records"))
from record_factory import make_record, on_loaded_host, scaling_records  # noqa: E402

from bench.analysis.report.contention import SUPERLINEAR_MARGIN, suspect_efficiency  # noqa: E402
from bench.analysis.report.views import analyse  # noqa: E402
from reports.console import sweep_table  # noqa: E402
from reports.report import tables  # noqa: E402
from reports.report.build import build_report  # noqa: E402

SUPERLINEAR = "contention: efficiency 1,290 % is more than 15 points above 100 %"
LOADED_BASELINE = "its baseline was measured on a loaded host (vm)"


def loaded_baseline_sweep():
    """What a sweep on a busy host printed: the 1-node baseline ran at a tenth of its speed, so the
    2-node point reads 1,290 %; a quiet series beside it scales to 95 %."""
    return [
        on_loaded_host(make_record(nodes=1, tokens_per_s=100.0)),
        make_record(nodes=2, tokens_per_s=2580.0),
        *scaling_records({1: 1000.0, 2: 1900.0}, strategy="no_shard"),
    ]


def by_nodes(frame, strategy="full_shard"):
    rows = frame[frame["strategy"] == strategy]
    return {int(n): row for n, (_, row) in zip(rows["nodes"], rows.iterrows(), strict=True)}


def test_the_rule_and_its_thresholds():
    assert SUPERLINEAR_MARGIN == 0.15
    assert suspect_efficiency(1.15) is None  # within the margin, no interval to say otherwise
    assert suspect_efficiency(1.16) == "contention: efficiency 116 % is more than 15 points above 100 %"
    assert suspect_efficiency(1.05, 1.02) == (
        "contention: efficiency 105 % with its 95 % interval above 100 % (from 102.0 %)"
    )
    assert suspect_efficiency(1.05, 0.98) is None  # the interval reaches 100 %: noise explains it
    assert suspect_efficiency(0.95) is None
    assert suspect_efficiency(float("nan"), loaded_host="vm") is None  # no efficiency, nothing to judge
    assert suspect_efficiency(0.5, loaded_host="vm", shared=True) == (
        "contention: measured on a loaded host (vm); measured without the host lock (a shared host)"
    )
    assert suspect_efficiency(0.95, baseline_loaded_host="a b", baseline_shared=True) == (
        "contention: its baseline was measured on a loaded host (a b); its baseline was measured without the host lock"
    )


def test_a_loaded_baseline_flags_the_superlinear_point_and_the_baseline_itself():
    analysis = analyse(loaded_baseline_sweep())
    points = by_nodes(analysis.points)
    assert points[2]["scaling_efficiency"] == pytest.approx(12.9)
    assert points[2]["contention"] == f"{SUPERLINEAR}; {LOADED_BASELINE}"
    assert points[1]["contention"] == "contention: measured on a loaded host (vm)"
    cells = by_nodes(analysis.scaling)
    assert cells[2]["contention"] == points[2]["contention"]
    assert cells[1]["loaded_host"] == "vm" and not cells[1]["shared_host"]
    quiet = by_nodes(analysis.points, "no_shard")
    assert quiet[2]["scaling_efficiency"] == pytest.approx(0.95)
    assert pd.isna(quiet[1]["contention"]) and pd.isna(quiet[2]["contention"])  # no flag


def test_a_point_measured_without_the_host_lock_is_flagged_and_so_is_what_divides_by_it():
    records = [
        make_record(nodes=1, tokens_per_s=1000.0, env={"exclusive_host": False}),
        make_record(nodes=2, tokens_per_s=1900.0, env={"exclusive_host": True}),
        make_record(nodes=4, tokens_per_s=3600.0),  # a cluster launcher: exclusive_host None
    ]
    points = by_nodes(analyse(records).points)
    assert points[1]["contention"] == "contention: measured without the host lock (a shared host)"
    baseline_shared = "contention: its baseline was measured without the host lock"
    assert points[2]["contention"] == points[4]["contention"] == baseline_shared
    assert [points[n]["exclusive_host"] for n in (1, 2, 4)] == [False, True, None]


def test_with_repeats_an_interval_above_100_percent_is_flagged_below_the_margin():
    """105 % with two tight repeats a side: within the 15-point margin, but the interval says it is no noise."""
    records = [make_record(nodes=n, tokens_per_s=tps, repeat=r) for n, tps in ((1, 1000.0), (2, 2100.0))
               for r in range(2)]  # fmt: skip
    two = by_nodes(analyse(records).scaling)[2]
    assert two["scaling_efficiency"] == pytest.approx(1.05)
    assert two["eff_ci_low"] > 1.0
    assert two["contention"] == (
        f"contention: efficiency 105 % with its 95 % interval above 100 % (from {two['eff_ci_low'] * 100:.1f} %)"
    )


def test_the_sweep_table_prints_the_flag_after_the_efficiency():
    sweep = loaded_baseline_sweep()
    ids = {(r.spec.strategy, r.spec.nodes): r.point_id for r in sweep}
    lines = {line.split()[0]: line for line in sweep_table(sweep).splitlines()[2:]}
    two = lines[ids["full_shard", 2]]
    assert two.split()[7:9] == ["2,580", "1290%"]
    assert two.endswith(f"1290%  {SUPERLINEAR}; {LOADED_BASELINE}")
    assert lines[ids["no_shard", 2]].endswith("1,900     95%")  # the quiet series: no flag


def test_the_report_tables_and_summary_md_flag_it(tmp_path):
    analysis = analyse(loaded_baseline_sweep())
    results = tables.results_table(analysis.points)
    efficiency = results.columns.index("efficiency")
    flagged = [(row[5], row[efficiency], css) for row, css in zip(results.rows, results.row_classes, strict=True)]
    assert ("2", f"1290.0 % (weak, vs 1); {SUPERLINEAR}; {LOADED_BASELINE}", "flag") in flagged
    assert ("2", "95.0 % (weak, vs 1)", "") in flagged
    scaling = tables.scaling_table(analysis.scaling)
    assert [(row[-1], css) for row, css in zip(scaling.rows, scaling.row_classes, strict=True)] == [
        (f"1290.0 %; {SUPERLINEAR}; {LOADED_BASELINE}", "flag"),
        ("95.0 %", ""),
    ]
    headline = tables.headline_table(analysis.scaling)
    assert [row[6:8] for row in headline.rows] == [
        ["100.0 %", "95.0 % at 2"],  # no_shard is the fastest at 1 node
        ["1290.0 % (contention)", "1290.0 % at 2 (contention)"],
    ]
    build_report(loaded_baseline_sweep(), tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    assert "**2 point(s) with a suspect scaling efficiency (contention): more than 15 points above 100 %" in summary
    assert f"| 2 | 1290.0 % (weak, vs 1) | {SUPERLINEAR}; {LOADED_BASELINE} |" in summary
    assert "| 1 | 100.0 % (weak, vs 1) | contention: measured on a loaded host (vm) |" in summary
    html = (tmp_path / "report.html").read_text()
    assert '<section id="contention">' in html and "Suspect efficiencies: contention (2)" in html
