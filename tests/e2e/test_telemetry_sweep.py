"""Telemetry end to end on CPU: the cpu_smoke sweep (2 "nodes" at most, every rank sampling at the
default interval) stores every rank's summary and series, and a report shows the timelines.
(Telemetry off, and other intervals: tests/distributed/test_engine_process.py and the unit tests.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from bench_cli import fsdp_bench
from shared_launch import CPU_SMOKE_SWEEP, session_results

from bench.analysis.records import load_records

pytestmark = [pytest.mark.ranks, pytest.mark.timeout(900)]  # the first test to ask runs the cpu_smoke sweep
SWEEP = "cpu_smoke"


@pytest.fixture(scope="module")
def cpu_smoke(tmp_path_factory) -> Path:
    """The session's cpu_smoke sweep (tests/shared_launch.py; test_ci_baseline.py checks it)."""
    sweep = lambda results: fsdp_bench(*CPU_SMOKE_SWEEP, f"results_dir={results}", timeout=840)  # noqa: E731
    return session_results(tmp_path_factory, "cpu_smoke", sweep)


def test_every_rank_is_summarised_and_its_series_stored_beside_the_record(cpu_smoke):
    records, problems = load_records(cpu_smoke)
    assert problems == [] and len(records) == 12
    assert {r.spec.nodes for r in records} == {1, 2}
    for record in records:
        t, world = record.metrics.telemetry, record.spec.world_size
        assert record.status == "ok" and t is not None
        assert (t.interval_ms, t.ranks, t.sidecar) == (100, world, "telemetry.parquet")
        assert [r.rank for r in t.per_rank] == list(range(world)) and len(t.per_host) == 1
        assert t.window_s == record.metrics.timed_window_s
        assert 0 < t.util_pct <= 100 and t.signals["proc_rss_bytes"].max > 0
        # CPU: no GPU signals, and here no RAPL either: null with the reason, never a guess.
        assert t.energy_per_token_j is None and t.missing["energy_per_token_j"].startswith("CPU:")
        assert t.missing["nvml"].endswith("CPU device: no GPU signals")
        series = pd.read_parquet(cpu_smoke / SWEEP / record.point_id / t.sidecar)
        assert sorted(series["rank"].unique()) == list(range(world))
        assert t.samples == len(series) >= 2 * world  # a first and a last sample per rank at least
        assert {"t_s", "util_pct", "proc_cpu_pct", "proc_rss_bytes", "sys_cpu_pct"} <= set(series.columns)


def test_the_report_shows_the_timelines(cpu_smoke, tmp_path):
    # Two of the sweep's points, one per world shape, in a folder of their own.
    results = tmp_path / "results"
    for record in load_records(cpu_smoke)[0]:
        if (record.spec.strategy, record.spec.precision) == ("full_shard", "fp32"):
            shutil.copytree(cpu_smoke / SWEEP / record.point_id, results / SWEEP / record.point_id)
    report = tmp_path / "report"
    run = fsdp_bench("report", results, "-o", report)
    assert run.rc == 0, run.stdout + run.stderr
    html = (report / "report.html").read_text()
    assert (report / "telemetry.png").stat().st_size > 10_000
    assert 'id="fig-telemetry"' in html
    start = html.index('<section id="telemetry">')
    section = html[start : html.index("</section>", start)]
    assert section.count("<tr") == 1 + 2  # header and both points
