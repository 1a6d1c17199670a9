"""Rendering a report, and running a check, over a 24-point synthetic sweep (seeded, no runs needed)."""

from __future__ import annotations

import pytest

from bench.analysis.check.synthetic import make_record, step_times

GRID = [
    (nodes, strategy, precision)
    for nodes in (1, 2, 4, 8)
    for strategy in ("full_shard", "shard_grad_op", "no_shard")
    for precision in ("fp32", "bf16")
]


@pytest.fixture(scope="module")
def sweep_records():
    records = []
    for i, (nodes, strategy, precision) in enumerate(GRID):
        spec = {"nodes": nodes, "strategy": strategy, "precision": precision, "sweep.name": "bench"}
        records.append(make_record(step_times(0.01 * (1 + 0.1 * nodes), 0.05, 50, seed=i), spec=spec))
    return records


def test_render_report(benchmark, sweep_records, tmp_path):
    from reports.report.build import build_report

    page = benchmark.pedantic(build_report, args=(sweep_records, tmp_path / "report"), rounds=5, iterations=1)
    assert page.name == "report.html" and page.stat().st_size > 0
    benchmark.extra_info["points"] = len(sweep_records)


def test_check_against_baseline(benchmark, sweep_records):
    from bench.analysis.check.compare import compare
    from bench.analysis.check.points import points_from_records

    points = points_from_records(sweep_records)
    report = benchmark(lambda: compare(points, points))
    assert report.exit_code == 0 and report.matched == len(GRID)
