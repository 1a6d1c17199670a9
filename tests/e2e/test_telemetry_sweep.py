"""Telemetry end to end on CPU: a 2-"node" sweep stores every rank's summary and series, and its report
shows the timelines. (Telemetry off: tests/distributed/test_engine_process.py and the unit tests.)"""

from __future__ import annotations

import pandas as pd
import pytest

pytestmark = pytest.mark.ranks  # every test here starts ranks

SHORT = ["model=debug", "train.steps=4", "train.warmup_steps=1", "train.seq_len=32"]
SWEEP = "telemetry_e2e"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, fsdp_bench):
    results = tmp_path_factory.mktemp("telemetry") / "results"
    run = fsdp_bench(
        "sweep", *SHORT, "nodes=1,2", "telemetry.interval_ms=20", f"sweep.name={SWEEP}", f"results_dir={results}",
        results=results, timeout=240,
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    return run, results


def test_every_rank_is_summarised_and_its_series_stored_beside_the_record(sweep):
    run, results = sweep
    assert sorted(r.spec.nodes for r in run.records) == [1, 2]
    for record in run.records:
        t, world = record.metrics.telemetry, record.spec.world_size
        assert record.status == "ok" and t is not None
        assert (t.interval_ms, t.ranks, t.sidecar) == (20, world, "telemetry.parquet")
        assert [r.rank for r in t.per_rank] == list(range(world)) and len(t.per_host) == 1
        assert t.window_s == record.metrics.timed_window_s
        assert 0 < t.util_pct <= 100 and t.signals["proc_rss_bytes"].max > 0
        # CPU: no GPU signals, and here no RAPL either: null with the reason, never a guess.
        assert t.energy_per_token_j is None and t.missing["energy_per_token_j"].startswith("CPU:")
        assert t.missing["nvml"].endswith("CPU device: no GPU signals")
        series = pd.read_parquet(results / SWEEP / record.point_id / t.sidecar)
        assert sorted(series["rank"].unique()) == list(range(world))
        assert t.samples == len(series) >= 2 * world  # a first and a last sample per rank at least
        assert {"t_s", "util_pct", "proc_cpu_pct", "proc_rss_bytes", "sys_cpu_pct"} <= set(series.columns)


def test_the_sweep_report_shows_the_timelines(sweep):
    _, results = sweep
    report = results / SWEEP / "report"
    html = (report / "report.html").read_text()
    assert (report / "telemetry.png").stat().st_size > 10_000
    assert 'id="fig-telemetry"' in html
    start = html.index('<section id="telemetry">')
    section = html[start : html.index("</section>", start)]
    assert section.count("<tr") == 1 + 2  # header and both points
